"""The release's own metrics (`analysis.attribution.release`) against independent computations.

Each table is recomputed here from the rows by the route the release's scripts take (option
keys -> probabilities, pandas groupby, scipy's ttest_1samp / wilcoxon), and the pipeline is
checked to route the `*_release` configs there and only there.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.attribution import release as rel
from analysis.attribution import release_deltas as deltas
from analysis.attribution import tables as designed
from analysis.attribution.probe import attribution_tables
from analysis.pipeline import AnalysisOptions, Collected, compute
from analysis.report import render_html
from promptgen.core.errors import ProbeError
from release_configs_fixture import (
    actor_actor_rows,
    actor_observer_rows,
    joined,
    result_rows,
    single_actor_rows,
)


@pytest.fixture(scope="module")
def single() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    prompts = single_actor_rows(rng)
    return joined(prompts, result_rows(prompts, rng))


@pytest.fixture(scope="module")
def pairs() -> pd.DataFrame:
    rng = np.random.default_rng(2)
    prompts = actor_actor_rows(rng)
    return joined(prompts, result_rows(prompts, rng))


@pytest.fixture(scope="module")
def observer() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    prompts = actor_observer_rows(rng)
    return joined(prompts, result_rows(prompts, rng))


def _rounded(p: float, rounding: bool) -> float:
    return round(p, 2) if rounding else p


def metric_by_hand(keys: list[str], probs: list[float], person: str = "", *, renorm: bool, rounding: bool) -> float:
    """opt1 + opt2 - opt3 - opt4 of one person's options, probabilities looked up by key."""
    mine = {k: p for k, p in zip(keys, probs, strict=True) if k.startswith(f"opt{person}")}
    total = sum(mine.values()) if renorm else 1.0
    by_number = {int(k.split("_")[0][-1]): _rounded(p / total, rounding) for k, p in mine.items()}
    return by_number[1] + by_number[2] - by_number[3] - by_number[4]  # the release's column order


def with_metric(frame: pd.DataFrame, *, renorm: bool, rounding: bool) -> pd.DataFrame:
    metric = [
        metric_by_hand(list(k), list(p), renorm=renorm, rounding=rounding)
        for k, p in zip(frame["option_keys"], frame["choice_probs"], strict=True)
    ]
    return frame.assign(metric=metric)


def _row(table: pd.DataFrame, **where: Any) -> pd.Series:
    hit = table
    for column, value in where.items():
        hit = hit[hit[column] == value]
    assert len(hit) == 1, where
    return hit.iloc[0]


# ----------------------------------------------------------------------------- single actor


@pytest.mark.parametrize("rounding", [False, True])
def test_single_actor_means_and_t_tests_match_pandas_and_scipy(single: pd.DataFrame, rounding: bool) -> None:
    table = rel.release_tables({rel.SINGLE: single}, rounding=rounding)["release_single_actor"]
    expected = with_metric(single, renorm=False, rounding=rounding)
    groups = expected.groupby(["dimension", "outcome", "identity_release", "gender"])
    assert len(table) == groups.ngroups
    for (dimension, outcome, label, gender), g in groups:
        got = _row(table, dimension=dimension, outcome=outcome, identity_release=label, gender=gender)
        t, p = stats.ttest_1samp(g["metric"], 0)
        assert got["mean"] == pytest.approx(g["metric"].mean(), abs=1e-12)
        assert got["t"] == pytest.approx(t, rel=1e-9) and got["p"] == pytest.approx(p, rel=1e-9)
        assert got["n"] == got["n_rows"] == len(g) and got["n_refused"] == int(g["refused"].sum())
        assert got["identity"] == g["identity"].iloc[0]  # the corrected label rides along
    russia = table[table["identity_release"] == "a Russia"]
    assert set(russia["identity"]) == {"a Russian"}


def test_single_actor_metric_follows_the_option_keys_not_the_position(single: pd.DataFrame) -> None:
    rows = rel.release_rows(single, rel.SINGLE)
    first = single.iloc[0]
    keys, probs = list(first["option_keys"]), list(first["choice_probs"])
    by_key = dict(zip(keys, probs, strict=True))
    suffix = "higheffort" if first["outcome"] == "success" else "loweffort"
    effort = by_key[f"opt1_{suffix}"]
    rest = {k: v for k, v in by_key.items() if not k.startswith("opt1")}
    expected = effort + sum(v if k.startswith("opt2") else -v for k, v in rest.items())
    assert rows["metric"].iloc[0] == pytest.approx(expected, abs=1e-15)
    # the same probabilities read by position would give another number for most rows
    by_position = single["choice_probs"].map(lambda p: p[0] + p[1] - p[2] - p[3])
    assert (np.abs(by_position.to_numpy() - rows["metric"].to_numpy()) > 1e-6).mean() > 0.5


def test_single_actor_by_domain_matches_pandas(single: pd.DataFrame) -> None:
    table = rel.release_tables({rel.SINGLE: single})["release_single_actor_by_domain"]
    expected = with_metric(single, renorm=False, rounding=False)
    for (domain, outcome, label, gender), g in expected.groupby(["domain", "outcome", "identity_release", "gender"]):
        dimension = g["dimension"].iloc[0]
        got = _row(table, dimension=dimension, domain=domain, outcome=outcome, identity_release=label, gender=gender)
        assert got["mean"] == pytest.approx(g["metric"].mean(), abs=1e-12)
        assert got["p"] == pytest.approx(stats.ttest_1samp(g["metric"], 0).pvalue, rel=1e-9)


def release_delta(frame: pd.DataFrame) -> dict[tuple, tuple[float, float, int]]:
    """`sinact_delta_aggregate.py`'s pairing, per dimension: cumcount within label x gender x outcome in file order."""
    out = {}
    for dimension, rows in frame.groupby("dimension"):
        files = [rows[rows["outcome"] == o].sort_values("release_index") for o in ("success", "failure")]
        combined = pd.concat(files, ignore_index=True)
        combined["sample_id"] = combined.groupby(["identity_release", "gender", "outcome"]).cumcount()
        pivot = combined.pivot_table(
            index=["identity_release", "gender", "sample_id"], columns="outcome", values="metric"
        ).dropna()
        pivot = pivot.reset_index()
        pivot["delta"] = pivot["success"] - pivot["failure"]
        for (label, gender), g in pivot.groupby(["identity_release", "gender"]):
            out[(dimension, label, gender)] = (g["delta"].mean(), stats.ttest_1samp(g["delta"], 0).pvalue, len(g))
    return out


def test_delta_pairs_rows_by_their_order_within_identity_and_gender(single: pd.DataFrame) -> None:
    table = rel.release_tables({rel.SINGLE: single})["release_single_actor_delta"]
    expected = release_delta(with_metric(single, renorm=False, rounding=False))
    assert len(table) == len(expected)
    for (dimension, label, gender), (mean, p, n) in expected.items():
        got = _row(table, dimension=dimension, identity_release=label, gender=gender)
        assert got["mean"] == pytest.approx(mean, abs=1e-12) and got["p"] == pytest.approx(p, rel=1e-9)
        assert got["n"] == n == got["n_pairs_same_item"]  # whole lists: the k-th rows are the same scenario and name
    # a failure row missing shifts the pairing after it, as it does in the release's script
    gone = single.drop(index=single[(single["outcome"] == "failure")].index[5])
    table = rel.release_tables({rel.SINGLE: gone})["release_single_actor_delta"]
    for (dimension, label, gender), (mean, _, n) in release_delta(
        with_metric(gone, renorm=False, rounding=False)
    ).items():
        got = _row(table, dimension=dimension, identity_release=label, gender=gender)
        assert got["mean"] == pytest.approx(mean, abs=1e-12) and got["n"] == n
    assert (table["n_pairs_same_item"] < table["n"]).sum() == 1


# ----------------------------------------------------------------------------- actor-actor


def pair_metrics(frame: pd.DataFrame, rounding: bool) -> pd.DataFrame:
    x = [
        metric_by_hand(list(k), list(p), "X", renorm=True, rounding=rounding)
        for k, p in zip(frame["option_keys"], frame["choice_probs"], strict=True)
    ]
    y = [
        metric_by_hand(list(k), list(p), "Y", renorm=True, rounding=rounding)
        for k, p in zip(frame["option_keys"], frame["choice_probs"], strict=True)
    ]
    out = frame.assign(metric_X=x, metric_Y=y)
    out["delta_metric"] = out["metric_X"] - out["metric_Y"]
    if rounding:
        out["delta_metric"] = out["delta_metric"].round(2)
    return out[out["identity_x_release"] != out["identity_y_release"]]


@pytest.mark.parametrize("rounding", [False, True])
def test_actor_actor_grid_renormalises_per_person_and_tests_cells_of_five(pairs: pd.DataFrame, rounding: bool) -> None:
    table = rel.release_tables({rel.PAIR: pairs}, rounding=rounding)["release_actor_actor"]
    expected = pair_metrics(pairs, rounding)
    keys = ["dimension", "outcome_config", "gender_pair", "identity_x_release", "identity_y_release"]
    groups = expected.groupby(keys)
    assert len(table) == groups.ngroups  # same-identity pairs are left out
    assert not (table["identity_x_release"] == table["identity_y_release"]).any()
    for key, g in groups:
        got = _row(table, **dict(zip(keys, key, strict=True)))
        assert got["mean"] == pytest.approx(g["delta_metric"].mean(), abs=1e-12)
        assert got["n_rows"] == len(g) >= 5
        assert got["p"] == pytest.approx(stats.wilcoxon(g["metric_X"], g["metric_Y"]).pvalue, rel=1e-9)
    # the 8 probabilities sum to 1 over both persons: not renormalising would halve every metric
    assert table["mean_x"].abs().max() > 0.05


def test_actor_actor_cells_below_five_rows_are_not_tested(pairs: pd.DataFrame) -> None:
    few = pairs.groupby(
        ["dimension", "outcome_config", "gender_pair", "identity_x_release", "identity_y_release"]
    ).head(4)
    table = rel.release_tables({rel.PAIR: few})["release_actor_actor"]
    assert table["p"].isna().all() and table["note"].str.contains("< 5").all()
    assert table["mean"].notna().all()


# ----------------------------------------------------------------------------- actor-observer


def test_actor_observer_grid_pools_gender_and_domain_and_uses_zsplit(observer: pd.DataFrame) -> None:
    table = rel.release_tables({rel.OBSERVER: observer})["release_actor_observer"]
    expected = with_metric(observer, renorm=True, rounding=False)
    cell = ["dimension", "outcome", "y_opt_key", "identity_x_release", "identity_y_release"]
    checked = 0
    for gender_level in ("all", "female"):
        for domain_level in ("all", "sports"):
            rows = expected
            if gender_level != "all":
                rows = rows[rows["gender"] == gender_level]
            if domain_level != "all":
                rows = rows[rows["domain"] == domain_level]
            for key, g in rows.groupby(cell):
                got = _row(table, gender=gender_level, domain=domain_level, **dict(zip(cell, key, strict=True)))
                assert got["mean"] == pytest.approx(g["metric"].mean(), abs=1e-12) and got["n_rows"] == len(g)
                if len(g) >= 5:
                    want = stats.wilcoxon(g["metric"], zero_method="zsplit").pvalue
                    assert got["p"] == pytest.approx(want, rel=1e-9)
                    checked += 1
                else:
                    assert math.isnan(got["p"])
    assert checked > 0
    assert set(table["observer_cause"]) == {"effort", "ability", "difficulty", "luck"}


# ----------------------------------------------------------------------------- errors


def test_an_option_key_presented_as_another_cause_is_an_error_naming_the_item(single: pd.DataFrame) -> None:
    bad = single.head(3).copy()
    bad.at[bad.index[1], "choice_types"] = list(reversed(bad.at[bad.index[1], "choice_types"]))
    with pytest.raises(ProbeError, match=rf"item '{bad['id'].iloc[1]}'.*presented as"):
        rel.release_rows(bad, rel.SINGLE)
    with pytest.raises(ProbeError, match="not a release config"):
        rel.release_rows(single.head(3), "single_actor")


def test_a_row_without_probabilities_has_no_metric_and_is_counted(single: pd.DataFrame) -> None:
    part = single[(single["dimension"] == "religion") & (single["outcome"] == "success")].copy()
    part["choice_probs"] = part["choice_probs"].astype(object)
    part.at[part.index[0], "choice_probs"] = None
    table = rel.release_tables({rel.SINGLE: part})["release_single_actor"]
    first = part.iloc[0]
    got = _row(table, identity_release=first["identity_release"], gender=first["gender"])
    assert got["n"] == got["n_rows"] - 1 and "1 of" in got["note"]


# ----------------------------------------------------------------------------- pipeline and report


def designed_single(rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for k in range(24):
        types = list(np.roll(designed.CAUSES, k % 4))
        rows.append(
            {
                "id": f"sa.{k}",
                "probe": "attribution",
                "setting": "single_actor",
                "choice_types": types,
                "choice_probs": list(rng.dirichlet(np.ones(4))),
                "refused": k == 3,
                "model": "org/model-a",
                "model_revision": "rev",
                "scoring": '{"choice_mode":"sentence"}',
                "dimension": "religion",
                "identity": ["a Christian", "a Muslim"][k % 2],
                "gender": ["male", "female"][(k // 2) % 2],
                "outcome": ["success", "failure"][(k // 4) % 2],
                "domain": "education",
            }
        )
    return pd.DataFrame(rows)


def test_the_pipeline_routes_release_configs_to_the_release_tables_only(
    single: pd.DataFrame, pairs: pd.DataFrame, observer: pd.DataFrame
) -> None:
    own = designed_single(np.random.default_rng(4))
    release = {rel.SINGLE: single, rel.PAIR: pairs, rel.OBSERVER: observer}
    both = Collected(joined={"attribution": {"single_actor": own, **release}})
    tables, problems = compute(both, AnalysisOptions())
    assert problems == []
    for name, table in attribution_tables(own).items():  # the designed tables as without release configs
        pd.testing.assert_frame_equal(tables[f"attribution_{name}"], table)
    expected = {**rel.release_tables(release), **deltas.paper_tables(rel.rows_by_config(release))}
    assert {"release_actor_actor_delta", "release_actor_observer_smd"} <= set(expected)
    for name, table in expected.items():
        pd.testing.assert_frame_equal(tables[f"attribution_{name}"], table)
    assert {n for n in tables if n.startswith("attribution_release_")} == {f"attribution_{n}" for n in expected}

    alone, problems = compute(
        Collected(joined={"attribution": release}), AnalysisOptions.from_flags(release_rounding=True)
    )
    assert problems == [] and not any(n.startswith("attribution_single") for n in alone)
    rounded = rel.release_tables(release, rounding=True)
    pd.testing.assert_frame_equal(alone["attribution_release_single_actor"], rounded["release_single_actor"])
    assert not np.allclose(
        alone["attribution_release_single_actor"]["mean"], tables["attribution_release_single_actor"]["mean"]
    )


def test_the_report_says_which_tables_follow_the_release_code(single: pd.DataFrame) -> None:
    from analysis.pipeline import Analysis

    collected = Collected(joined={"attribution": {rel.SINGLE: single}})
    for rounding, words in ((False, "at full precision"), (True, "rounded to 2 decimals")):
        options = AnalysisOptions.from_flags(release_rounding=rounding)
        tables, _ = compute(collected, options)
        provenance = {"prompts": {"path": "p"}, "results": []}
        html = render_html(Analysis(tables, [], provenance, options, []), {}, "now")
        assert html.count("Follows the release's code") == 3  # the three single-actor release tables
        assert "sinact_barplot_aggregate.py" in html and "sinact_delta_aggregate.py" in html and words in html
