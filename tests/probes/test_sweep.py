"""`probes sweep`: every scoreable config of the three datasets with one model load, priced first, resumable."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from promptgen.core.errors import ProbeError
from runners_fixtures import tiny_llama_folder

LIMIT = 2


def _side_by_side(root: Path, talent_or_luck: Path, trust_game: Path, empathy: Path) -> Path:
    """The three session builds linked side by side in one datasets folder, as `probes sweep` reads them."""
    out = root / "datasets"
    out.mkdir()
    for build in (talent_or_luck, trust_game, empathy):
        (out / build.name).symlink_to(build)
    return out


@pytest.fixture(scope="module")
def datasets_dir(
    built_small_release: Path,
    built_trust_game: Path,
    built_empathy_events12: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """The three datasets side by side, the session's builds: talent-or-luck of the small synthetic release (every
    config of the default build, release configs included, in few rows), empathy from the release's narratives
    (12 events)."""
    return _side_by_side(
        tmp_path_factory.mktemp("sweep-datasets"), built_small_release, built_trust_game, built_empathy_events12
    )


@pytest.fixture(scope="module")
def small_datasets_dir(
    built_designed: Path, built_trust_game: Path, built_empathy_events12: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The three datasets side by side, talent-or-luck without its release configs (the session's
    15-second build, not the default build's minutes): enough for requests refused before anything
    is scored."""
    return _side_by_side(
        tmp_path_factory.mktemp("sweep-small"), built_designed, built_trust_game, built_empathy_events12
    )


def _declared(datasets: Path) -> dict[str, list[str]]:
    out = {}
    for manifest in sorted(datasets.glob("*/build_manifest.json")):
        data = json.loads(manifest.read_text())
        out[manifest.parent.name] = sorted(data["protocols"])
    return out


def _rows(out: Path) -> dict[tuple[str, str], dict]:
    """Every result row of a sweep folder by (results folder, id), its scores and texts."""
    rows = {}
    for part in sorted((out / "results").glob("*/data/*/*/part-*.parquet")):
        for row in pq.read_table(part).to_pylist():
            rows[(part.parts[-5], row["id"])] = row
    return rows


def _same(a: dict, b: dict) -> bool:
    keys = ("choice_probs", "choice_logprobs", "number_probs", "generated_text", "parsed_value", "refused", "scoring")
    return all(a[k] == b[k] for k in keys)


@pytest.mark.slow
def test_sweep_scores_every_declared_config_with_one_load(datasets_dir: Path, tmp_path: Path, monkeypatch) -> None:
    from probes import api
    from runners.backends import load as models

    loads = []
    real = models.load_backend
    monkeypatch.setattr(models, "load_backend", lambda *a, **k: loads.append(a) or real(*a, **k))
    planned = []
    declared = _declared(datasets_dir)
    wanted = tuple(c for cs in declared.values() for c in cs)
    each = api.RunRequest.each_config(str(tiny_llama_folder("float32")), limit=LIMIT)
    request = api.SweepRequest(each, tmp_path / "s", datasets=datasets_dir, configs=wanted)
    result = api.sweep(request, confirm=lambda plan: planned.append(plan) or True)
    assert len(loads) == 1
    assert {(n, s.config) for n, s in result.summaries} == {
        (("intergroup-empathy" if n.startswith("intergroup") else n), c) for n, cs in declared.items() for c in cs
    }
    assert len(declared["talent-or-luck"]) == 6 and len(declared["trust-game-names"]) == 5
    assert all(s.selected == LIMIT and s.items == LIMIT for _, s in result.summaries)
    (plan,) = planned
    assert plan.items == LIMIT * len(result.summaries) and plan.hours is not None and plan.hours > 0
    for name, report in result.reports.items():
        assert (tmp_path / "s" / "report" / name / "report.html").is_file() and report.is_file()
    text = (tmp_path / "s" / "sweep.json").read_text()
    record = json.loads(text)
    assert len(record["configs"]) == len(result.summaries)
    assert str(tmp_path) not in text and "/root" not in text  # no local path in the summary
    # the rerun's scoring is what is checked: its reports (about 30 s of analysis and figures) are the first's again
    again = api.sweep(dataclasses.replace(request, reports=False))
    assert all(s.items == 0 and s.skipped == LIMIT for _, s in again.summaries)  # finished configs are skipped


def _sweep_command(datasets: Path, out: Path) -> list[str]:
    model = str(tiny_llama_folder("float32"))
    return [
        sys.executable, "-m", "probes.cli", "sweep", "--model", model, "--datasets", str(datasets), "--out", str(out),
        "--limit-per-config", "8", "--flush-every", "1", "--batch-size", "1", "--yes", "--quiet",
        "--config", "single_actor", "--config", "race_probe", "--config", "probing", "--config", "religion_P0S1T0",
    ]  # fmt: skip


@pytest.mark.slow
def test_sigkilled_three_times_then_rerun_equals_an_uninterrupted_sweep(datasets_dir: Path, tmp_path: Path) -> None:
    env = {**os.environ, "HF_DATASETS_CACHE": str(tmp_path / "hf-cache"), "TOKENIZERS_PARALLELISM": "false"}
    clean = subprocess.run(_sweep_command(datasets_dir, tmp_path / "clean"), env=env, capture_output=True, text=True)
    assert clean.returncode == 0, clean.stderr[-3000:]
    expected = _rows(tmp_path / "clean")
    killed = tmp_path / "killed"
    rng = random.Random(11)
    kills = 0
    for _ in range(3):
        before = len(list(killed.glob("results/*/data/*/*/part-*.parquet")))
        command = _sweep_command(datasets_dir, killed)
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 600
        # a random moment once this start has written something: mid-config, between configs or mid-write
        while proc.poll() is None and time.monotonic() < deadline:
            if len(list(killed.glob("results/*/data/*/*/part-*.parquet"))) > before:
                time.sleep(rng.uniform(0.0, 0.4))
                break
            time.sleep(0.05)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait(timeout=120)
    assert kills >= 2, "the sweep finished before it could be killed"
    again = subprocess.run(_sweep_command(datasets_dir, killed), env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr[-3000:]
    got = _rows(killed)
    assert set(got) == set(expected)
    assert all(_same(got[k], expected[k]) for k in expected)
    for part in killed.glob("results/*/data/*/*/part-*.parquet"):
        pq.read_table(part)  # every part is whole
    record = json.loads((killed / "sweep.json").read_text())
    assert sum(c["scored"] for c in record["configs"]) < len(expected)  # the rerun reused what was done


def test_bad_requests_are_one_line_before_anything_is_written(small_datasets_dir: Path, tmp_path: Path) -> None:
    from probes import api

    datasets_dir = small_datasets_dir
    model = str(tiny_llama_folder("float32"))
    out = tmp_path / "s"
    each = api.RunRequest.each_config(model)
    cases = [
        (each, dict(probes=("talent",)), "--probe 'talent' is not a probe"),
        (each, dict(configs=("nothing_*",)), "--config nothing_* matches no scoreable config"),
        (each, dict(datasets=tmp_path / "empty"), "is not a folder of built datasets"),
        (
            dataclasses.replace(each, sample=4),
            dict(budget_hours=1.0),
            "give --sample N or --budget-hours H (which picks N per dataset), not both",
        ),
        (each, dict(budget_hours=-2.0), "--budget-hours must be a positive number of hours, got -2.0"),
        (each, dict(budget_hours=float("nan")), "--budget-hours must be a positive number of hours, got nan"),
        (each, dict(budget_hours=1.0, runs={}), "budget_hours prices each dataset's declared configs"),
        (
            dataclasses.replace(each, where={"group": ["a"]}),
            dict(budget_hours=1.0),
            "not a where= selection: give --sample N",
        ),
        # the sweep sets each config's dataset, config and results; it loads once, here, from folders
        (dataclasses.replace(each, config="single_actor"), {}, "make it with RunRequest.each_config(model, ...)"),
        (api.RunRequest(datasets_dir, "", model, ""), {}, "the sweep sets its dataset, config and results folder"),
        (dataclasses.replace(each, ray=True), {}, "score on Ray with probes run --ray"),
        (dataclasses.replace(each, revision="v1"), {}, "a dataset revision is probes run's (--revision)"),
    ]
    for run, change, message in cases:
        request = api.SweepRequest(run, out, **{"datasets": datasets_dir, **change})
        with pytest.raises(ProbeError, match=re.escape(message)):
            api.sweep(request)
        assert not out.exists()
    partial = tmp_path / "partial"
    partial.mkdir()
    (datasets_dir / "talent-or-luck").rename(partial / "talent-or-luck")
    try:
        with pytest.raises(
            ProbeError, match=r"has no trust-game-names dataset \(build it: probes build trust-game-names"
        ):
            api.sweep(api.SweepRequest(api.RunRequest.each_config(model), out, datasets=partial))
    finally:
        (partial / "talent-or-luck").rename(datasets_dir / "talent-or-luck")
    with pytest.raises(ProbeError, match=r"the sweep is priced at .* h, above --max-hours 1e-09; nothing was run"):
        each = api.RunRequest.each_config(model, limit=LIMIT)
        api.sweep(api.SweepRequest(each, out, datasets=datasets_dir, max_hours=1e-9))
    assert not out.exists()


@pytest.mark.slow
def test_a_sweep_of_a_served_model_is_priced_by_the_prompts_the_server_is_sent(
    datasets_dir: Path, tmp_path: Path
) -> None:
    """`--backend openai`: the plan counts prompts (no hours), and the server receives exactly that many."""
    from openai_fake_server import MODEL, FakeServer
    from probes import api
    from runners.backends.load import LoadOptions

    planned = []
    with FakeServer() as server:
        load = LoadOptions.of(backend="openai", base_url=server.url, tokenizer=str(tiny_llama_folder("float32")))
        each = api.RunRequest.each_config(MODEL, limit=LIMIT, load=load)
        request = api.SweepRequest(each, tmp_path / "s", datasets=datasets_dir, configs=("single_actor", "probing"))
        result = api.sweep(request, confirm=lambda plan: planned.append(plan) or True)
    (plan,) = planned
    assert plan.hours is None and "tokens and prompts" in plan.rate
    # every row was quoted (LIMIT rows, under the quote's sample), so the quote is the count, prompt for prompt
    probe, *scoring = server.posts  # first, at load, the one-token completion that reads the server's fingerprint
    assert len(probe["prompt"]) == 1 and probe["max_tokens"] == 1
    sent = sum(len(body["prompt"]) for body in scoring)
    assert sent == sum(q.prompts for _, q, _ in plan.quotes) > 0
    assert all(s.items == LIMIT for _, s in result.summaries) and len(result.summaries) == 2
    rows = _rows(tmp_path / "s")
    assert {r["backend"] for r in rows.values()} == {"openai"} and {r["model"] for r in rows.values()} == {MODEL}


@pytest.mark.slow
def test_no_secret_a_served_answer_carries_reaches_the_sweep_s_folder_or_output(
    small_datasets_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    """#69, finding 1: every answer of a served sweep quotes the token in $HF_TOKEN and an sk- key, and every answer
    is refused (no number in it), so the report quotes them. Not one byte of the sweep's folder (results, report,
    tables, figures, sweep.json) nor of the command's output holds either."""
    import secrets as random_secrets

    from openai_fake_server import MODEL, FakeServer
    from probes.cli import app

    token, key = "t0k3n-" + random_secrets.token_hex(12), "sk-" + random_secrets.token_hex(20)
    monkeypatch.setenv("HF_TOKEN", token)
    out = tmp_path / "s"
    with FakeServer() as server:
        server.generation_text = f"I cannot say. My token is {token} and {key}"
        result = CliRunner().invoke(
            app,
            ["sweep", "--model", MODEL, "--out", str(out), "--datasets", str(small_datasets_dir),
             "--config", "religion_P0S0T0", "--limit-per-config", str(LIMIT), "--backend", "openai",
             "--base-url", server.url, "--tokenizer", str(tiny_llama_folder("float32")), "--yes"],
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = next(out.glob("report/*/report.html"))
    assert "I cannot say. My token is ***" in report.read_text(encoding="utf-8")  # the answers are quoted, masked
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "sweep.json" for p in files) and any(p.suffix == ".parquet" for p in files)
    for secret in (token, key):
        assert [p for p in files if secret.encode() in p.read_bytes()] == []
        assert secret not in result.output


def test_a_stale_results_folder_is_refused_before_the_model_loads(
    small_datasets_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    """A sweep whose OUT/results holds another build's rows of its last config is refused before the one load, so
    no config before it is scored and then left half a sweep."""
    from probes import api
    from runners import results as res
    from runners.backends import load as models

    def never(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the model was loaded before every config was checked")

    monkeypatch.setattr(models, "load_backend", never)
    out = tmp_path / "s"
    stale = {"prompt_dataset": {"name": "trust-game-names", "config": "race_probe", "fingerprint": "f" * 64}}
    res.update_manifest(out / "results" / "trust-game-names", "race_probe/k1/shard-0of1", {**stale, "key": "k1"})
    each = api.RunRequest.each_config(str(tiny_llama_folder("float32")))
    request = api.SweepRequest(each, out, datasets=small_datasets_dir, configs=("single_actor", "race_probe"))
    with pytest.raises(ProbeError, match=r"config 'race_probe' holds rows scored on another build of its prompts"):
        api.sweep(request)
    assert not list((out / "results").glob("*/data"))  # single_actor, resolved first, was not scored


def test_a_sweep_of_named_runs_scores_the_rows_each_selects_into_its_folder(
    small_datasets_dir: Path, tmp_path: Path
) -> None:
    """`SweepRequest.runs` (what `probes demo` sends, unpriced): each run's row selector, limit, settings and results
    folder, checked against the config's own parquet rows; no report asked, none written."""
    from probes import api
    from probes.sweep import SweepRun
    from runners.scoring.settings import scoring_settings

    folder = small_datasets_dir / "talent-or-luck"
    config_ids = [
        r["id"]
        for p in sorted((folder / "data" / "single_actor").glob("*.parquet"))
        for r in pq.read_table(p).to_pylist()
    ]
    picked = [1, 4, 9]
    runs = {
        "talent-or-luck": (
            SweepRun("single_actor", rows=lambda dataset: picked),
            SweepRun("single_actor", limit=2, settings=scoring_settings("letter"), results="talent-or-luck-letter"),
        )
    }
    out = tmp_path / "s"
    request = api.SweepRequest(
        api.RunRequest.each_config(str(tiny_llama_folder("float32"))), out, datasets={"talent-or-luck": folder},
        probes=("talent-or-luck",), runs=runs, reports=False, price=False,
    )  # fmt: skip
    stages: list[str] = []
    result = api.sweep(request, stage=lambda label, make: stages.append(label) or make())
    assert stages == [
        "load model",
        "plan",
        "score talent-or-luck single_actor (3 items)",
        "score talent-or-luck-letter single_actor (2 items)",
    ]
    rows = _rows(out)
    assert {i for (f, i) in rows if f == "talent-or-luck"} == {config_ids[k] for k in picked}
    letter = {i: r for (f, i), r in rows.items() if f == "talent-or-luck-letter"}
    assert set(letter) == set(config_ids[:2])  # the protocol's rows are all of single_actor: its first two
    assert all(json.loads(r["scoring"])["choice_mode"] == "letter" for r in letter.values())
    assert result.reports == {} and not (out / "report").exists()
    assert (result.plan.items, result.plan.hours) == (5, None)  # counted, not priced: no rate measured
    assert [s.key_dir.parents[2].name for _, s in result.summaries] == ["talent-or-luck", "talent-or-luck-letter"]


def test_sweep_json_records_the_budget_and_each_dataset_s_sample(tmp_path: Path) -> None:
    from dataclasses import replace

    from probes.sweep import SweepRequest, SweepResult, sweep_record
    from runners.plan.loaded import SweepPlan
    from runners.plan.run_budget import BudgetSample
    from runners.run.request import RunRequest

    request = SweepRequest(RunRequest.each_config("m"), tmp_path, budget_hours=8.0, gpu="a100", mfu=0.4)
    bought = BudgetSample(120, 5.9, 6.2, "hf", "a100", 0.4)
    result = SweepResult(tmp_path, SweepPlan("cpu", "r", []), [], {}, 1.0, [], {}, {"a": bought, "b": None})
    assert sweep_record(request, result)["budget"] == {
        "hours": 8.0, "gpu": "a100", "mfu": 0.4, "backend": request.run.load.backend,
        "samples": {"a": {"size": 120, "hours": 5.9}, "b": None},
    }  # fmt: skip
    unbudgeted = sweep_record(replace(request, budget_hours=None), replace(result, budget=None))
    assert unbudgeted["budget"] is None
