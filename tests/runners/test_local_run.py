"""The run loop (runners.run.local_driver, runners.rows, runners.results, `probes run`) on a tiny folder and SmolLM2."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets import Features
from typer.testing import CliRunner

from loop_items import FEATURES, IDS, ITEMS
from probes.cli import app
from promptgen.core import contract
from promptgen.core.errors import ProbeError
from promptgen.core.files import sha256_file
from promptgen.hub.folder import ConfigData, card_front_matter, write_hub_folder
from runners.model import identity as model_identity
from runners.prompts import load_prompt_config
from runners.results import parse_shard, read_key_rows, shard_of
from runners.run import local_driver
from runners.run.request import RunRequest
from runners.scoring.settings import ScoringSettings
from runners_fixtures import load_folder, load_model, load_tokenizer, require_extra


def _config(name: str, rows: list[dict], features: Features = FEATURES) -> ConfigData:
    return ConfigData(name, features, lambda: iter([{k: [r[k] for r in rows] for k in features}]))


@pytest.fixture(scope="module")
def prompts_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("prompts")
    bad_features = Features({k: v for k, v in FEATURES.items() if k not in ("probe", "messages")})
    configs = [_config("items", ITEMS), _config("bad", ITEMS[:2], bad_features)]

    def card(manifest: dict, written: list) -> str:
        written = [*written, type(written[0])("empty", 0, ())]
        front = card_front_matter(pretty_name="t", license="cc0-1.0", tags=[], configs=written, default_config=None)
        return f"---\n{front}---\n# t\n"

    manifest = {"recipe": {"sha256": "0" * 64}, "parameters": {}, "sources": []}
    path = write_hub_folder(out, "tiny", configs, manifest=manifest, render_card=card, rows_per_shard=100)
    (path / "data" / "empty").mkdir()
    empty = "data/empty/test-00000-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist([], FEATURES.arrow_schema), path / empty)
    # listed in the manifest like a built config's files, so the run gets as far as reading it
    built = json.loads((path / "build_manifest.json").read_text())
    entry = {"path": empty, "sha256": sha256_file(path / empty), "bytes": (path / empty).stat().st_size}
    built["configs"]["empty"] = {"rows": 0, "files": [entry]}
    (path / "build_manifest.json").write_text(json.dumps(built))
    return path


@pytest.fixture(autouse=True, scope="module")
def _datasets_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A private datasets cache: its keys for local folders ignore the files' content (see `_load`)."""
    import datasets

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path_factory.mktemp("hf-datasets"))
        yield


@pytest.fixture(scope="module")
def env() -> dict[str, Any]:
    from runners.backends.hf.backend import HFBackend

    folder = load_folder()
    backend = HFBackend(load_model(), model_id=str(folder))
    return {
        "backend": backend,
        "tokenizer": load_tokenizer(),
        "revision": model_identity.locate(str(folder)).revision,
    }


def _run(prompts_dir: Path, env: dict, out: Path, **kw: Any) -> local_driver.RunSummary:
    # one item per backend call: an item's numbers then do not depend on which items share its
    # batch (padding changes fp32 results by ~1e-6), so resumed and sharded runs match exactly
    kw.setdefault("batch_size", 1)
    prompts = load_prompt_config(str(prompts_dir), "items")
    request = RunRequest(prompts_dir, "items", env["backend"].model_id, out, chat=False, **kw)
    return local_driver.run_config(prompts, env["backend"], env["tokenizer"], request, model_revision=env["revision"])


def _load(out: Path) -> list[dict]:
    import datasets

    # datasets 4 reuses its cached copy of a local folder even after files were added or
    # replaced, so the result folder is always re-read here
    return datasets.load_dataset(str(out), "items", split="test", download_mode="force_redownload").to_list()


def _probs(rows: list[dict]) -> dict[str, list[float]]:
    return {r["id"]: r["choice_probs"] if r["choice_probs"] is not None else r["number_probs"] for r in rows}


@pytest.fixture(scope="module")
def reference(prompts_dir: Path, env: dict, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[float]]:
    """Probabilities of one uninterrupted, unsharded run."""
    out = tmp_path_factory.mktemp("reference")
    _run(prompts_dir, env, out)
    return _probs(_load(out))


def _assert_same(rows: list[dict], reference: dict[str, list[float]], atol: float = 1e-6) -> None:
    assert sorted(r["id"] for r in rows) == IDS  # every id exactly once
    got = _probs(rows)
    for item_id, probs in reference.items():
        np.testing.assert_allclose(got[item_id], probs, atol=atol)


@pytest.mark.slow
def test_cli_end_to_end(prompts_dir: Path, tmp_path: Path, reference: dict) -> None:
    out = tmp_path / "results"
    args = ["run", str(prompts_dir), "--config", "items", "--model", str(load_folder()), "--out", str(out)]
    budget = ["--max-batch-tokens", "64"]  # about one context per pass: results do not depend on it
    result = CliRunner().invoke(app, [*args, "--no-chat", "--batch-size", "4", "--flush-every", "4", *budget])
    assert result.exit_code == 0, result.output
    assert re.search(r"7 items scored \(0 already done\), \d+ refusals, [0-9.]+ items/s", result.output)
    rows = _load(out)
    _assert_same(rows, reference, atol=1e-5)  # batched 4 items at a time: fp32 padding noise
    for row in rows:
        probs = row["choice_probs"] if row["id"].startswith("choice") else row["number_probs"]
        assert sum(probs) == pytest.approx(1.0, abs=1e-9)
        assert len(probs) == (4 if row["id"].startswith("choice") else 11)
        assert row["model"] == load_folder().name and row["model_revision"].startswith("sha256-")  # no local path
        assert json.loads(row["scoring"])["chat"] is False and row["chat"] is False
    (key_dir,) = (out / "data" / "items").iterdir()
    assert len(list(key_dir.glob("part-*.parquet"))) == 1  # flushed every 4 items, compacted at the end
    manifest = json.loads((out / "results_manifest.json").read_text())
    (run,) = manifest["runs"].values()
    assert run["items"] == 7 and run["dtype"] == "float32" and run["backend"] == "hf"
    assert run["hardware"]["max_batch_tokens"] == 64
    # tokens/s counts computed tokens: exactly what runners.scoring.token_accounting plans for these calls
    from runners.backends.hf.accounting import hf_token_counts
    from runners.rows import cached_digit_start_ids, prepare_request

    tok = load_tokenizer()
    items = load_prompt_config(str(prompts_dir), "items").dataset.to_list()
    requests = [prepare_request(i, tok, False, ScoringSettings(), cached_digit_start_ids(tok)) for i in items]
    planned = hf_token_counts(requests, max_batch_tokens=64, items_per_call=4)
    assert run["tokens_counted"] == "computed" and run["tokens"] == planned.computed_tokens
    assert run["prompt_tokens"] == sum(
        len(r.context) + sum(map(len, r.continuations)) * (not r.candidates) for r in requests
    )
    assert (
        run["prompt_dataset"]["fingerprint"]
        == json.loads((prompts_dir / "build_manifest.json").read_text())["fingerprint"]
    )
    assert run["scoring"]["choice_mode"] == "sentence" and run["items_per_s"] > 0
    assert manifest["configs"]["items"][key_dir.name]["rows"] == 7
    readme = (out / "README.md").read_text()
    assert "data/items/*/part-*.parquet" in readme and "license: cc0-1.0" in readme
    assert f"| `items/{key_dir.name}/shard-0of1` |" in readme and "| 7 | " in readme and "method" not in readme

    again = CliRunner().invoke(app, [*args, "--no-chat"])  # nothing left to do
    assert again.exit_code == 0 and "0 items scored (7 already done)" in again.output
    assert sorted(r["id"] for r in _load(out)) == IDS


@pytest.mark.slow
def test_resume_after_limit_and_crash(
    prompts_dir: Path, env: dict, tmp_path: Path, reference: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "limited"
    assert _run(prompts_dir, env, out, limit=3).items == 3
    assert read_key_rows(next((out / "data" / "items").iterdir()), ["id"]).num_rows == 3
    summary = _run(prompts_dir, env, out)
    assert (summary.items, summary.skipped) == (4, 3)
    _assert_same(_load(out), reference)

    crashed = tmp_path / "crashed"
    calls = {"n": 0}
    backend = env["backend"]
    real = backend.score

    def dies_after_first_flush(*args: Any, **kw: Any) -> list:
        # the backend's 5th call (one item per call) dies: the run was killed mid-scoring
        calls["n"] += 1
        if calls["n"] == 5:
            raise RuntimeError("killed")
        return real(*args, **kw)

    monkeypatch.setattr(backend, "score", dies_after_first_flush)
    with pytest.raises(RuntimeError, match="killed"):
        _run(prompts_dir, env, crashed, flush_every=3)
    monkeypatch.setattr(backend, "score", real)
    (key_dir,) = (crashed / "data" / "items").iterdir()
    assert read_key_rows(key_dir, ["id"]).num_rows == 3  # the first flush survived, the unflushed rows did not
    assert not [p for p in key_dir.iterdir() if p.name.startswith(".")]  # no temporary files left
    summary = _run(prompts_dir, env, crashed, flush_every=3)
    assert (summary.items, summary.skipped) == (4, 3)
    _assert_same(_load(crashed), reference)


@pytest.mark.slow
def test_shards_partition_and_merge(prompts_dir: Path, env: dict, tmp_path: Path, reference: dict) -> None:
    assert {shard_of(i, 2) for i in IDS} == {0, 1}  # both shards get items
    out = tmp_path / "sharded"
    first = _run(prompts_dir, env, out, shard=(0, 2))
    second = _run(prompts_dir, env, out, shard=(1, 2))
    assert first.items + second.items == len(IDS) and first.key == second.key
    _assert_same(_load(out), reference)
    assert len(json.loads((out / "results_manifest.json").read_text())["runs"]) == 2
    assert parse_shard("1/2") == (1, 2) and parse_shard(None) == (0, 1)


@pytest.mark.slow
def test_other_scoring_never_reuses_rows(prompts_dir: Path, env: dict, tmp_path: Path, reference: dict) -> None:
    out = tmp_path / "two-keys"
    _run(prompts_dir, env, out)
    letter = _run(prompts_dir, env, out, settings=ScoringSettings(choice_mode="letter"))
    assert (letter.items, letter.skipped) == (7, 0)
    rows = _load(out)
    assert len(rows) == 14 and len({r["scoring"] for r in rows}) == 2
    assert len(list((out / "data" / "items").iterdir())) == 2
    by_mode = {json.loads(r["scoring"])["choice_mode"]: r for r in rows if r["id"] == "choice-maria"}
    assert by_mode["sentence"]["choice_probs"] != by_mode["letter"]["choice_probs"]
    assert by_mode["letter"]["valid_mass"] > 0
    assert _run(prompts_dir, env, out).items == 0  # the sentence key is still complete


@pytest.mark.slow
def test_length_normalize_flag_is_a_mean_softmax_under_its_own_key(prompts_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "mean"
    args = ["run", str(prompts_dir), "--config", "items", "--model", str(load_folder()), "--out", str(out), "--no-chat"]
    for extra in ([], ["--length-normalize"]):
        result = CliRunner().invoke(app, [*args, *extra])
        assert result.exit_code == 0, result.output
        assert "7 items scored (0 already done)" in result.output  # a new key: nothing reused
    rows = [r for r in _load(out) if r["id"].startswith("choice")]
    by_key: dict[bool, dict[str, dict]] = {}
    for r in rows:
        by_key.setdefault(json.loads(r["scoring"])["length_normalize"], {})[r["id"]] = r
    for item_id, summed in by_key[False].items():
        mean = by_key[True][item_id]
        assert mean["choice_logprobs"] == pytest.approx(summed["choice_logprobs"])  # same raw scores
        per_token = np.array(mean["choice_logprobs"]) / np.array(mean["choice_tokens"])
        want = np.exp(per_token - per_token.max())
        np.testing.assert_allclose(mean["choice_probs"], want / want.sum(), atol=1e-12)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--config", "bad"], "missing column(s) probe, messages"),
        (["--config", "empty"], "config 'empty': the config is empty (0 rows)"),
        (["--config", "nope"], "no parquet files for config 'nope' (configs here: bad, empty, items)"),
        (["--config", "items", "--shard", "3/2"], "need 0 <= i < n"),
        (["--config", "items", "--shard", "1-2"], "must look like i/n"),
        (["--config", "items", "--model", "/no/such/model"], "model folder /no/such/model does not exist"),
        (["--config", "items", "--model", "."], "model folder . has no config.json"),
        (["--config", "items", "--dtype", "int3"], "--dtype must be one of"),
        (["--config", "items", "--scoring", "logits"], "--scoring must be sentence, letter or generate"),
        (["--config", "items", "--backend", "tgi"], "--backend must be one of hf, vllm"),
        (["--config", "items", "--number-mode", "first"], "--number-mode must be one of exact, first-token"),
        # SmolLM2 spells numbers digit by digit: 0-9 are one token, 10 is not
        (["--config", "items", "--number-mode", "first-token"], "the number 10 has no one-token form"),
    ],
)
def test_bad_input_is_one_error_and_writes_nothing(
    prompts_dir: Path, tmp_path: Path, extra: list[str], message: str
) -> None:
    require_extra("hf")  # scoring needs it; without it `probes run` says so first (tests/runners/test_extras.py)
    out = tmp_path / "results"
    model = [] if "--model" in extra else ["--model", str(load_folder())]
    result = CliRunner().invoke(app, ["run", str(prompts_dir), *model, "--out", str(out), "--no-chat", *extra])
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    assert "error:" in text and message in text, text
    assert "Traceback" not in result.output
    assert not out.exists()


def test_contract_checks() -> None:
    from datasets import Dataset

    columns = {c: [] for c in contract.REQUIRED_COLUMNS}
    with pytest.raises(ProbeError, match=r"the config is empty \(0 rows\)"):
        contract.check_prompt_config(Dataset.from_dict(columns), "x")
    rows = {"id": ["a", "a"], "probe": ["p"] * 2, "task": ["number"] * 2, "prompt": ["q"] * 2, "messages": [[]] * 2}
    with pytest.raises(ProbeError, match="no column\\(s\\) number_min, number_max"):
        contract.check_prompt_config(Dataset.from_dict(rows), "x")
    rows.update(number_min=[0, 0], number_max=[1, 1])
    with pytest.raises(ProbeError, match="not unique"):
        contract.check_prompt_config(Dataset.from_dict(rows), "x")
    with pytest.raises(ProbeError, match="unknown task"):
        contract.check_prompt_config(Dataset.from_dict({**rows, "id": ["a", "b"], "task": ["number", "gen"]}), "x")


def test_two_folders_of_one_name_with_other_columns_load_their_own(tmp_path: Path) -> None:
    """datasets caches a local folder by its name and took the first folder's features for the second."""
    from runners_fixtures import number_items, write_prompt_folder

    plain = write_prompt_folder(tmp_path / "a", number_items(3))
    configs = [ConfigData("items", FEATURES, lambda: iter([{k: [r[k] for r in ITEMS] for k in FEATURES}]))]

    def card(manifest: dict, written: list) -> str:
        front = card_front_matter(pretty_name="t", license="cc0-1.0", tags=[], configs=written, default_config=None)
        return f"---\n{front}---\n# t\n"

    manifest = {"recipe": {"sha256": "0" * 64}, "parameters": {}, "sources": []}
    named = write_hub_folder(
        tmp_path / "b", plain.name, configs, manifest=manifest, render_card=card, rows_per_shard=100
    )
    assert named.name == plain.name
    first = load_prompt_config(str(plain), "items")
    second = load_prompt_config(str(named), "items")
    assert "name" not in first.dataset.column_names and len(first.dataset) == 3
    assert second.dataset["name"] == [r["name"] for r in ITEMS]
    assert load_prompt_config(str(plain), "items").dataset.column_names == first.dataset.column_names
