"""One model identity for every way a model is reached (`runners.model.identity.locate`).

Each scenario served another model's rows, or filed rows under the wrong key, before the key
revision came from one function: a Hub id was keyed `unknown` (transformers 5 no longer sets
`config._commit_hash`), a folder below an HF-cache snapshot took the snapshot's commit, a
chat template in `additional_chat_templates/` was not hashed, weights swapped during the load
were hashed after it, and a second `--model-name` split one key into two "models".

Hub models are placed in a throwaway Hugging Face cache (`models--org--name/snapshots/<sha>`
with `refs/main`), read with the Hub offline, exactly as huggingface_hub lays a download out.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from loop_items import ITEMS, write_loop_prompts
from probes.cli import app
from runners import results as res
from runners.model import identity as model_identity
from runners_fixtures import write_tiny_llama

SHA_A = "a" * 40
SHA_B = "b" * 40
SHA_A2 = "c" * 40


@pytest.fixture()
def prompts(tmp_path: Path) -> Path:
    return write_loop_prompts(tmp_path / "prompts", ITEMS)


@pytest.fixture()
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HF cache that huggingface_hub and transformers read (the Hub is offline in the tests)."""
    import huggingface_hub.constants

    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def _place(cache: Path, repo: str, commit: str, *, seed: int, main: bool = True, layers: int = 2) -> Path:
    """A tiny model as the snapshot `commit` of `repo` in the HF cache; `refs/main` points at it if `main`."""
    root = cache / f"models--{repo.replace('/', '--')}"
    snapshot = write_tiny_llama(root / "snapshots" / commit, seed=seed, layers=layers)
    if main:
        (root / "refs").mkdir(parents=True, exist_ok=True)
        (root / "refs" / "main").write_text(commit)
    return snapshot


def _run(prompts: Path, model: str, out: Path, *extra: str) -> tuple[int, str]:
    args = ["run", str(prompts), "--config", "items", "--model", model, "--out", str(out), "-q"]
    result = CliRunner().invoke(app, [*args, "--batch-size", "4", *extra])
    return result.exit_code, result.output


def _ok(prompts: Path, model: str, out: Path, *extra: str) -> str:
    code, output = _run(prompts, model, out, *extra)
    assert code == 0, output
    return output


def _keys(out: Path) -> dict[str, pa.Table]:
    return {d.name: res.read_key_rows(d) for d in sorted((out / "data" / "items").iterdir()) if res.part_files(d)}


def _probs(rows: pa.Table) -> dict[str, list[float]]:
    """{id: the item's probabilities} (option probabilities, or the number distribution)."""
    table = rows.to_pylist()
    return {r["id"]: r["choice_probs"] or r["number_probs"] for r in table}


def test_two_hub_models_in_one_out_get_two_keys_and_their_own_numbers(
    tmp_path: Path, prompts: Path, hub_cache: Path
) -> None:
    _place(hub_cache, "org/A", SHA_A, seed=1)
    _place(hub_cache, "org/B", SHA_B, seed=2)
    out = tmp_path / "results"
    _ok(prompts, "org/A", out)
    second = _ok(prompts, "org/B", out)
    assert f"{len(ITEMS)} items scored (0 already done" in second, second
    keys = _keys(out)
    assert len(keys) == 2
    revisions = {rows.column("model_revision")[0].as_py(): rows for rows in keys.values()}
    assert set(revisions) == {SHA_A, SHA_B}  # the commits, never "unknown" or a branch name
    a, b = _probs(revisions[SHA_A]), _probs(revisions[SHA_B])
    assert max(abs(x - y) for i in a for x, y in zip(a[i], b[i], strict=True)) > 1e-3


def test_a_moved_refs_main_is_rescored_under_the_new_commit(tmp_path: Path, prompts: Path, hub_cache: Path) -> None:
    _place(hub_cache, "org/A", SHA_A, seed=1)
    out = tmp_path / "results"
    _ok(prompts, "org/A", out)
    _place(hub_cache, "org/A", SHA_A2, seed=3)  # main moves to new weights
    again = _ok(prompts, "org/A", out)
    assert f"{len(ITEMS)} items scored (0 already done" in again, again
    revisions = sorted(rows.column("model_revision")[0].as_py() for rows in _keys(out).values())
    assert revisions == [SHA_A, SHA_A2]


def test_a_hub_revision_that_cannot_be_resolved_is_an_error_unless_a_commit_is_named(
    tmp_path: Path, prompts: Path, hub_cache: Path
) -> None:
    _place(hub_cache, "org/A", SHA_A, seed=1, main=False)  # in the cache, but no ref names it
    out = tmp_path / "results"
    code, output = _run(prompts, "org/A", out)
    assert code == 1 and "Traceback" not in output, output
    assert "cannot resolve Hub model 'org/A' at revision 'main'" in output and "--model-revision" in output
    assert not out.exists()
    _ok(prompts, "org/A", out, "--model-revision", SHA_A)
    assert [rows.column("model_revision")[0].as_py() for rows in _keys(out).values()] == [SHA_A]


def test_a_plan_and_a_budget_price_the_model_at_its_model_revision(
    tmp_path: Path, prompts: Path, hub_cache: Path
) -> None:
    """`--model-revision` reaches what prices the model: `probes plan` and `probes run --budget-hours` read the
    config and tokenizer at that commit (here 8 layers, where main has 2), exactly as the snapshot's folder
    prices; before, both read main's, and a model with no `refs/main` could not be budgeted at all."""
    from probes import api

    _place(hub_cache, "org/A", SHA_A, seed=1)
    snapshot_b = _place(hub_cache, "org/A", SHA_B, seed=2, main=False, layers=8)

    def plan(model: str, revision: str | None = None) -> dict:
        return api.plan(api.PlanRequest(prompts, model, model_revision=revision, scoring="sentence", chat=False))

    at_b, folder_b, main = plan("org/A", SHA_B), plan(str(snapshot_b)), plan("org/A")
    assert at_b["model_revision"] == SHA_B and main["model_revision"] is None
    assert at_b["model_shape"] == folder_b["model_shape"] != main["model_shape"]
    assert at_b["totals"] == folder_b["totals"] != main["totals"]
    json_out = tmp_path / "plan.json"
    args = ["plan", str(prompts), "-m", "org/A", "--model-revision", SHA_B, "--scoring", "sentence", "--no-chat"]
    result = CliRunner().invoke(app, [*args, "--json", str(json_out), "-q"])
    assert result.exit_code == 0, result.output
    assert json.loads(json_out.read_text())["model_shape"] == folder_b["model_shape"]

    # a budget every item fits: the whole config at either revision, priced at the revision's shape
    terms = api.BudgetTerms(backend="hf", chat=False, settings={"scoring": "sentence"})
    at_rev = api.budget_sample(prompts, ["items"], "org/A", 1.0, replace(terms, model_revision=SHA_B))
    in_folder = api.budget_sample(prompts, ["items"], str(snapshot_b), 1.0, terms)
    at_main = api.budget_sample(prompts, ["items"], "org/A", 1.0, terms)
    assert (at_rev.size, at_rev.hours) == (in_folder.size, in_folder.hours) and at_rev.hours != at_main.hours

    # the run: main no longer names a snapshot, so only the revision given can be priced and loaded
    (hub_cache / "models--org--A" / "refs" / "main").unlink()
    out = tmp_path / "results"
    code, output = _run(prompts, "org/A", out, "--model-revision", SHA_B, "--budget-hours", "1", "--backend", "hf")
    assert code == 0, output
    assert f"--budget-hours 1: --sample {in_folder.size:,} (" in output
    assert [rows.column("model_revision")[0].as_py() for rows in _keys(out).values()] == [SHA_B]


def test_two_checkpoints_under_one_snapshot_get_two_keys(tmp_path: Path, prompts: Path, hub_cache: Path) -> None:
    snapshot = hub_cache / "models--org--run" / "snapshots" / SHA_A
    first = write_tiny_llama(snapshot / "ckpt-100", seed=1)
    second = write_tiny_llama(snapshot / "ckpt-200", seed=2)
    assert model_identity.folder_revision(first) != model_identity.folder_revision(second)
    assert model_identity.folder_revision(first) != SHA_A
    out = tmp_path / "results"
    _ok(prompts, str(first), out)
    again = _ok(prompts, str(second), out)
    assert f"{len(ITEMS)} items scored (0 already done" in again, again
    assert len(_keys(out)) == 2
    # the snapshot folder itself is still keyed by its commit (it names the content)
    write_tiny_llama(snapshot, seed=1)
    assert model_identity.folder_revision(snapshot) == SHA_A


def test_a_chat_template_in_a_subfolder_changes_the_key(tmp_path: Path, prompts: Path) -> None:
    model = write_tiny_llama(tmp_path / "m", seed=1)
    before = model_identity.folder_revision(model)
    out = tmp_path / "results"
    _ok(prompts, str(model), out)
    templates = model / "additional_chat_templates"
    templates.mkdir()
    (templates / "tool_use.jinja").write_text("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    assert model_identity.folder_revision(model) != before
    again = _ok(prompts, str(model), out)
    assert f"{len(ITEMS)} items scored (0 already done" in again, again


def test_weights_swapped_while_the_model_loads_are_detected(
    tmp_path: Path, prompts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runners.backends.hf.backend import HFBackend

    model = write_tiny_llama(tmp_path / "m", seed=1)
    other = write_tiny_llama(tmp_path / "other", seed=2)
    load = HFBackend.from_pretrained.__func__

    def swap_during_load(cls, *args, **kwargs):
        backend = load(cls, *args, **kwargs)
        shutil.copy2(other / "model.safetensors", model / "model.safetensors")  # the mtime is carried over
        return backend

    monkeypatch.setattr(HFBackend, "from_pretrained", classmethod(swap_during_load))
    out = tmp_path / "results"
    code, output = _run(prompts, str(model), out)
    assert code == 1 and "Traceback" not in output, output
    assert "changed while it was loading" in output
    assert not list(out.rglob("*.parquet"))


def test_a_second_model_name_for_one_key_is_refused(tmp_path: Path, prompts: Path) -> None:
    model = write_tiny_llama(tmp_path / "m", seed=1)
    out = tmp_path / "results"
    _ok(prompts, str(model), out, "--model-name", "org/first", "--limit", "2")
    code, output = _run(prompts, str(model), out, "--model-name", "org/second")
    assert code == 1 and "Traceback" not in output, output
    assert "'org/first'" in output and "--model-name" in output
    (folder,) = _keys(out)
    rows = _keys(out)[folder]
    assert set(rows.column("model").to_pylist()) == {"org/first"} and rows.num_rows == 2
    assert json.loads((out / "data" / "items" / folder / "key.json").read_text())["model"] == "org/first"
    # the same name resumes as before
    _ok(prompts, str(model), out, "--model-name", "org/first")
    assert _keys(out)[folder].num_rows == len(ITEMS)


def test_a_gguf_file_is_keyed_by_its_own_bytes_and_checked_after_loading(tmp_path: Path) -> None:
    """`--gguf-file`: the GGUF is the weights (other weight files in the folder do not count), in a snapshot too."""
    from promptgen.core.errors import ProbeError

    folder = tmp_path / "hub" / "models--org--g" / "snapshots" / SHA_A  # a snapshot is hashed when a GGUF is named
    folder.mkdir(parents=True)
    (folder / "m.Q8.gguf").write_bytes(b"gguf-weights-1")
    (folder / "tokenizer_config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"other weights")
    cache = model_identity.FileHashCache(tmp_path / "hashes.json")
    ref = model_identity.locate(str(folder), gguf_file="m.Q8.gguf", cache=cache)
    assert ref.local and ref.revision.startswith("sha256-") and ref.revision != SHA_A
    names = [p.name for p in model_identity.content_files(folder, gguf_file="m.Q8.gguf")]
    assert names == ["m.Q8.gguf", "tokenizer_config.json"]
    (folder / "model.safetensors").write_bytes(b"changed, but not what loads")
    ref.check_unchanged(cache)
    (folder / "m.Q8.gguf").write_bytes(b"gguf-weights-2")  # swapped while it loaded
    with pytest.raises(ProbeError, match="changed while it was loading"):
        ref.check_unchanged(cache)
    assert model_identity.locate(str(folder), gguf_file="m.Q8.gguf", cache=cache).revision != ref.revision
    with pytest.raises(ProbeError, match=r"has no GGUF file other\.gguf"):
        model_identity.locate(str(folder), gguf_file="other.gguf", cache=cache)
    # a path as --gguf-file said "model folder has no weight files": one line naming the folder to give
    elsewhere = tmp_path / "g1"
    elsewhere.mkdir()
    (elsewhere / "x.gguf").write_bytes(b"gguf")
    with pytest.raises(ProbeError, match=r"--gguf-file \.\./g1/x\.gguf is a path: .*--model .*g1 --gguf-file x\.gguf"):
        model_identity.locate(str(tmp_path / "hub"), gguf_file="../g1/x.gguf", cache=cache)


@pytest.mark.parametrize(
    ("model", "model_name", "flag"),
    [
        ("org/\u202eevil", None, "--model"),
        ("org/m", "org/\u2066evil\u2069", "--model-name"),
        ("org/\u200fm", None, "--model"),
    ],
)
def test_a_model_name_with_bidirectional_controls_is_refused(model: str, model_name: str | None, flag: str) -> None:
    """`org/\u202eevil` displays as `org/live`: stored in every row, it would spoof another model's results."""
    from promptgen.core.errors import ProbeError
    from runners.run.session import model_name_for

    with pytest.raises(ProbeError) as caught:
        model_name_for(model, model_name)
    line = str(caught.value)
    assert line.startswith(f"{flag} ") and "bidirectional control character" in line and "\n" not in line
    assert not any(c in line for c in "\u202e\u2066\u2069\u200f")  # named by code point, not printed
    assert model_name_for("org/m", None) == "org/m" and model_name_for("x", "org/m") == "org/m"


def test_the_name_a_run_derives_is_checked_like_model_name(tmp_path: Path) -> None:
    """Issue #69: a local folder's own name becomes the key's name (never the path to it), so that name is checked:
    one line saying where it came from and to give --model-name; a good folder name and --model-name pass."""
    from promptgen.core.errors import ProbeError
    from runners.run.request import RunRequest
    from runners.run.session import model_name_for

    for folder, says in (("m1\u200b", "U+200B"), ("\uff4d1", "give it as 'm1'")):
        model = tmp_path / folder
        model.mkdir()
        (model / "config.json").write_text("{}")
        with pytest.raises(ProbeError) as caught:
            model_name_for(str(model), None)
        line = str(caught.value)
        assert line.startswith("the model name taken from --model ") and says in line, line
        assert line.endswith("name the results with --model-name ORG/MODEL") and "\n" not in line
        assert model_name_for(str(model), "org/m1") == "org/m1"
    good = tmp_path / "parent" / ".." / "tiny-model.v2"
    good.mkdir(parents=True)
    (good / "config.json").write_text("{}")
    assert model_name_for(str(good), None) == "tiny-model.v2"  # the path's `..` is the path's, not the name's
    # `probes run --model-name` is refused as the request is made, before any model loads
    with pytest.raises(ProbeError, match=r"^--model-name 'org/\.\./x' has a '\.\.' part"):
        RunRequest("d", "c", "org/m", tmp_path / "out", model_name="org/../x")
