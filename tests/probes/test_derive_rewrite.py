"""The LLM third-person rewrite (DESIGN section 4): the `rewrite_t2` prompts, generation through
the runners, and the new dataset version whose T2 narratives are the model's.

Fast tests drive the real run loop with a scripted generating backend (any text, any finish
reason, no model); the end-to-end test runs `probes rewrite` on SmolLM2 for 10 events.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from envent_fixture import write_recipe, write_sources
from probes.empathy.t2_rewrites import apply_rewrites, compute_rewrites
from promptgen.build import build
from promptgen.core.errors import ProbeError
from promptgen.empathy.model_rewrites import ModelRewrites
from promptgen.empathy.release import RELEASE_T2_METHOD
from release_fixture import load_config
from runners.backends.protocol import Hardware
from runners.exchange import GenerateRequest, Generation
from runners.results import KeyRows

# DESIGN section 4's rewrite prompt, typed out again so the test does not reuse the module's text
HEAD = (
    "Rewrite the text.\nExample:\nText: {The person: I am thinking about this situation.}\n"
    "Rewrite: {The person is thinking about this situation.}\nText: {The person: "
)
TAIL = "}\nRewrite: {"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(dataset folder, sources, recipe) of a 24-event build."""
    root = tmp_path_factory.mktemp("rw")
    sources = write_sources(root / "src")
    recipe = write_recipe(root / "r.yaml")
    path = build(str(recipe), out_dir=root / "out", sources=sources, max_events=24).path
    return path, sources, recipe


def test_rewrite_config_holds_the_design_prompt_per_event(built) -> None:
    path, _, _ = built
    events = load_config(path, "events").to_pandas().set_index("text_id")
    items = load_config(path, "rewrite_t2").to_list()
    assert sorted(r["text_id"] for r in items) == sorted(events.index)
    assert len({r["id"] for r in items}) == len(items) == 24
    for r in items:
        t1 = events.loc[r["text_id"], "narrative_t1"]
        assert r["prompt"] == HEAD + t1 + TAIL
        assert r["messages"] == [{"role": "user", "content": r["prompt"]}]
        assert (r["task"], r["stop"], r["emotion"]) == ("text", ["}"], events.loc[r["text_id"], "emotion"])
    manifest = json.loads((path / "build_manifest.json").read_text())
    assert manifest["rows"]["rewrite_t2"] == 24
    assert manifest["build_report"]["t2_method_counts"] == {RELEASE_T2_METHOD: 24}


class ScriptedWriter:
    """A generating backend whose text depends on the prompt length: some close with `}`, some hit the limit."""

    name = "scripted"
    model_id = "org/scripted-rewriter"
    model_revision = "r1"
    dtype = None
    device = None
    max_batch_tokens = None

    def hardware(self) -> Hardware:
        return Hardware()

    def close(self) -> None:
        pass

    def score(self, requests: Sequence[Any]) -> list[Any]:  # pragma: no cover - never scored
        raise AssertionError("rewrite items are generated, never scored")

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        out = []
        for r in requests:
            assert r.stop == ("}",) and r.temperature == 0.0
            n = len(r.context)
            if n % 4 == 0:  # runs out of tokens before closing the brace
                out.append(Generation(f"The person kept going {n}", (), "length"))
            elif n % 4 == 1:  # closes at once: an empty rewrite
                out.append(Generation("}", (), "stop"))
            else:
                out.append(Generation(f"The person wrote {n} words.}}", (), "stop"))
        return out


def _generate(dataset: Path, results: Path, tokenizer: Any, limit: int | None = None) -> Any:
    from runners.prompts import load_prompt_config
    from runners.run import local_driver
    from runners.run.request import RunRequest
    from runners.scoring.settings import ScoringSettings

    prompts = load_prompt_config(str(dataset), "rewrite_t2")
    settings = ScoringSettings(mode="generate", max_new_tokens=32)
    request = RunRequest(
        dataset, "rewrite_t2", ScriptedWriter.model_id, results, settings=settings, chat=False, limit=limit
    )
    return local_driver.run_config(prompts, ScriptedWriter(), tokenizer, request, model_revision="r1")


def _result_rows(results: Path) -> pd.DataFrame:
    files = sorted((results / "data" / "rewrite_t2").glob("*/part-*.parquet"))
    return pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)


def test_scoring_text_items_is_refused_before_any_model_runs(built) -> None:
    from runners.prompts import check_scoring_mode, load_prompt_config
    from runners.scoring.settings import ScoringSettings

    prompts = load_prompt_config(str(built[0]), "rewrite_t2")
    with pytest.raises(ProbeError, match="--scoring generate"):
        check_scoring_mode(prompts, ScoringSettings())
    check_scoring_mode(prompts, ScoringSettings(mode="generate"))


def test_rewrites_replace_t2_in_events_and_prompts(built, tmp_path, smollm2_tokenizer) -> None:
    path, sources, recipe = built
    results = tmp_path / "results"
    summary = _generate(path, results, smollm2_tokenizer)
    assert summary.items == 24
    rows = _result_rows(results).set_index("id")
    # what each generation should become, computed here from the raw text and finish reason
    expected: dict[str, str] = {}
    for item_id, row in rows.iterrows():
        text = row["generated_text"].split("}")[0].strip()
        closed = "}" in row["generated_text"]
        assert row["parse_status"] == ("ok" if closed and text else "no_answer" if not text else "no_stop")
        if closed and text:
            expected[item_id.removeprefix("emp.rewrite.")] = text
    assert 0 < len(expected) < 24  # the script makes both kinds

    new = apply_rewrites(results, path, tmp_path / "v2", recipe=str(recipe), sources=sources)
    manifest = new.manifest
    assert (
        manifest["version"].startswith(json.loads((path / "build_manifest.json").read_text())["version"] + "+t2.")
        and manifest["fingerprint"] != json.loads((path / "build_manifest.json").read_text())["fingerprint"]
    )
    report = manifest["build_report"]
    assert report["t2_method_counts"] == {"org/scripted-rewriter": len(expected), RELEASE_T2_METHOD: 24 - len(expected)}
    assert report["t2_rewrite"]["rewritten"] == len(expected) and report["t2_rewrite"]["results_key"]
    old = load_config(path, "events").to_pandas().set_index("text_id")
    events = load_config(new.path, "events").to_pandas().set_index("text_id")
    for text_id, ev in events.iterrows():
        if text_id in expected:
            assert (ev["narrative_t2"], ev["t2_method"]) == (expected[text_id], "org/scripted-rewriter")
        else:
            assert (ev["narrative_t2"], ev["t2_method"]) == (old.loc[text_id, "narrative_t2"], RELEASE_T2_METHOD)
        assert ev["narrative_t1"] == old.loc[text_id, "narrative_t1"]
    # the T2 prompts carry the model's narrative; T1 prompts are unchanged
    t2 = load_config(new.path, "religion_P0S0T2").to_pandas()
    for _, item in t2.sample(20, random_state=0).iterrows():
        assert f'\n"{events.loc[item["text_id"], "narrative_t2"]}"\n' in item["messages"][1]["content"]
    assert load_config(new.path, "race_P0S0T1").to_list() == load_config(path, "race_P0S0T1").to_list()
    card = (new.path / "README.md").read_text()
    assert "org/scripted-rewriter" in card and f"{len(expected)} are used" in card

    # the same results make the same version, byte for byte
    again = apply_rewrites(results, path, tmp_path / "v3", recipe=str(recipe), sources=sources)
    assert (again.manifest["version"], again.manifest["fingerprint"]) == (manifest["version"], manifest["fingerprint"])


def test_partial_generation_resumes_and_keeps_rules_for_the_rest(built, tmp_path, smollm2_tokenizer) -> None:
    path, sources, recipe = built
    results = tmp_path / "results"
    assert _generate(path, results, smollm2_tokenizer, limit=10).items == 10
    again = _generate(path, results, smollm2_tokenizer, limit=10)
    assert (again.items, again.skipped) == (0, 10)  # a rerun generates nothing twice
    new = apply_rewrites(results, path, tmp_path / "v2", recipe=str(recipe), sources=sources)
    record = new.manifest["build_report"]["t2_rewrite"]
    assert record["generated"] == 10 and record["kept_rules"] == 24 - record["rewritten"]
    assert sum(record["statuses"].values()) == 10


def _keyrows(rows: list[tuple[str, str | None, str]]) -> KeyRows:
    frame = pd.DataFrame(
        [
            {"id": i, "generated_text": t, "parse_status": s, "finish_reason": "stop", "file": "part-0.parquet"}
            for i, t, s in rows
        ]
    )
    return KeyRows(frame, "m-abc", "org/m", "rev", {"mode": "generate"}, [{"backend": "hf"}])


def test_compute_rewrites_uses_only_closed_nonempty_rewrites() -> None:
    found = _keyrows(
        [
            ("emp.rewrite.a", "The person was glad.} trailing", "ok"),
            ("emp.rewrite.b", "The person was", "no_stop"),
            ("emp.rewrite.c", "  }", "ok"),  # an `ok` row whose cut text is empty is still not used
            ("emp.rewrite.d", None, None),
        ]
    )
    rw = compute_rewrites(found, ["a", "b", "c", "d", "e"], results_file="R")
    assert dict(rw.texts) == {"a": "The person was glad."}
    assert rw.record["statuses"] == {"missing": 1, "no_answer": 1, "no_stop": 1, "ok": 1}
    assert (rw.record["events"], rw.record["generated"], rw.record["kept_rules"]) == (5, 4, 4)
    assert rw.method() == "org/m"
    other = ModelRewrites(rw.model, {"a": "The person was happy."}, rw.record)
    assert rw.version("1.0.0") != other.version("1.0.0") and rw.version("1.0.0") == rw.version("1.0.0")


def test_results_from_another_build_are_refused() -> None:
    found = _keyrows([("emp.rewrite.zzz", "x}", "ok")])
    with pytest.raises(ProbeError, match=r"part-0\.parquet.*emp\.rewrite\.zzz.*another build"):
        compute_rewrites(found, ["a"], results_file="R")


def test_apply_errors_are_clear(built, tmp_path) -> None:
    path, sources, recipe = built
    with pytest.raises(ProbeError, match="has no rewrite_t2 results"):
        apply_rewrites(tmp_path / "none", path, tmp_path / "v2", recipe=str(recipe), sources=sources)
    with pytest.raises(ProbeError, match=r"no build_manifest\.json"):
        apply_rewrites(tmp_path / "none", tmp_path, tmp_path / "v2", recipe=str(recipe), sources=sources)
    with pytest.raises(ProbeError, match="was not built from the recipe"):
        apply_rewrites(tmp_path / "none", path, tmp_path / "v2", sources=sources)  # the repo's recipe
    with pytest.raises(ProbeError, match=r"is a prompt dataset folder .*: it is the input DATASET"):
        apply_rewrites(tmp_path / "none", path, path.parent, recipe=str(recipe), sources=sources)


@pytest.mark.slow
def test_probes_rewrite_on_smollm2_for_10_events(built, tmp_path, smollm2) -> None:
    """End to end as users run it: generate 10 rewrites with SmolLM2, rerun (nothing regenerated), new version."""
    path, sources, recipe = built
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "probes.cli", "rewrite", str(path), "--model", str(smollm2), "--limit", "10"]
    cmd += ["--out", str(out), "--recipe", str(recipe), "--sources", str(sources), "--quiet"]
    env = {**os.environ, "HF_DATASETS_CACHE": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "10 items scored (0 already done)" in proc.stderr
    results = out / f"{path.name}-rewrites"
    rows = _result_rows(results)
    assert len(rows) == 10 and rows["generated_text"].notna().all()
    new_path = out / path.name
    manifest = json.loads((new_path / "build_manifest.json").read_text())
    record = manifest["build_report"]["t2_rewrite"]
    assert record["model"] == Path(smollm2).name and record["generated"] == 10
    events = load_config(new_path, "events").to_pandas().set_index("text_id")
    by_model = events[events["t2_method"] == Path(smollm2).name]
    assert len(by_model) == record["rewritten"] == (rows["parse_status"] == "ok").sum()
    for _, row in rows[rows["parse_status"] == "ok"].iterrows():
        text_id = row["id"].removeprefix("emp.rewrite.")
        assert events.loc[text_id, "narrative_t2"] == row["generated_text"].split("}")[0].strip()
    print("SmolLM2 rewrites:", json.dumps(by_model["narrative_t2"].head(3).tolist()), record["statuses"])

    # rerun: the generations are reused, the version is the same
    proc = subprocess.run([*cmd, "--overwrite"], env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "0 items scored (10 already done)" in proc.stderr
    again = json.loads((new_path / "build_manifest.json").read_text())
    assert again["fingerprint"] == manifest["fingerprint"]


def test_rewrite_with_a_model_refuses_its_target_before_the_model_loads(built, tmp_path, monkeypatch) -> None:
    """`probes rewrite --model`: an --out whose version folder it may not take is one line before any generation."""
    from probes.empathy import t2_rewrites

    path, sources, recipe = built

    def never(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("the model was loaded before the target was checked")

    monkeypatch.setattr(t2_rewrites.Runner, "load", never)
    taken = tmp_path / "out" / path.name
    taken.mkdir(parents=True)
    (taken / "notes.txt").write_text("a user's file")
    with pytest.raises(ProbeError, match=rf"{taken.name}"):
        t2_rewrites.rewrite(path, tmp_path / "out", model="org/m", recipe=str(recipe), sources=sources)
    with pytest.raises(ProbeError, match=r"it is the input DATASET"):  # --overwrite cannot take DATASET's place
        t2_rewrites.rewrite(path, path.parent, model="org/m", recipe=str(recipe), sources=sources, overwrite=True)
    with pytest.raises(ProbeError, match="was not built from the recipe"):
        t2_rewrites.rewrite(path, tmp_path / "v2", model="org/m", sources=sources)  # the repo's recipe
    assert (taken / "notes.txt").read_text() == "a user's file" and not (tmp_path / "v2").exists()
