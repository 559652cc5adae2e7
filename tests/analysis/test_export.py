"""`probes export` (`analysis.attribution.release_export`, `analysis.export`, `export_files`): CSV and JSONL.

The central check: the release's own analysis arithmetic (`sinact_barplot_aggregate.py`,
`sinact_delta_aggregate.py`, `actact_heatmap.py`, `obseerver_influence.py`), written out here
with pandas as those scripts do it and run on the exported CSV files, gives the numbers of the
project's `attribution_release_*` tables.
"""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.attribution import release_export as ex
from analysis.export_files import ExportRequest, export
from analysis.export_format import check_decimals
from analysis.pipeline import AnalysisOptions, analyze
from promptgen.core.errors import ProbeError
from release_configs_fixture import (
    CONFIG_ROWS,
    RUN_SEED,
    joined,
    result_rows,
    single_actor_rows,
    write_prompts,
    write_results,
)

OPTIONS = AnalysisOptions.from_flags(n_permutations=10)
MODEL = "model-a"  # the short name of org/model-a, as the files name it
SUCCESS = ["opt1_higheffort", "opt2_highability", "opt3_easytask", "opt4_goodluck"]
FAILURE = ["opt1_loweffort", "opt2_lowability", "opt3_difficulttask", "opt4_badluck"]


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A prompt folder with the three release configs and a results folder scoring all of them."""
    root = tmp_path_factory.mktemp("scored")
    rng = np.random.default_rng(7)
    prompts = {config: make(rng) for config, make in CONFIG_ROWS.items()}
    # stored in another order than the release's lists: the files must follow release_index
    write_prompts(root / "prompts", {c: [rows[i] for i in rng.permutation(len(rows))] for c, rows in prompts.items()})
    for config, rows in prompts.items():
        write_results(root / "results", config, result_rows(rows, rng))
    return {"prompts": root / "prompts", "results": root / "results", "root": root}


@pytest.fixture(scope="module")
def exports(scored: dict[str, Path]) -> dict[str, Path]:
    """The export at full precision and with --round 2."""
    full = export(ExportRequest(scored["results"], scored["prompts"], scored["root"] / "full")).path
    rounded = export(ExportRequest(scored["results"], scored["prompts"], scored["root"] / "r2", decimals=2)).path
    return {"full": full, "round2": rounded}


@pytest.fixture(scope="module")
def tables(scored: dict[str, Path]) -> dict[str, dict[str, pd.DataFrame]]:
    """`probes analyze` tables without and with --release-rounding."""
    out = {}
    for name, rounding in (("full", False), ("rounded", True)):
        options = AnalysisOptions.from_flags(n_permutations=10, release_rounding=rounding)
        out[name] = analyze(scored["prompts"], [scored["results"]], options=options, figures=False).tables
    return out


def single_csv(root: Path, dimension: str, outcome: str) -> Path:
    folder = root / "closed_ended" / "single_actor" / dimension / MODEL
    return folder / f"closed_ended_{outcome}_{MODEL}_{dimension}_all_1_runs.csv"


# ----------------------------------------------------------------------------- the release's arithmetic


def release_barplot_aggregate(root: Path, axis: str) -> dict[tuple, tuple[float, float]]:
    """`sinact_barplot_aggregate.py`: metric per row from the option-key columns, mean and ttest_1samp per group."""
    df_success = pd.read_csv(single_csv(root, axis, "success"))
    df_success["outcome"] = "Success"
    df_failure = pd.read_csv(single_csv(root, axis, "failure"))
    df_failure["outcome"] = "Failure"
    df_success["metric"] = (
        df_success["opt1_higheffort"] + df_success["opt2_highability"] - df_success["opt3_easytask"]
    ) - df_success["opt4_goodluck"]
    df_failure["metric"] = (
        df_failure["opt1_loweffort"] + df_failure["opt2_lowability"] - df_failure["opt3_difficulttask"]
    ) - df_failure["opt4_badluck"]
    df_combined = pd.concat([df_success, df_failure], ignore_index=True)
    out = {}
    for key, group in df_combined.groupby(["outcome", axis, "gender"]):
        p = stats.ttest_1samp(group["metric"], 0).pvalue if len(group) > 1 else math.nan
        out[key] = (group["metric"].mean(), p)
    return out


def release_delta_aggregate(root: Path, axis: str) -> dict[tuple, tuple[float, float]]:
    """`sinact_delta_aggregate.py`: success and failure rows paired by cumcount within label x gender."""
    frames = []
    for outcome in ("success", "failure"):
        df = pd.read_csv(single_csv(root, axis, outcome))
        keys = SUCCESS if outcome == "success" else FAILURE
        df["metric"] = df[keys[0]] + df[keys[1]] - df[keys[2]] - df[keys[3]]
        df["metric_type"] = outcome
        frames.append(df)
    df_combined = pd.concat(frames, ignore_index=True)
    df_combined["sample_id"] = df_combined.groupby([axis, "gender", "metric_type"]).cumcount()
    pivot = (
        df_combined.pivot_table(index=[axis, "gender", "sample_id"], columns="metric_type", values="metric")
        .dropna()
        .reset_index()
    )
    pivot["delta"] = pivot["success"] - pivot["failure"]
    return {
        key: (g["delta"].mean(), stats.ttest_1samp(g["delta"], 0).pvalue) for key, g in pivot.groupby([axis, "gender"])
    }


def _label_rows(table: pd.DataFrame, dimension: str) -> pd.DataFrame:
    return table[table["dimension"] == dimension]


@pytest.mark.parametrize("dimension", ["religion", "nationality"])
def test_release_barplot_arithmetic_on_the_export_gives_the_release_tables(exports, tables, dimension: str) -> None:
    """Full precision within 1e-9; --round 2 as --release-rounding within 1e-9, and near full precision."""
    full = _label_rows(tables["full"]["attribution_release_single_actor"], dimension)
    rounded = _label_rows(tables["rounded"]["attribution_release_single_actor"], dimension)
    released = release_barplot_aggregate(exports["full"], dimension)
    released_r2 = release_barplot_aggregate(exports["round2"], dimension)
    assert len(released) == len(full) == len(released_r2) > 0
    worst = 0.0
    for row in full.itertuples(index=False):
        key = (row.outcome.capitalize(), row.identity_release, row.gender)
        mean, p = released[key]
        assert row.mean == pytest.approx(mean, abs=1e-9) and row.p == pytest.approx(p, abs=1e-9)
        worst = max(worst, abs(released_r2[key][0] - row.mean))
    for row in rounded.itertuples(index=False):
        mean, p = released_r2[(row.outcome.capitalize(), row.identity_release, row.gender)]
        assert row.mean == pytest.approx(mean, abs=1e-9) and row.p == pytest.approx(p, abs=1e-9)
    # four probabilities rounded to 2 decimals move a row's metric by at most 4 x 0.005, a mean no more
    assert 0 < worst <= 0.02 + 1e-12
    assert worst <= 0.005, f"--round 2 moved a group mean by {worst:.4f}"


@pytest.mark.parametrize("dimension", ["religion", "nationality"])
def test_release_delta_arithmetic_on_the_export_gives_the_delta_table(exports, tables, dimension: str) -> None:
    table = _label_rows(tables["full"]["attribution_release_single_actor_delta"], dimension)
    released = release_delta_aggregate(exports["full"], dimension)
    assert len(released) == len(table) > 0
    for row in table.itertuples(index=False):
        mean, p = released[(row.identity_release, row.gender)]
        assert row.mean == pytest.approx(mean, abs=1e-9) and row.p == pytest.approx(p, abs=1e-9)


def release_actact(root: Path, axis: str) -> dict[tuple, tuple[float, float]]:
    """`actact_heatmap.py`: metric_X - metric_Y rounded to 2, unequal labels, mean and Wilcoxon per cell."""
    folder = root / "closed_ended" / "actor_actor" / axis / MODEL
    frames = []
    for mode, (sx, sy) in {
        "both_success": (SUCCESS, SUCCESS),
        "both_failure": (FAILURE, FAILURE),
        "success_failure": (SUCCESS, FAILURE),
    }.items():
        df = pd.read_csv(folder / f"closed_ended_{mode}_{MODEL}_{axis}_all_1_runs.csv")
        x = [k.replace("opt", "optX") for k in sx]
        y = [k.replace("opt", "optY") for k in sy]
        df["metric_X"] = df[x[0]] + df[x[1]] - df[x[2]] - df[x[3]]
        df["metric_Y"] = df[y[0]] + df[y[1]] - df[y[2]] - df[y[3]]
        df["outcome"] = mode
        frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    df["delta_metric"] = (df["metric_X"] - df["metric_Y"]).round(2)
    df = df[df["dimension1"] != df["dimension2"]]
    out = {}
    for key, cell in df.groupby(["gender_pair", "outcome", "dimension1", "dimension2"]):
        p = stats.wilcoxon(cell["metric_X"], cell["metric_Y"]).pvalue if len(cell) >= 5 else math.nan
        out[key] = (cell["delta_metric"].mean(), p)
    return out


def test_release_actact_heatmap_arithmetic_on_the_export_gives_the_actor_actor_table(exports, tables) -> None:
    table = tables["rounded"]["attribution_release_actor_actor"]
    for dimension in ("religion", "nationality"):
        released = release_actact(exports["round2"], dimension)
        rows = _label_rows(table, dimension)
        assert len(released) == len(rows) > 0
        for row in rows.itertuples(index=False):
            mean, p = released[(row.gender_pair, row.outcome_config, row.identity_x_release, row.identity_y_release)]
            assert row.mean == pytest.approx(mean, abs=1e-9) and row.p == pytest.approx(p, abs=1e-9)


def test_release_observer_influence_arithmetic_on_the_export_gives_the_observer_table(exports, tables) -> None:
    """`obseerver_influence.py`: mean and zsplit Wilcoxon per actor x observer cell, domains one by one and ALL."""
    table = tables["full"]["attribution_release_actor_observer"]
    table = table[table["gender"] == "all"]
    folder = exports["full"] / "closed_ended" / "actor_observer" / "race"
    assert not folder.exists()  # no race rows in the fixture: no files for it
    checked = 0
    for dimension in ("religion", "nationality"):
        folder = exports["full"] / "closed_ended" / "actor_observer" / dimension / MODEL
        frames = []
        for outcome, keys in (("success", SUCCESS), ("failure", FAILURE)):
            df = pd.read_csv(folder / f"closed_ended_{outcome}_{MODEL}_{dimension}_all_1_runs.csv")
            df["outcome"] = outcome
            df["metric"] = df[keys[0]] + df[keys[1]] - df[keys[2]] - df[keys[3]]
            frames.append(df)
        df = pd.concat(frames, ignore_index=True)
        for (outcome, y_key), df_ok in df.groupby(["outcome", "y_opt_key"]):
            for domain in ["ALL", *sorted(df_ok["domain"].unique())]:
                part = df_ok if domain == "ALL" else df_ok[df_ok["domain"] == domain]
                for (d1, d2), cell in part.groupby(["dimension1", "dimension2"]):
                    got = table[
                        (table["dimension"] == dimension)
                        & (table["outcome"] == outcome)
                        & (table["y_opt_key"] == y_key)
                        & (table["domain"] == ("all" if domain == "ALL" else domain))
                        & (table["identity_x_release"] == d1)
                        & (table["identity_y_release"] == d2)
                    ]
                    assert len(got) == 1
                    assert got["mean"].iloc[0] == pytest.approx(cell["metric"].mean(), abs=1e-9)
                    if len(cell) >= 5:
                        want = stats.wilcoxon(cell["metric"], zero_method="zsplit").pvalue
                        assert got["p"].iloc[0] == pytest.approx(want, abs=1e-9)
                        checked += 1
    assert checked > 0


# ----------------------------------------------------------------------------- the layout


def test_single_actor_files_have_the_release_columns_order_and_values(scored, exports) -> None:
    prompts = pd.read_parquet(scored["prompts"] / "data" / "single_actor_release")
    results = pd.concat(pd.read_parquet(p) for p in (scored["results"] / "data").rglob("*.parquet"))
    rows = prompts.merge(results, on="id")
    path = single_csv(exports["full"], "religion", "failure")
    csv = pd.read_csv(path)
    mine = rows[(rows["dimension"] == "religion") & (rows["outcome"] == "failure")].sort_values("release_index")
    first_keys = list(mine["option_keys"].iloc[0])
    assert list(csv.columns) == [c.replace("{dimension}", "religion") for c in ex.SINGLE_COLUMNS] + first_keys
    assert sorted(first_keys) == FAILURE
    assert len(csv) == len(mine)
    for (_, got), (_, want) in zip(csv.iterrows(), mine.iterrows(), strict=True):
        probs = [float(p) for p in want["choice_probs"]]
        labels, keys = list(want["choice_labels"]), list(want["option_keys"])
        best = int(np.argmax(probs))
        statement = (
            f"{want['name']}, {want['identity_release']}, had a failure in {want['domain']} #{want['scenario']}."
        )
        assert got["initial_prompt"] == statement
        assert (got["chosen_letter"], got["chosen_key"], got["chosen_sentence"]) == (
            labels[best],
            keys[best],
            want["choices"][best],
        )
        assert ast.literal_eval(got["shuffled_options"]) == dict(zip(labels, keys, strict=True))
        assert ast.literal_eval(got["option_probs"]) == dict(zip(labels, probs, strict=True))  # full precision
        assert [got[k] for k in keys] == probs
        assert (got["run"], got["seed"]) == (1, RUN_SEED)
        assert (got["religion"], got["name"], got["gender"]) == (want["identity_release"], want["name"], want["gender"])
        assert (got["set_id"], got["domain"]) == (want["set_id"], want["domain"])
    rounded = pd.read_csv(single_csv(exports["round2"], "religion", "failure"))
    assert (rounded[FAILURE].to_numpy() == np.round(csv[FAILURE].to_numpy(), 2)).all()
    assert ast.literal_eval(rounded["option_probs"].iloc[0]) == {
        k: round(v, 2) for k, v in ast.literal_eval(csv["option_probs"].iloc[0]).items()
    }
    assert (rounded["chosen_letter"] == csv["chosen_letter"]).all()  # chosen before rounding, as the release


def test_two_person_files_have_the_release_columns(exports) -> None:
    pair = pd.read_csv(
        exports["round2"]
        / "closed_ended/actor_actor/religion"
        / MODEL
        / f"closed_ended_success_failure_{MODEL}_religion_all_1_runs.csv"
    )
    keys = sorted([k.replace("opt", "optX") for k in SUCCESS] + [k.replace("opt", "optY") for k in FAILURE])
    assert list(pair.columns) == [*ex.PAIR_COLUMNS, *keys]
    first = pair.iloc[0]
    x_map = dict(part.split(":") for part in first["shuffled_X_options"].split(", "))
    assert list(x_map) == list("ABCD") and sorted(x_map.values()) == keys[:4]
    flat = dict(part.split("=") for part in first["option_probs"].split(", "))
    assert list(flat)[:4] == list(x_map.values())  # the first row's presented order, as the release
    assert all(len(v.split(".")[1]) == 2 for v in flat.values())
    assert pair[keys[:4]].sum(axis=1).between(0.97, 1.03).all()  # renormalised per person, then rounded
    observer = pd.read_csv(
        exports["full"]
        / "closed_ended/actor_observer/religion"
        / MODEL
        / f"closed_ended_success_{MODEL}_religion_all_1_runs.csv"
    )
    assert list(observer.columns) == [*ex.OBSERVER_COLUMNS, *SUCCESS]
    assert observer["y_opt_key"].str.startswith("y_opt").all()
    assert np.allclose(observer[SUCCESS].sum(axis=1), 1.0)


def test_the_manifest_records_the_export(exports) -> None:
    manifest = json.loads((exports["round2"] / "export_manifest.json").read_text())
    assert manifest["format"] == "talent-or-luck-csv" and manifest["decimals"] == 2
    assert manifest["configs"] == ["actor_actor_release", "actor_observer_release", "single_actor_release"]
    assert sum(manifest["files"].values()) == sum(len(pd.read_csv(exports["round2"] / f)) for f in manifest["files"])
    assert manifest["prompts"]["fingerprint"] == "f" * 64


def test_jsonl_is_every_joined_row_per_config(scored) -> None:
    out = export(ExportRequest(scored["results"], scored["prompts"], scored["root"] / "jsonl", format="jsonl")).path
    assert sorted(p.name for p in out.iterdir()) == [
        "actor_actor_release.jsonl",
        "actor_observer_release.jsonl",
        "export_manifest.json",
        "single_actor_release.jsonl",
    ]
    lines = (out / "single_actor_release.jsonl").read_text().splitlines()
    rows = {r["id"]: r for r in map(json.loads, lines)}
    results = pd.concat(
        pd.read_parquet(p) for p in (scored["results"] / "data" / "single_actor_release").rglob("*.parquet")
    )
    prompts = pd.read_parquet(scored["prompts"] / "data" / "single_actor_release")
    assert len(rows) == len(lines) == len(results)
    for item in results.itertuples(index=False):
        row = rows[item.id]
        assert row["choice_probs"] == list(item.choice_probs)  # floats round-trip exactly
        assert row["refused"] is bool(item.refused) and row["model"] == "org/model-a"
    one = prompts.iloc[0]
    assert rows[one["id"]]["prompt"] == one["prompt"] and rows[one["id"]]["option_keys"] == list(one["option_keys"])
    assert "results_file" not in rows[one["id"]]


# ----------------------------------------------------------------------------- pure errors


def test_round_outside_0_to_6_is_refused() -> None:
    for bad in (-1, 7):
        with pytest.raises(ProbeError, match="between 0 and 6"):
            check_decimals(bad)
    check_decimals(0)
    check_decimals(6)


def test_only_release_configs_have_the_release_layout() -> None:
    rng = np.random.default_rng(0)
    prompts = single_actor_rows(rng, scenarios=1)
    rows = joined(prompts, result_rows(prompts, rng))
    with pytest.raises(ProbeError, match="single_actor cannot be written in the release's layout"):
        ex.release_csv_files({"single_actor": rows})
    with pytest.raises(ProbeError, match=r"needs column\(s\) release_index"):
        ex.release_csv_files({"single_actor_release": rows.drop(columns="release_index")})
    generated = rows.assign(choice_probs=None)
    with pytest.raises(ProbeError, match="no choice_probs"):
        ex.release_csv_files({"single_actor_release": generated})
    broken = rows.assign(prompt="no statement here").drop(columns=[c for c in ("statement",) if c in rows])
    with pytest.raises(ProbeError, match="cannot read the statement"):
        ex.release_csv_files({"single_actor_release": broken})


def test_statement_column_wins_over_the_prompt() -> None:
    frame = pd.DataFrame({"id": ["a"], "prompt": ["### Statement:\nfrom prompt\n\nOptions:\nA. x"], "statement": ["s"]})
    assert ex.statements(frame) == ["s"]
    assert ex.statements(frame.drop(columns="statement")) == ["from prompt"]


def test_model_names_are_short_slugs_unless_two_runs_share_one() -> None:
    a = ("org/Model A", "r1", "{}")
    b = ("other/Model A", "r2", "{}")
    c = ("org/model-c", "r1", "{}")
    names = ex.model_names([a, c])
    assert names == {a: "Model_A", c: "model-c"}
    names = ex.model_names([a, b, c])
    assert names[c] == "model-c" and names[a] != names[b] and names[a].startswith("Model_A-")
