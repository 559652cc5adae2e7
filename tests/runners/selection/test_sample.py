"""`--sample N`: the rows of the first N units of the probe's seeded order (runners.selection.sample), on a
real empathy build.

Scored with the tests' third backend (tests/fake_backend.py) on the SmolLM2 tokenizer: the checks are on
which rows are selected, scored and recorded, recomputed here from the config's own columns and
`promptgen.sample_order` (whose order is checked against its definition in tests/promptgen/test_sample_order.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from promptgen.core.errors import ProbeError
from promptgen.sample_order import sample_order

CONFIG = "religion_P0S0T0"


@pytest.fixture(scope="module")
def empathy130(shared_sources: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """intergroup-empathy from 130 of the release's events, its religion_P0S0T0 config only (36 rows an event)."""
    from promptgen.build import build

    out = tmp_path_factory.mktemp("empathy130")
    return build("intergroup-empathy", out_dir=out, sources=shared_sources, max_events=130, configs=[CONFIG]).path


@pytest.fixture(scope="module")
def empathy16(shared_sources: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same config from 16 events: a budget's bisection prices each size by counting every item's tokens."""
    from promptgen.build import build

    out = tmp_path_factory.mktemp("empathy16")
    return build("intergroup-empathy", out_dir=out, sources=shared_sources, max_events=16, configs=[CONFIG]).path


def units_rows(dataset: Path, n: int, seed: int = 0) -> set[str]:
    """The ids of the rows of the first n events, computed from the parquet and the order alone."""
    table = pq.read_table(dataset / "data" / CONFIG, columns=["id", "text_id", "emotion"]).to_pylist()
    units = {str(r["text_id"]): r["emotion"] for r in table}
    chosen = set(sample_order(units, seed=seed, probe="intergroup-empathy")[:n])
    return {r["id"] for r in table if str(r["text_id"]) in chosen}


def scored_ids(results: Path) -> list[str]:
    (key,) = (results / "data" / CONFIG).iterdir()
    return [i for part in sorted(key.glob("*.parquet")) for i in pq.read_table(part, columns=["id"])["id"].to_pylist()]


def run(dataset: Path, results: Path, model: str, name: str, warnings: list[str] | None = None, **fields):
    import fake_backend
    from probes import api
    from runners.backends.load import LoadOptions

    (summary,) = api.run_many(
        dataset, [CONFIG], model, results, model_name=name, load=LoadOptions.of(backend=fake_backend.NAME),
        settings={"scoring": "sentence"}, on_warning=(warnings.append if warnings is not None else None), **fields,
    )  # fmt: skip
    return summary


def manifest_runs(results: Path) -> list[dict]:
    return list(json.loads((results / "results_manifest.json").read_text())["runs"].values())


@pytest.mark.slow  # two runs of a real build (36 rows an event)
def test_a_larger_sample_resumes_a_smaller_one_scoring_only_the_new_units(
    empathy130: Path, smollm2: Path, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    first = run(empathy130, results, str(smollm2), "org/one", sample=40)
    forty, hundred_twenty = units_rows(empathy130, 40), units_rows(empathy130, 120)
    assert forty < hundred_twenty and len(forty) == 40 * 36
    assert first.items == len(forty) and set(scored_ids(results)) == forty
    second = run(empathy130, results, str(smollm2), "org/one", sample=120)
    assert second.skipped == len(forty)  # the 40 events' rows are reused...
    assert second.items == len(hundred_twenty - forty) == 80 * 36  # ...and only the 80 new events' rows scored
    ids = scored_ids(results)
    assert len(ids) == len(set(ids)) and set(ids) == hundred_twenty  # no row twice
    (entry,) = manifest_runs(results)
    assert entry["sample"] == {"unit": "event", "columns": ["text_id"], "size": 120, "seed": 0, "population": 130}
    card = (results / "README.md").read_text()
    assert "## Samples" in card and "| event | text_id | 120 | 130 | 0 |" in card


@pytest.mark.slow  # three runs
def test_two_models_at_the_same_sample_score_the_same_ids_and_another_seed_others(
    empathy130: Path, smollm2: Path, tmp_path: Path
) -> None:
    run(empathy130, tmp_path / "a", str(smollm2), "org/one", sample=40)
    run(empathy130, tmp_path / "b", str(smollm2), "org/two", sample=40)
    assert sorted(scored_ids(tmp_path / "a")) == sorted(scored_ids(tmp_path / "b"))
    run(empathy130, tmp_path / "c", str(smollm2), "org/one", sample=40, sample_seed=7)
    assert set(scored_ids(tmp_path / "c")) == units_rows(empathy130, 40, seed=7) != units_rows(empathy130, 40)
    # the analysis reads the sample back: each model's δ says what it was computed on (analysis.precision; the fake
    # backend's scripted answers give no δ, tests/analysis/test_precision.py checks the interval itself)
    from analysis.pipeline import AnalysisOptions, analyze

    gap = analyze(empathy130, [tmp_path / "a", tmp_path / "b"], options=AnalysisOptions.from_flags(n_permutations=50))
    texts = gap.tables["empathy_gap"].groupby("model")["precision"].first()
    assert set(texts.index) == {"org/one", "org/two"}
    assert all(t.endswith("(40 of 130 events, seed 0)") for t in texts), texts


def test_a_sample_above_the_population_takes_it_all_in_one_line(
    empathy130: Path, smollm2: Path, tmp_path: Path
) -> None:
    said: list[str] = []
    summary = run(empathy130, tmp_path / "r", str(smollm2), "org/one", warnings=said, sample=500)
    assert summary.items == 130 * 36
    assert said == [f"config {CONFIG!r}: --sample 500 is more than its 130 events; taking all of them"]
    assert manifest_runs(tmp_path / "r")[0]["sample"]["size"] == 130


def test_limit_on_an_event_config_warns_and_names_sample(empathy130: Path, smollm2: Path, tmp_path: Path) -> None:
    said: list[str] = []
    run(empathy130, tmp_path / "r", str(smollm2), "org/one", warnings=said, limit=10)
    assert len(said) == 1 and "--limit takes its first rows" in said[0] and "--sample N" in said[0]
    assert "sample" not in manifest_runs(tmp_path / "r")[0]  # no sample asked: the record is as before


@pytest.mark.parametrize("size", [0, -3])
def test_a_sample_below_one_is_refused(size: int) -> None:
    from runners.run.request import RunRequest

    with pytest.raises(ProbeError, match=f"--sample must be a positive number of units, got {size}"):
        RunRequest("d", CONFIG, "m", "r", sample=size)


def plan_of(dataset: Path, model: Path, **fields):
    from probes import api

    request = api.PlanRequest(
        dataset=dataset, model=str(model), chat=False, scoring="sentence", items_per_call=64, sample_calls=2, **fields
    )  # a few calls counted per size: the bisection prices about ten sizes
    return api.plan(request)


@pytest.mark.slow  # a bisection of plans and two more
def test_plan_with_a_budget_picks_the_largest_sample_that_fits(empathy130: Path, smollm2: Path) -> None:
    from runners.plan.budget import run_hours

    def hours(plan: dict) -> float:
        return run_hours(plan["totals"], "vllm", tuple(m for m in plan["totals"]["vllm"] if m != "generate"))

    budget = hours(plan_of(empathy130, smollm2, sample=50)) * 1.01
    fitted = plan_of(empathy130, smollm2, budget_hours=budget)
    n = fitted["sample"]["size"]
    assert fitted["sample"]["hours"] == pytest.approx(hours(fitted)) and hours(fitted) <= budget
    # priced on their own, as --sample N prices them: N fits and N + 1 does not
    alone = plan_of(empathy130, smollm2, sample=n)
    assert hours(alone) == pytest.approx(hours(fitted)) and hours(alone) <= budget
    assert hours(plan_of(empathy130, smollm2, sample=n + 1)) > budget
    (counts,) = fitted["configs"].values()
    assert counts["sample"] == {"unit": "event", "columns": ["text_id"], "size": n, "seed": 0, "population": 130}
    assert counts["items"] == len(units_rows(empathy130, n))


@pytest.mark.slow  # plans, a real hf run of the sample its budget buys, and a sweep's choice at the same budget
def test_run_and_sweep_with_a_budget_score_the_largest_sample_that_fits(empathy16: Path, tmp_path: Path) -> None:
    import re

    from typer.testing import CliRunner

    from probes import api
    from probes.cli import app
    from runners.backends.load import LoadOptions
    from runners.plan.budget import run_hours
    from runners_fixtures import tiny_llama_folder

    model = str(tiny_llama_folder("float32"))  # priced by its own config; scoring it costs the CPU no time

    def hours(n: int) -> float:  # --sample n priced on its own, as the run prices each size (its defaults)
        request = api.PlanRequest(
            dataset=empathy16, model=model, configs=(CONFIG,), chat=False, scoring="sentence", sample=n,
            backend="hf",
        )  # fmt: skip
        plan = api.plan(request)
        return run_hours(plan["totals"], "hf", request.priced_modes)

    budget = (hours(2) + hours(3)) / 2
    results = tmp_path / "results"
    args = ["run", str(empathy16), "-c", CONFIG, "-m", model, "--out", str(results), "--backend", "hf"]
    args += ["--scoring", "sentence", "--no-chat", "--model-name", "org/one", "--budget-hours", repr(budget), "-q"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    found = re.search(rf"--budget-hours {budget:g}: --sample (\d+) \(", result.output)
    assert found, result.output
    n = int(found.group(1))
    assert n >= 2 and hours(n) <= budget < hours(n + 1)  # the largest that fits
    assert set(scored_ids(results)) == units_rows(empathy16, n)  # what --sample N scores, no more
    assert manifest_runs(results)[0]["sample"]["size"] == n
    # a sweep of the one dataset gets the whole budget: the same sample (its plan's items), declined before scoring
    said: list[str] = []
    planned = []
    swept = api.sweep(
        api.SweepRequest(
            api.RunRequest.each_config(
                model, model_name="org/one", load=LoadOptions.of(backend="hf"), settings={"scoring": "sentence"},
                chat=False,
            ),
            tmp_path / "sweep", datasets={"intergroup-empathy": empathy16}, probes=("intergroup-empathy",),
            configs=(CONFIG,), budget_hours=budget, price=False,
        ),
        confirm=lambda plan: planned.append(plan) and False,
        progress=said.append,
    )  # fmt: skip
    assert swept is None and planned[0].items == len(units_rows(empathy16, n))
    assert any(line.startswith(f"intergroup-empathy: --budget-hours {budget:g}: --sample {n} (") for line in said)


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--sample", "4"], "give --sample N or --budget-hours H (which picks N), not both"),
        (["--where", "emotion=joy"], "--budget-hours prices whole configs' samples, not a --where selection"),
        (["--backend", "fake-third"], "--backend must be one priced in hours (hf, vllm), got 'fake-third'"),
    ],
)
def test_a_budget_the_run_cannot_price_is_one_line(
    empathy130: Path, smollm2: Path, tmp_path: Path, extra: list[str], said: str
) -> None:
    from typer.testing import CliRunner

    import fake_backend  # noqa: F401  (registers the third backend)
    from probes.cli import app

    args = ["run", str(empathy130), "-c", CONFIG, "-m", str(smollm2), "--out", str(tmp_path / "r"), "--no-chat"]
    result = CliRunner().invoke(app, [*args, "--budget-hours", "1", *extra])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code != 0 and len(lines) == 1 and said in lines[0], result.output
    assert not (tmp_path / "r").exists()  # refused before anything was written


def test_a_sweep_budget_is_shared_cheapest_whole_first_as_the_max_min_fair_level_gives() -> None:
    """`split_budget` (water-filling) against the level L, found by bisection, at which sum(min(cost, L)) = H:
    a dataset costing at most L is taken whole, each other gets L."""
    import random

    from runners.plan.run_budget import split_budget

    rng = random.Random(4)
    for _ in range(300):
        full = {f"d{k}": rng.choice([rng.uniform(0.01, 1), rng.uniform(1, 40)]) for k in range(rng.randint(1, 5))}
        budget = rng.uniform(0.05, 1.2) * sum(full.values())
        shares = split_budget(full, budget)
        assert set(shares) == set(full)
        if sum(full.values()) <= budget:
            assert all(v is None for v in shares.values())
            continue
        lo, hi = 0.0, max(full.values())
        for _ in range(200):
            level = (lo + hi) / 2
            lo, hi = (level, hi) if sum(min(c, level) for c in full.values()) < budget else (lo, level)
        for name, cost in full.items():
            if cost < level * (1 - 1e-9):
                assert shares[name] is None, (full, budget, shares)
            else:
                assert shares[name] == pytest.approx(level, rel=1e-6), (full, budget, shares)


def test_a_budget_on_a_hub_dataset_id_is_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from probes import api
    from probes.cli import app

    # a glob on a Hub id: refused before its configs are looked up on the Hub (HF_HUB_OFFLINE would fail that)
    args = ["run", "org/ds", "-c", "religion_*", "-m", "m", "--out", str(tmp_path / "r"), "--budget-hours", "1"]
    result = CliRunner().invoke(app, args)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1 and "is not one" in lines[0], result.output

    with pytest.raises(ProbeError, match="--budget-hours prices a local prompt dataset folder; org/ds is not one"):
        api.budget_sample("org/ds", [CONFIG], "m", 1.0, api.BudgetTerms(backend="hf"))


def test_plan_precision_needs_a_pilot_and_one_size_picker(empathy130: Path, smollm2: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from probes.cli import app

    base = ["plan", str(empathy130), "--model", str(smollm2), "-c", CONFIG, "--no-chat", "--precision", "0.1"]
    cases = [
        ([], "--precision EPS sizes the sample from a pilot's intervals: give --pilot RESULTS"),
        (["--pilot", str(tmp_path), "--sample", "3"], "give one of --sample N, --budget-hours H or --precision EPS"),
    ]
    for extra, said in cases:
        result = CliRunner().invoke(app, [*base, *extra])
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert result.exit_code != 0 and len(lines) == 1 and said in lines[0], result.output
    # a pilot whose analysis gives no interval (the fake model's answers are the same for every event) is one line
    pilot = tmp_path / "pilot"
    run(empathy130, pilot, str(smollm2), "org/one", sample=4)
    result = CliRunner().invoke(app, [*base, "--pilot", str(pilot)])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code != 0 and len(lines) == 1, result.output
    assert lines[0].startswith(f"error: --pilot {pilot}: no headline number with a sampling interval"), lines
