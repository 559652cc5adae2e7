"""The paper's Δd and SMD on the `*_release` configs (`analysis.attribution.release_deltas`), recomputed by hand.

Every expected number here comes from plain Python loops over the rows (the metric from each
row's option keys, dictionaries for the matching) and scipy's `ttest_1samp` / `ttest_ind`, not
from the module's pandas route.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.attribution import release as rel
from analysis.attribution import release_deltas as deltas
from release_configs_fixture import actor_actor_rows, actor_observer_rows, joined, result_rows, single_actor_rows

RUN = ("org/model-a", "rev")


def metric(keys: list[str], probs: list[float], person: str = "", *, renorm: bool) -> float:
    """opt1 + opt2 - opt3 - opt4 of one person's options, looked up by key."""
    mine = {k: p for k, p in zip(keys, probs, strict=True) if k.startswith(f"opt{person}")}
    total = sum(mine.values()) if renorm else 1.0
    by_number = {int(k.split("_")[0][-1]): p / total for k, p in mine.items()}
    return by_number[1] + by_number[2] - by_number[3] - by_number[4]


@pytest.fixture(scope="module")
def frames() -> dict[str, pd.DataFrame]:
    out = {}
    for seed, (config, build) in enumerate(
        ((rel.SINGLE, single_actor_rows), (rel.PAIR, actor_actor_rows), (rel.OBSERVER, actor_observer_rows))
    ):
        rng = np.random.default_rng(40 + seed)
        prompts = build(rng)
        out[config] = joined(prompts, result_rows(prompts, rng))
    return out


def single_by_cell(single: pd.DataFrame) -> dict[tuple, list[tuple[str, float]]]:
    cells: dict[tuple, list[tuple[str, float]]] = defaultdict(list)
    for r in single.itertuples(index=False):
        key = (r.dimension, r.identity, r.gender, r.outcome, r.domain, r.scenario)
        cells[key].append((r.id, metric(list(r.option_keys), list(r.choice_probs), renorm=False)))
    return cells


def test_actor_actor_delta_equals_a_by_hand_match_and_scipy(frames: dict[str, pd.DataFrame]) -> None:
    cells = single_by_cell(frames[rel.SINGLE])
    groups: dict[tuple, list[float]] = defaultdict(list)
    for r in frames[rel.PAIR].itertuples(index=False):
        for person, identity, gender, outcome in (
            ("X", r.identity_x, r.gender_x, r.outcome_x),
            ("Y", r.identity_y, r.gender_y, r.outcome_y),
        ):
            matched = cells[(r.dimension, identity, gender, outcome, r.domain, r.scenario)]
            assert matched, "the fixture gives every person a single-actor match"
            d_single = sum(v for _, v in matched) / len(matched)
            d_paired = metric(list(r.option_keys), list(r.choice_probs), person, renorm=True)
            groups[(r.outcome_config, r.dimension, identity, gender, outcome)].append(d_single - d_paired)

    rows = rel.rows_by_config(frames)
    table = deltas.paper_tables(rows)["release_actor_actor_delta"]
    assert len(table) == len(groups)
    assert (table["n_unmatched"] == 0).all()
    for t in table.itertuples(index=False):
        assert (t.model, t.model_revision) == RUN
        values = groups[(t.outcome_config, t.dimension, t.identity, t.gender, t.outcome)]
        expected = stats.ttest_1samp(values, 0.0)
        assert t.n == len(values) == t.n_rows
        assert math.isclose(t.mean, float(np.mean(values)), rel_tol=1e-12, abs_tol=1e-15)
        assert math.isclose(t.t, float(expected.statistic), rel_tol=1e-9)
        assert math.isclose(t.p, float(expected.pvalue), rel_tol=1e-9)


def test_actor_observer_smd_equals_a_by_hand_pool_and_scipy(frames: dict[str, pd.DataFrame]) -> None:
    cells = single_by_cell(frames[rel.SINGLE])
    conditions: dict[tuple, list[float]] = defaultdict(list)
    pools: dict[tuple, dict[str, float]] = defaultdict(dict)
    for r in frames[rel.OBSERVER].itertuples(index=False):
        key = (r.dimension, r.identity_x, r.gender, r.outcome, r.observer_cause)
        conditions[key].append(metric(list(r.option_keys), list(r.choice_probs), renorm=True))
        pools[key].update(cells[(r.dimension, r.identity_x, r.gender, r.outcome, r.domain, r.scenario)])

    table = deltas.paper_tables(rel.rows_by_config(frames))["release_actor_observer_smd"]
    assert len(table) == len(conditions)
    assert set(table["comparison"]) == {"delta_d2"} and set(table["condition"]) == {"context+identity"}
    for t in table.itertuples(index=False):
        key = (t.dimension, t.identity, t.gender, t.outcome, t.observer_cause)
        a, b = list(pools[key].values()), conditions[key]
        expected = stats.ttest_ind(a, b, equal_var=True)
        sp = math.sqrt(((len(a) - 1) * np.var(a, ddof=1) + (len(b) - 1) * np.var(b, ddof=1)) / (len(a) + len(b) - 2))
        assert (t.n_single, t.n_condition) == (len(a), len(b))
        assert math.isclose(t.delta_d, float(np.mean(a) - np.mean(b)), rel_tol=1e-9, abs_tol=1e-15)
        assert math.isclose(t.smd, (np.mean(a) - np.mean(b)) / sp, rel_tol=1e-9)
        assert math.isclose(t.t, float(expected.statistic), rel_tol=1e-9)
        assert math.isclose(t.p, float(expected.pvalue), rel_tol=1e-9)


def test_a_person_without_a_single_actor_match_is_counted_not_dropped(frames: dict[str, pd.DataFrame]) -> None:
    single = frames[rel.SINGLE]
    gone = single[single["scenario"] != 1]  # the pairs of scenario 1 lose their single-actor side
    table = deltas.paper_tables(rel.rows_by_config({rel.SINGLE: gone, rel.PAIR: frames[rel.PAIR]}))[
        "release_actor_actor_delta"
    ]
    pairs = frames[rel.PAIR]
    assert table["n_unmatched"].sum() == 2 * int((pairs["scenario"] == 1).sum())
    assert (table["n"] + table["n_unmatched"] == table["n_rows"]).all()
    assert table["note"].str.contains("without a value").any()


def test_the_paper_tables_need_the_single_actor_config(frames: dict[str, pd.DataFrame]) -> None:
    rows = rel.rows_by_config({rel.PAIR: frames[rel.PAIR], rel.OBSERVER: frames[rel.OBSERVER]})
    assert deltas.paper_tables(rows) == {}
