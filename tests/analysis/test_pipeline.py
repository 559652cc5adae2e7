"""`probes analyze` end to end on real built prompt datasets with result folders written in the test.

The metric functions are checked against independent computations in test_analysis_*.py;
here the question is the plumbing: every config reaches its probe's analysis through the
prompts' `probe` column, several models sit side by side, every table is written as CSV and
parquet with figures and a self-contained report.html, and bad input gives a clear message
(or NaN with a note), never a crash or a silently wrong number.
"""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import runners.results as res
from analysis.empathy import tables as emp
from analysis.load import join, load_prompts, load_results
from analysis.pipeline import AnalysisOptions, analyze
from analysis.probes import section_headlines
from analysis.report import write_report
from analysis.trust_game import tables as tg
from envent_fixture import write_recipe, write_sources
from probes.cli import app
from promptgen.build import build
from promptgen.core.errors import ProbeError

SCORING = '{"choice_mode":"sentence"}'
FAST = AnalysisOptions.from_flags(n_permutations=200)


def _read(folder: Path, config: str, columns: list[str]) -> pd.DataFrame:
    return pd.concat(
        [pq.read_table(p, columns=columns).to_pandas() for p in sorted((folder / "data" / config).glob("*.parquet"))]
    )


def _write(
    results: Path, config: str, rows: list[dict[str, Any]], model: str, sample: dict[str, Any] | None = None
) -> None:
    key = res.ResultKey(model, "rev", SCORING)
    folder = res.key_dir(results, config, key)
    res.write_key_file(folder, key)
    res.write_part(folder, (0, 1), [{"model": model, "model_revision": "rev", "scoring": SCORING, **r} for r in rows])
    entry = {
        "prompt_dataset": {"config": config},
        "model": model,
        "key": key.slug,
        "backend": "test",
        "items": len(rows),
    }
    if sample is not None:  # as a sampled run records it (docs/DESIGN.md section 9)
        entry.update(model_revision="rev", scoring=json.loads(SCORING), sample=sample)
    res.update_manifest(results, f"{config}/{key.slug}/shard-0of1", entry)


@pytest.fixture(scope="module")
def datasets(built_designed: Path, built_trust_game: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """talent-or-luck's designed configs (its 15 s build; the default build's release configs take minutes and no
    test here reads them) and trust-game, both read only, and a synthetic empathy build."""
    out = tmp_path_factory.mktemp("ds")
    root = tmp_path_factory.mktemp("envent")
    emp_path = build(
        str(write_recipe(root / "r.yaml")), out_dir=out, sources=write_sources(root / "src"), max_events=24
    )
    return {"talent-or-luck": built_designed, "trust-game": built_trust_game, "intergroup-empathy": emp_path.path}


def attribution_results(dataset: Path, results: Path, model: str, seed: int) -> list[str]:
    """Random cause probabilities for the religion single-actor items; one cell entirely refused."""
    frame = _read(dataset, "single_actor", ["id", "dimension", "identity", "gender", "outcome"])
    frame = frame[frame["dimension"] == "religion"].groupby(["identity", "gender", "outcome"]).head(4)
    rng = np.random.default_rng(seed)
    rows = []
    for r in frame.itertuples(index=False):
        dead = r.identity == frame["identity"].iloc[0] and r.gender == "female" and r.outcome == "success"
        rows.append({"id": r.id, "choice_probs": list(rng.dirichlet(np.ones(4))), "refused": bool(dead)})
    _write(results, "single_actor", rows, model)
    return frame["id"].tolist()


def empathy_results(
    dataset: Path, results: Path, model: str, seed: int, events: int | None = None, sample: dict | None = None
) -> None:
    """Intensities with an in-group boost for every item of religion_P0S0T0, or of its first `events` events."""
    frame = _read(dataset, "religion_P0S0T0", ["id", "perceiver", "experiencer", "text_id"])
    if events is not None:
        frame = frame[frame["text_id"].isin(sorted(set(frame["text_id"]))[:events])]
    rng = np.random.default_rng(seed)
    bonus = (frame["perceiver"] == frame["experiencer"]).to_numpy() * 10.0  # an in-group boost
    values = 50 + bonus + rng.normal(0, 5, len(frame))
    rows = [{"id": i, "expected_value": float(v), "refused": False} for i, v in zip(frame["id"], values, strict=True)]
    _write(results, "religion_P0S0T0", rows, model, sample)


def trust_results(dataset: Path, results: Path, model: str, seed: int) -> None:
    """Expected investments for one investor group's base games; 8 probing answers, 4 of them right."""
    games = _read(dataset, "games_paper_phi_2", ["id", "variant", "investor_group"])
    games = games[(games["variant"] == "base") & (games["investor_group"] == sorted(games["investor_group"])[0])]
    rng = np.random.default_rng(seed)
    rows = [{"id": i, "expected_value": float(rng.uniform(2, 8)), "refused": False} for i in games["id"]]
    _write(results, "games_paper_phi_2", rows, model)
    probing = _read(dataset, "probing", ["id", "variant", "correct_answer"])
    probing = probing[probing["variant"] == "base"].head(8)
    answers = [
        {"id": i, "argmax_value": int(a) if k % 2 else int(a) + 1, "expected_value": 1.0, "refused": False}
        for k, (i, a) in enumerate(zip(probing["id"], probing["correct_answer"], strict=True))
    ]
    _write(results, "probing", answers, model)


@pytest.mark.slow
def test_attribution_two_models_side_by_side(datasets, tmp_path) -> None:
    ds = datasets["talent-or-luck"]
    a, b = tmp_path / "a", tmp_path / "b"
    attribution_results(ds, a, "org/model-a", 1)
    attribution_results(ds, b, "org/model-b", 2)
    result = analyze(ds, [a, b], options=FAST)
    single = result.tables["attribution_single_actor"]
    assert set(single["model"]) == {"org/model-a", "org/model-b"}
    # the all-refused cell: NaN with a reason in the `excluded` variant, never dropped or zero
    excluded = single[(single["refused_items"] == "excluded") & (single["n"] == 0)]
    assert len(excluded) == 2 and excluded["mean"].isna().all() and (excluded["note"] != "").all()
    # the pipeline's table is the analysis function on the joined rows
    from analysis.attribution import tables as attr

    joined = join(
        load_prompts(ds, "single_actor"), pd.concat([load_results(a, "single_actor"), load_results(b, "single_actor")])
    )
    direct = attr.single_actor_table(attr.compute_items(joined))
    pd.testing.assert_frame_equal(single[direct.columns].reset_index(drop=True), direct.reset_index(drop=True))
    # beside the t-test, the mean's sampling precision over the templates scored, of the config's (DESIGN 9)
    population = load_prompts(ds, "single_actor", columns=["template_id"])["template_id"].nunique()
    rows = single[(single["refused_items"] == "included") & (single["model"] == "org/model-a")]
    assert (rows["sample_population"] == population).all() and (rows["sample_units"] < population).all()
    # a group whose items come from one template has no interval (nothing to resample); the others do
    keys = ["dimension", "identity", "gender", "outcome"]
    own = joined[joined["model"] == "org/model-a"].groupby(keys)["template_id"].nunique()
    templates = rows.set_index(keys).index.map(own)
    assert (rows["sample_ci_low"].notna().to_numpy() == (templates >= 2)).all()
    by_dimension = result.tables["attribution_single_actor_by_dimension"]
    answered = by_dimension[(by_dimension["refused_items"] == "included") & (by_dimension["model"] == "org/model-a")]
    assert len(answered) == 2 and (answered["sample_ci_low"] < answered["sample_ci_high"]).all()
    for row in answered.itertuples():
        assert row.precision == (
            f"d = {row.mean:.2f} (95% CI {row.sample_ci_low:.2f}{'-' if row.sample_ci_low >= 0 else ' to '}"
            f"{row.sample_ci_high:.2f}; {int(row.sample_units)} of {population:,} templates)"
        )
    refusals = result.tables["refusals"].set_index("model")
    assert refusals.loc["org/model-a", "n_refused"] == 4 and refusals.loc["org/model-a", "n_items"] == 96
    names = [name for _, name, _ in result.figures]
    assert len(names) == len(set(names)) and any("model_b" in n or "model-b" in n for n in names)

    report = write_report(result, tmp_path / "report")
    umask = os.umask(0)
    os.umask(umask)
    assert report.stat().st_mode & 0o777 == 0o777 & ~umask  # a report is for sharing, not private to its writer
    for name in result.tables:
        assert (report / "tables" / f"{name}.csv").is_file()
        pd.testing.assert_frame_equal(
            pd.read_parquet(report / "tables" / f"{name}.parquet").reset_index(drop=True),
            result.tables[name].reset_index(drop=True),
            check_dtype=False,
        )
    pngs = sorted((report / "figures").glob("*.png"))
    assert len(pngs) == len(result.figures) > 0 and all(p.read_bytes()[:4] == b"\x89PNG" for p in pngs)
    html = (report / "report.html").read_text()
    assert "org/model-a" in html and "org/model-b" in html and "attribution_single_actor" in html
    assert html.count("data:image/png;base64,") == len(pngs)
    embedded = {base64.b64decode(uri) for uri in re.findall(r'src="data:image/png;base64,([^"]+)"', html)}
    assert embedded == {p.read_bytes() for p in pngs}  # the page shows the very figure files, drawn once
    # self-contained: nothing fetched from elsewhere; the only links are each table's CSV beside the page
    assert not re.search(r'(src|href)="(?!data:|tables/[^"/]+\.csv")', html)
    assert set(re.findall(r'href="tables/([^"/]+)\.csv"', html)) == set(result.tables)
    # the provenance gives each run's item count (a run dict's "items", not its `.items` method)
    rows = re.findall(r"<tr><td>single_actor</td><td>org/model-(?:a|b)</td>(?:<td>[^<]*</td>){4}<td>(\d+)</td>", html)
    counts = sorted(str(len(load_results(folder, "single_actor"))) for folder in (a, b))
    assert sorted(rows) == counts and "built-in method" not in html


@pytest.mark.slow
def test_a_sampled_empathy_run_gives_delta_its_interval_and_sample(datasets, tmp_path) -> None:
    """10 of the 24 events, recorded as a sample of seed 3: δ with its bootstrap interval over those events,
    the population read from the prompt config and the seed from the run's manifest entry."""
    ds = datasets["intergroup-empathy"]
    empathy_results(ds, tmp_path / "r", "org/m", 3, events=10, sample={"unit": "event", "size": 10, "seed": 3})
    result = analyze(ds, [tmp_path / "r"], options=FAST)
    gaps = result.tables["empathy_gap"]
    gap = gaps[gaps["refused_items"] == "excluded"].iloc[0]
    assert (gap["sample_units"], gap["sample_population"], gap["sample_seed"]) == (10, 24, 3)
    # (10 events: too few for the interval to hold δ surely; benchmarks/sample_coverage.py checks it)
    assert gap["sample_ci_low"] < gap["sample_ci_high"] and gap["sample_mde"] == pytest.approx(2.8 * gap["sample_se"])
    low, high = gap["sample_ci_low"], gap["sample_ci_high"]
    assert gap["precision"] == f"δ = {gap['delta']:.2f} (95% CI {low:.2f}-{high:.2f}; 10 of 24 events, seed 3)"
    head = section_headlines(result.tables)["Empathy"]
    assert head["sampling precision (95% CI)"].tolist() == [gap["precision"]]


@pytest.mark.slow
def test_empathy_tables_and_gap(datasets, tmp_path) -> None:
    ds = datasets["intergroup-empathy"]
    empathy_results(ds, tmp_path / "r", "org/m", 3)
    result = analyze(ds, [tmp_path / "r"], options=FAST)
    gaps = result.tables["empathy_gap"]
    assert sorted(gaps["refused_items"]) == ["excluded", "included"]  # with and without refusals (DESIGN 6)
    gap = gaps[gaps["refused_items"] == "excluded"]
    assert len(gap) == 1 and gap["delta"].iloc[0] > 0 and gap["p_value"].iloc[0] < 0.05  # the boost is found
    joined = join(load_prompts(ds, "religion_P0S0T0"), load_results(tmp_path / "r", "religion_P0S0T0"))
    cells = emp.compute_cells(emp.intensity_frame(joined))
    direct = emp.compute_gap(cells, n_permutations=200, seed=0)
    assert gap["delta"].iloc[0] == pytest.approx(direct["delta"].iloc[0])
    assert gap["null_low"].iloc[0] == pytest.approx(direct["null_low"].iloc[0])
    assert {"empathy_cells", "empathy_cell_tests", "empathy_matrix_summary", "empathy_refusals"} <= set(result.tables)
    # every event scored: δ has no sampling error, and says so
    assert gap["sample_ci_low"].isna().all() and gap["sample_se"].iloc[0] == 0
    assert gap["precision"].iloc[0] == f"δ = {gap['delta'].iloc[0]:.2f} (all 24 events)"
    assert "rewrite_t2" not in set(result.tables["refusals"]["config"])  # never scored, never analysed
    assert any(name.startswith("empathy_m") for _, name, _ in result.figures)


@pytest.mark.slow
def test_trust_game_anova_and_probing(datasets, tmp_path) -> None:
    ds = datasets["trust-game"]
    trust_results(ds, tmp_path / "r", "org/m", 4)
    result = analyze(ds, [tmp_path / "r"], options=FAST)
    anova = result.tables["trust_game_anova"]
    anova = anova[anova["refused_items"] == "excluded"]
    assert set(anova["effect"]) >= {"trustee_gender", "trustee_race", "trustee_gender:trustee_race"}
    joined = join(load_prompts(ds, "games_paper_phi_2"), load_results(tmp_path / "r", "games_paper_phi_2"))
    direct = tg.anova(tg.prediction_frame(joined))
    assert anova["F"].to_numpy() == pytest.approx(direct["F"].to_numpy(), nan_ok=True)
    probing = result.tables["trust_game_probing_accuracy"]
    assert probing["n_items"].sum() == 8 and probing["n_correct"].sum() == 4
    assert any(name.startswith("trust_game_interaction") for _, name, _ in result.figures)


@pytest.mark.slow
def test_bad_input_gives_clear_messages(datasets, tmp_path) -> None:
    ds = datasets["trust-game"]
    # result ids that are not in the prompts: the error names the part file
    _write(tmp_path / "alien", "games_paper_phi_2", [{"id": "nope", "expected_value": 1.0, "refused": False}], "org/m")
    with pytest.raises(ProbeError, match=r"part-.*\.parquet.*'nope'"):
        analyze(ds, [tmp_path / "alien"], options=FAST)
    with pytest.raises(ProbeError, match="holds no result parts"):
        analyze(ds, [tmp_path], options=FAST)
    # a probe whose rows lack a metric's columns: reported as a problem, the rest still analysed
    games = _read(ds, "games_paper_phi_2", ["id"]).head(10)
    answer = "<b>I would pass</b> nothing, thanks."
    refused = [{"id": i, "refused": True, "generated_text": answer} for i in games["id"]]
    _write(tmp_path / "r", "games_paper_phi_2", refused, "org/m")
    result = analyze(ds, [tmp_path / "r"], options=FAST)
    assert result.tables["refusals"]["refusal_rate"].tolist() == [1.0]
    notes = result.tables["trust_game_anova"]["note"]
    assert (notes != "").all()  # every game refused: NaN statistics with the reason
    # ... and the report says so first, with the answers seen (escaped) and what to do instead
    assert len(result.refused_all) == 1 and answer in result.refused_all[0]
    assert result.tables["refusals"]["first_refused"].iat[0] == " | ".join([answer] * 3)
    html = (write_report(result, tmp_path / "rep") / "report.html").read_text()
    top = html[: html.index("<h2")]
    assert "Every item refused" in top and "read from the distribution over the answers already" in top
    assert "--scoring sentence" not in top  # these rows were scored that way (SCORING): the flag cannot help (#51)
    assert "&lt;b&gt;I would pass&lt;/b&gt; nothing" in top and answer not in html


@pytest.mark.slow
def test_cli_analyze_writes_the_report(datasets, tmp_path) -> None:
    ds = datasets["intergroup-empathy"]
    empathy_results(ds, tmp_path / "r", "org/m", 5)
    runner = CliRunner()
    args = ["analyze", "--prompts", str(ds), "--results", str(tmp_path / "r"), "--out", str(tmp_path / "rep")]
    done = runner.invoke(app, [*args, "--permutations", "100", "--seed", "7"])
    assert done.exit_code == 0, done.output
    assert (tmp_path / "rep" / "report.html").is_file() and (tmp_path / "rep" / "tables" / "empathy_gap.csv").is_file()
    again = runner.invoke(app, [*args, "--permutations", "100"])
    assert again.exit_code == 1 and "--overwrite" in again.output
    bad = runner.invoke(app, [*args, "--overwrite", "--score", "median"])
    assert bad.exit_code == 1 and "--score must be one of" in bad.output
    assert (tmp_path / "rep" / "report.html").is_file()  # a failed run leaves the finished report alone


def _local_paths_in(folder: Path, roots: set[str]) -> list[tuple[str, str]]:
    """(file, root) for every file under `folder` that mentions one of `roots` (parquet: in its values)."""
    found = []
    for path in folder.rglob("*"):
        if not path.is_file():
            continue
        if path.suffix == ".parquet":
            data = pq.read_table(path).to_pandas().to_json().replace("\\/", "/")
        else:
            data = path.read_bytes().decode("utf-8", errors="replace")
        found += [(str(path), root) for root in roots if root in data]
    return found


@pytest.mark.slow
def test_no_absolute_local_path_in_what_build_and_analyze_write(datasets, shared_sources, tmp_path) -> None:
    """Published folders and shared reports carry no path of the machine that made them."""
    ds = datasets["trust-game"]
    trust_results(ds, tmp_path / "r", "org/m", 3)
    out = tmp_path / "rep"
    done = CliRunner().invoke(
        app, ["analyze", "--prompts", str(ds), "--results", str(tmp_path / "r"), "--out", str(out)]
    )
    assert done.exit_code == 0, done.output
    roots = {str(ds.parent), str(ds.parent.resolve()), str(tmp_path), str(shared_sources), str(Path.home())}
    roots |= {str(Path(r).resolve()) for r in list(roots)}
    assert _local_paths_in(ds, roots) == []
    assert _local_paths_in(out, roots) == []


def test_rows_lacking_a_metric_column_are_a_named_problem_not_a_crash() -> None:
    from analysis.pipeline import Collected, compute

    rows = pd.DataFrame(
        {
            "id": ["a", "b"],
            "model": "org/m",
            "model_revision": "rev",
            "scoring": SCORING,
            "probe": "empathy",
            "task": "number",
            "category": "religion",
            "setting": "P0S0T0",
            "experiencer": ["a Jew", "a Muslim"],  # no `perceiver` column
            "text_id": ["t1", "t2"],
            "expected_value": [3.0, 4.0],
            "refused": False,
        }
    )
    tables, problems = compute(Collected(joined={"empathy": {"religion_P0S0T0": rows}}), FAST)
    assert tables["refusals"]["n_items"].tolist() == [2]
    (problem,) = problems
    assert problem["probe"] == "empathy" and "perceiver" in problem["reason"]
