"""Results you can trust (runners.model.identity, runners.run.session, runners.results).

Every scenario here served stale rows before the result key covered the model's content,
the dtype, the chat template and each row's prompt: the rerun scored nothing. Each test
changes one thing and checks that the affected items are scored again, into another key when
the model or settings changed, and that no key folder ever mixes two models' rows.

The model is a tiny random-weight Llama with SmolLM2's real tokenizer (seconds to load and
to hash), saved as a safetensors folder like any checkpoint (`runners_fixtures.write_tiny_llama`).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from cli_fixture import unwritable_out
from loop_items import ITEMS, write_loop_prompts
from probes.cli import app
from runners import results as res
from runners.model import identity as model_identity
from runners_fixtures import require_extra, write_tiny_llama


def _run(prompts: Path, model: Path | str, out: Path, *extra: str) -> str:
    args = ["run", str(prompts), "--config", "items", "--model", str(model), "--out", str(out), "-q"]
    result = CliRunner().invoke(app, [*args, "--batch-size", "4", *extra])
    assert result.exit_code == 0, result.output
    return result.output


def _keys(out: Path) -> dict[str, pa.Table]:
    """{key folder name: its rows} of config `items`."""
    return {d.name: res.read_key_rows(d) for d in sorted((out / "data" / "items").iterdir()) if res.part_files(d)}


def _one_model_per_key(out: Path) -> None:
    for name, rows in _keys(out).items():
        assert len(set(rows.column("model_revision").to_pylist())) == 1, name
        assert len(set(rows.column("scoring").to_pylist())) == 1, name
        ids = rows.column("id").to_pylist()
        assert len(ids) == len(set(ids)), name


@pytest.fixture()
def prompts(tmp_path: Path) -> Path:
    return write_loop_prompts(tmp_path / "prompts", ITEMS)


def test_checkpoint_replaced_in_place_is_rescored(tmp_path: Path, prompts: Path) -> None:
    model = write_tiny_llama(tmp_path / "ckpt", seed=1)
    out = tmp_path / "results"
    assert "4 items scored (0 already done)" in _run(prompts, model, out, "--limit", "4", "--no-chat")
    before = (model / "model.safetensors").stat().st_size
    write_tiny_llama(tmp_path / "ckpt", seed=2)  # same config, same sizes, other weights, same path
    assert (model / "model.safetensors").stat().st_size == before
    assert "4 items scored (0 already done)" in _run(prompts, model, out, "--limit", "4", "--no-chat")
    keys = _keys(out)
    assert len(keys) == 2
    a, b = (rows.sort_by("id") for rows in keys.values())
    assert a.column("model_revision")[0] != b.column("model_revision")[0]
    assert a.column("choice_probs").to_pylist() != b.column("choice_probs").to_pylist()
    # a later, larger run of checkpoint B adds to B's key only: A's rows never mix in
    assert "3 items scored (4 already done)" in _run(prompts, model, out, "--no-chat")
    _one_model_per_key(out)


def test_a_snapshots_folder_outside_an_hf_cache_is_rescored_after_its_weights_change(
    tmp_path: Path, prompts: Path
) -> None:
    """A folder named `snapshots/<40 hex>` that is not in an HF cache (no `models--ORG--NAME` above it) was keyed
    by its name, so new weights there reused the old rows: it is hashed like any folder now."""
    model = write_tiny_llama(tmp_path / "exports" / "snapshots" / ("cd" * 20), seed=1)
    out = tmp_path / "results"
    assert "3 items scored (0 already done)" in _run(prompts, model, out, "--limit", "3", "--no-chat")
    write_tiny_llama(model, seed=2)  # other weights, same path
    assert "3 items scored (0 already done)" in _run(prompts, model, out, "--limit", "3", "--no-chat")
    revisions = {rows.column("model_revision")[0].as_py() for rows in _keys(out).values()}
    assert len(revisions) == 2 and all(r.startswith("sha256-") for r in revisions)


def test_chat_template_changed_is_rescored(tmp_path: Path, prompts: Path) -> None:
    model = write_tiny_llama(tmp_path / "m", seed=1)
    out = tmp_path / "results"
    _run(prompts, model, out, "--limit", "3", "--chat")
    template = model / "chat_template.jinja"
    template.write_text(template.read_text().replace("<|im_start|>system", "<|im_start|>system\nBe brief."))
    assert "3 items scored (0 already done)" in _run(prompts, model, out, "--limit", "3", "--chat")
    assert len(_keys(out)) == 2
    _one_model_per_key(out)


def test_dtype_changed_is_another_key(tmp_path: Path, prompts: Path) -> None:
    model = write_tiny_llama(tmp_path / "m", seed=1)
    out = tmp_path / "results"
    _run(prompts, model, out, "--limit", "3", "--no-chat", "--dtype", "float32")
    assert "3 items scored (0 already done)" in _run(
        prompts, model, out, "--limit", "3", "--no-chat", "--dtype", "bfloat16"
    )
    manifest = json.loads((out / res.MANIFEST_NAME).read_text())
    by_key = {run["key"]: run["dtype"] for run in manifest["runs"].values()}
    assert sorted(by_key.values()) == ["bfloat16", "float32"]
    for name, rows in _keys(out).items():
        assert json.loads(rows.column("scoring")[0].as_py())["dtype"] == by_key[name]
    _one_model_per_key(out)


def test_changed_prompts_are_rescored_and_merge_to_one_row_per_id(tmp_path: Path) -> None:
    model = write_tiny_llama(tmp_path / "m", seed=1)
    out = tmp_path / "results"
    first = write_loop_prompts(tmp_path / "v1", ITEMS)
    _run(first, model, out, "--no-chat")
    changed = [dict(item) for item in ITEMS]
    changed[0]["prompt"] = changed[0]["prompt"].replace("passed the exam", "failed the exam")
    second = write_loop_prompts(tmp_path / "v2", changed)  # same ids, one prompt changed
    args = ["run", str(second), "-c", "items", "-m", str(model), "--out", str(out), "-q", "--no-chat"]
    refused = CliRunner().invoke(app, args)  # another build into this folder: only when asked for
    assert refused.exit_code != 0 and "holds rows scored on another build of its prompts" in refused.output
    assert "--rescore-changed" in refused.output and "Traceback" not in refused.output
    output = _run(second, model, out, "--no-chat", "--rescore-changed")
    assert "1 items scored (6 already done, 1 rescored after a prompt change)" in output
    (key,) = _keys(out).values()
    row = {r["id"]: r for r in key.to_pylist()}[ITEMS[0]["id"]]
    assert row["prompt_sha256"] == res.prompt_sha256(changed[0]) != res.prompt_sha256(ITEMS[0])
    # compacted at the end of the run: the files themselves hold one row per id
    (folder,) = (d for d in (out / "data" / "items").iterdir() if d.is_dir())
    ids = [i for p in res.part_files(folder) for i in pq.read_table(p, columns=["id"]).column("id").to_pylist()]
    assert sorted(ids) == sorted(item["id"] for item in ITEMS)


def test_one_model_reached_by_a_copy_a_relative_path_or_a_slash_is_one_key(
    tmp_path: Path, prompts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = write_tiny_llama(tmp_path / "m", seed=1)
    out = tmp_path / "results"
    _run(prompts, model, out, "--limit", "3", "--no-chat")
    monkeypatch.chdir(tmp_path)
    assert "0 items scored (3 already done)" in _run(prompts, "m/", out, "--limit", "3", "--no-chat")
    copy = shutil.copytree(model, tmp_path / "elsewhere" / "other-name")
    assert "0 items scored (3 already done)" in _run(prompts, copy, out, "--limit", "3", "--no-chat")
    assert len(_keys(out)) == 1


def test_model_name_is_portable_and_not_the_identity(tmp_path: Path, prompts: Path) -> None:
    model = write_tiny_llama(tmp_path / "m", seed=1)
    out = tmp_path / "results"
    _run(prompts, model, out, "--limit", "2", "--no-chat", "--model-name", "org/tiny-llama")
    (rows,) = _keys(out).values()
    assert set(rows.column("model").to_pylist()) == {"org/tiny-llama"}
    assert next((out / "data" / "items").iterdir()).name.startswith("tiny-llama-")
    assert "0 items scored (2 already done)" in _run(prompts, model, out, "--limit", "2", "--no-chat")
    result = CliRunner().invoke(app, ["run", str(prompts), "-c", "items", "-m", str(model), "--out", str(out),
                                      "--model-name", str(tmp_path)])  # fmt: skip
    assert result.exit_code == 1 and "is a local path" in result.output


def test_out_refuses_a_prompt_dataset_folder(prompts: Path, tmp_path: Path) -> None:
    card = (prompts / "README.md").read_text()
    result = CliRunner().invoke(
        app,
        [
            "run",
            str(prompts),
            "-c",
            "items",
            "-m",
            str(write_tiny_llama(tmp_path / "m", seed=1)),
            "--out",
            str(prompts),
        ],
    )
    assert result.exit_code == 1 and "is a prompt dataset folder" in result.output
    assert (prompts / "README.md").read_text() == card


def test_no_absolute_local_path_in_what_run_writes(tmp_path: Path, prompts: Path) -> None:
    model = write_tiny_llama(tmp_path / "m", seed=1)
    out = tmp_path / "results"
    _run(prompts, model, out, "--no-chat")
    roots = {str(tmp_path), str(tmp_path.resolve()), str(Path.home())}
    for path in out.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if path.suffix == ".parquet":  # compressed: look at the values
                data = json.dumps(pq.read_table(path).to_pylist(), default=str).encode()
            for root in roots:
                assert root.encode() not in data, (path, root)


def test_file_hashes_are_cached_by_path_size_and_mtime(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    weights = folder / "model.safetensors"
    weights.write_bytes(b"a" * 1000)
    cache_file = tmp_path / "hashes.json"
    first = model_identity.FileHashCache(cache_file)
    rev = model_identity.folder_revision(folder, cache=first)
    assert first.hashed == 2
    again = model_identity.FileHashCache(cache_file)
    assert model_identity.folder_revision(folder, cache=again) == rev and again.hashed == 0
    weights.write_bytes(b"b" * 1000)  # same size, new mtime and bytes
    os.utime(weights, ns=(1, 1))
    third = model_identity.FileHashCache(cache_file)
    assert model_identity.folder_revision(folder, cache=third) != rev and third.hashed == 1
    snapshot = tmp_path / "hub" / "models--org--m" / "snapshots" / ("ab" * 20)
    shutil.copytree(folder, snapshot)
    assert model_identity.folder_revision(snapshot) == "ab" * 20


def _update(args: tuple[str, int]) -> None:
    results, i = args
    res.update_manifest(Path(results), f"items/key/run-{i:03d}", {"n": i})


def test_concurrent_manifest_updates_lose_nothing(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(8) as pool:
        pool.map(_update, [(str(tmp_path), i) for i in range(200)], chunksize=1)
    runs = json.loads((tmp_path / res.MANIFEST_NAME).read_text())["runs"]
    assert sorted(runs) == [f"items/key/run-{i:03d}" for i in range(200)]


def test_two_concurrent_runs_on_one_key_give_every_id_once(tmp_path: Path, prompts: Path) -> None:
    model = write_tiny_llama(tmp_path / "m", seed=1)
    out = tmp_path / "results"
    cmd = [sys.executable, "-c", "from probes.cli import app; app()", "run", str(prompts), "-c", "items"]
    cmd += ["-m", str(model), "--out", str(out), "--no-chat", "--batch-size", "1", "--flush-every", "1", "-q"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-4000:] for _, err in outputs]  # the error is at the end
    shards = [
        subprocess.Popen([*cmd, "--shard", f"{i}/2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in range(2)
    ]
    outputs = [p.communicate(timeout=600) for p in shards]
    assert [p.returncode for p in shards] == [0, 0], [err[-4000:] for _, err in outputs]
    (folder,) = (d for d in (out / "data" / "items").iterdir() if d.is_dir())
    ids = sorted(res.read_key_rows(folder).column("id").to_pylist())
    assert ids == sorted(item["id"] for item in ITEMS)
    on_disk = [i for p in res.part_files(folder) for i in pq.read_table(p, columns=["id"]).column("id").to_pylist()]
    assert sorted(on_disk) == ids  # compacted: one row per id in the files too
    runs = json.loads((out / res.MANIFEST_NAME).read_text())["runs"]
    assert sorted(r.rsplit("/", 1)[1] for r in runs) == ["shard-0of1", "shard-0of2", "shard-1of2"]


@pytest.mark.parametrize("reader", ["read_key_rows", "row_counts", "resume"])
def test_a_part_merged_away_between_listing_and_reading_is_read_from_the_merged_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str
) -> None:
    """What a second run on the same key met (`test_two_concurrent_runs...`, one exit 1 in CI): it listed the
    key folder's parts, the other run merged them (`compact_key`), and reading a listed part failed."""
    from runners.results import parts as parts_module
    from runners.results.resume import _read_done

    folder = tmp_path / "key"
    folder.mkdir()
    written = [["a", "b"], ["b", "c"], ["d"]]
    for n, ids in enumerate(written):
        res.write_part(folder, (0, 1), [{"id": i, "context_tokens": n} for i in ids])
    want = {"a": 0, "b": 1, "c": 1, "d": 2}  # the newest part's row of each id
    listing = parts_module.part_files
    calls = []

    def stale_listing(where: Path) -> list[Path]:
        paths = listing(where)
        calls.append(len(paths))
        if len(calls) == 1:  # another process compacts right after this reader listed the folder
            assert res.compact_key(where) and all(not p.exists() for p in paths)
        return paths

    monkeypatch.setattr(parts_module, "part_files", stale_listing)
    if reader == "read_key_rows":
        rows = res.read_key_rows(folder, ["context_tokens"]).to_pylist()
        assert {r["id"]: r["context_tokens"] for r in rows} == want
    elif reader == "row_counts":
        assert res.row_counts(folder) == (4, 0)
    else:
        assert sorted(_read_done(folder).rows.column("id").to_pylist()) == sorted(want)
    assert calls == [3, 3, 1]  # the reader's listing, the compaction's, the reader's again: the merged part


def test_merging_a_runs_parts_that_another_run_compacted_away_keeps_every_row(tmp_path: Path) -> None:
    """A run's finish merges the parts it wrote (`Session.finish`); a second run on the key that finished
    first has compacted them into its own part meanwhile: the merge leaves them out, nothing is lost."""
    folder = tmp_path / "key"
    folder.mkdir()
    other = res.write_part(folder, (0, 1), [{"id": "x", "context_tokens": 9}])
    written = [res.write_part(folder, (0, 1), [{"id": i, "context_tokens": n}]) for n, i in enumerate("abc")]
    assert res.compact_key(folder) and not any(p.exists() for p in [other, *written])
    assert res.merge_parts(folder, written) is None
    rows = {r["id"]: r["context_tokens"] for r in res.read_key_rows(folder, ["context_tokens"]).to_pylist()}
    assert rows == {"x": 9, "a": 0, "b": 1, "c": 2}
    late = res.write_part(folder, (0, 1), [{"id": "d", "context_tokens": 3}])  # one written after the compaction
    assert res.merge_parts(folder, [*written, late]) is None and late.exists()  # one part: nothing to merge


def test_unwritable_out_for_run_is_one_line_before_the_model_loads(tmp_path: Path, prompts: Path) -> None:
    require_extra("hf")  # without it, the missing extra is what `probes run` reports first
    out = unwritable_out(tmp_path)
    args = ["run", str(prompts), "-c", "items", "-m", str(tmp_path / "no-model-needed"), "--out", str(out)]
    result = CliRunner().invoke(app, args)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert lines[0].startswith("error: --out") and "cannot write" in lines[0] and "Traceback" not in result.output


def test_a_killed_writers_temp_files_are_removed_at_the_next_run(tmp_path: Path) -> None:
    from runners.run.session import STALE_TEMP_SECONDS, remove_stale_temp_files

    folder = tmp_path / "key"
    folder.mkdir()
    old = folder / ".part-00000of00001-1-a.parquet.x1y2.tmp"
    fresh = folder / ".part-00000of00001-2-b.parquet.z3w4.tmp"  # a live writer's, mid-write
    part = folder / "part-00000of00001-3-c.parquet"
    for path in (old, fresh, part):
        path.write_bytes(b"x")
    stale = fresh.stat().st_mtime - STALE_TEMP_SECONDS - 1
    os.utime(old, (stale, stale))
    assert remove_stale_temp_files(folder) == [old]
    assert not old.exists() and fresh.exists() and part.exists()


def test_newest_rows_is_the_last_occurrence_of_each_id() -> None:
    import random

    rng = random.Random(0)
    ids = [f"i{rng.randrange(50)}" for _ in range(300)]
    last = {item_id: k for k, item_id in enumerate(ids)}
    keep = res.newest_rows(pa.array(ids))
    assert keep is not None and keep.to_pylist() == sorted(last.values())
    assert res.newest_rows(pa.array(sorted(set(ids)))) is None


def test_compaction_keeps_the_newest_row_per_id_in_one_part_per_prompt_content(tmp_path: Path) -> None:
    folder = tmp_path / "key"
    folder.mkdir()
    written = [  # (content label, ids), oldest first
        (None, ["a", "b", "c", "d"]),
        ("X", ["c", "e"]),
        (None, ["d", "f", "g", "z"]),  # z: not checked, stays unlabelled
        ("Y", ["g", "h"]),
    ]
    parts = [
        res.write_part(folder, (0, 1), [{"id": i, "context_tokens": n} for i in ids], content=label)
        for n, (label, ids) in enumerate(written)
    ]
    # a run under X checked the rows of the unlabelled parts whose ids it selected: a, b, d, f
    checked = {parts[0].name, parts[2].name}
    assert res.compact_key(folder, content="X", checked=checked, ids=pa.array(["a", "b", "d", "f"]))
    want: dict[str, tuple[str | None, int]] = {}  # id -> (label, part it came from), by the rule
    for n, (label, ids) in enumerate(written):
        for i in ids:
            moved = parts[n].name in checked and i in ("a", "b", "d", "f")
            want[i] = ("X" if moved else label, n)
    got = {}
    for part in res.part_files(folder):
        label = res.part_content(pq.read_schema(part))
        for row in pq.read_table(part).to_pylist():
            assert row["id"] not in got
            got[row["id"]] = (label, row["context_tokens"])
    assert got == want
    labels = [res.part_content(pq.read_schema(p)) for p in res.part_files(folder)]
    assert sorted(labels, key=str) == sorted({label for label, _ in want.values()}, key=str)  # one part each
    before = res.part_files(folder)
    assert not res.compact_key(folder, content="X", checked=checked)  # in shape, and those parts are gone
    assert res.part_files(folder) == before


def test_compaction_brings_parts_of_an_older_schema_up_to_date(tmp_path: Path) -> None:
    """A part written before `number_bound`/`trie_positions` existed is rewritten with them null, rows unchanged."""
    folder = tmp_path / "key"
    folder.mkdir()
    part = res.write_part(folder, (0, 1), [{"id": i, "context_tokens": n} for n, i in enumerate("abc")], content="X")
    table = pq.read_table(part)
    pq.write_table(
        table.drop_columns(["number_bound", "trie_positions"]).replace_schema_metadata(table.schema.metadata), part
    )
    assert res.compact_key(folder, content="X")
    (merged,) = res.part_files(folder)
    assert pq.read_schema(merged).names == res.RESULT_SCHEMA.names
    rows = pq.read_table(merged).to_pylist()
    assert [(r["id"], r["context_tokens"], r["number_bound"], r["trie_positions"]) for r in rows] == [
        ("a", 0, None, None),
        ("b", 1, None, None),
        ("c", 2, None, None),
    ]
    assert not res.compact_key(folder, content="X")  # current now: nothing to rewrite
