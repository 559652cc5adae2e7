"""analysis.empathy.tables against independent computations: brute-force permutation enumeration,
scipy.stats.ttest_rel, and plain loops over the items."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.empathy.tables import (
    cell_tests,
    compute_cells,
    compute_gap,
    draw_permutations,
    gap_delta,
    identity_summary,
    intensity_frame,
    matrix_summary,
    permutation_test,
    permuted_deltas,
    refusal_rates,
    to_matrix,
)
from promptgen.empathy.prompts import identities

# A small category: `a person` plus two blocks, used as a race-like category (same = same group).
TINY = pd.DataFrame(
    {
        "category": "race",
        "order": [0, 1, 2, 3, 4],
        "identity": ["a person", "x1", "x2", "y1", "y2"],
        "group": ["unspecified", "X", "X", "Y", "Y"],
        "unspecified": [True, False, False, False, False],
    }
)


def joined_items(
    names: list[str], n_events: int, rng: np.random.Generator, *, category: str = "race", setting: str = "P0S0T0"
) -> pd.DataFrame:
    """Synthetic prompt rows joined with result rows: every (perceiver, experiencer, event)."""
    rows = []
    for p, e, t in itertools.product(names, names, range(n_events)):
        ev = float(rng.uniform(0, 100))
        rows.append(
            {
                "id": f"{p}|{e}|{t}",
                "model": "m",
                "category": category,
                "setting": setting,
                "perceiver": p,
                "experiencer": e,
                "text_id": f"ev{t:03d}",
                "expected_value": ev,
                "argmax_value": round(ev),
                "parsed_value": round(ev),
                "valid_mass": float(rng.uniform(0.5, 1.0)),
                "refused": False,
            }
        )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- items


def test_intensity_frame_scores_and_refusals():
    joined = pd.DataFrame(
        {
            "category": "race",
            "setting": "P0S0T0",
            "perceiver": "x1",
            "experiencer": "x2",
            "text_id": ["a", "b", "c", "d"],
            "expected_value": [10.0, 20.0, 30.0, 40.0],
            "parsed_value": [11, None, 31, 41],
            "valid_mass": [0.9, 0.9, 0.2, 0.9],
            "refused": [False, False, False, True],
        }
    )
    ev = intensity_frame(joined)
    assert ev["intensity"].tolist()[:3] == [10.0, 20.0, 30.0] and math.isnan(ev["intensity"].iat[3])
    assert ev["refused"].tolist() == [False, False, False, True]
    low = intensity_frame(joined, min_valid_mass=0.5)
    assert low["refused"].tolist() == [False, False, True, True]
    gen = intensity_frame(joined, score="parsed_value")
    assert gen["refused"].tolist() == [False, True, False, True]  # no parseable number is a refusal
    assert gen["intensity"].iat[0] == 11.0 and gen["intensity"].iloc[1:4:2].isna().all()
    kept = intensity_frame(joined, keep_refused=True)
    assert kept["intensity"].iat[3] == 40.0 and kept["refused"].iat[3]
    with pytest.raises(ValueError, match="score"):
        intensity_frame(joined, score="chosen_index")


def test_refusal_rates_counts_by_hand():
    joined = joined_items(["x1", "x2"], 5, np.random.default_rng(0))
    joined["refused"] = [i % 3 == 0 for i in range(len(joined))]
    other = joined_items(["x1", "x2"], 2, np.random.default_rng(1), setting="P1S0T0")
    other["refused"] = True
    frame = intensity_frame(pd.concat([joined, other], ignore_index=True))
    rates = refusal_rates(frame).set_index("setting")
    assert rates.loc["P0S0T0", "n_items"] == 20
    assert rates.loc["P0S0T0", "n_refused"] == sum(i % 3 == 0 for i in range(20))
    assert rates.loc["P0S0T0", "refusal_rate"] == pytest.approx(7 / 20)
    assert rates.loc["P0S0T0", "note"] == ""
    assert rates.loc["P1S0T0", "refusal_rate"] == 1.0 and rates.loc["P1S0T0", "note"] == "all items refused"


# ----------------------------------------------------------------------------- M0, M


def test_cells_match_loops_on_the_race_identities():
    names = [i.identity for i in identities("race")]
    assert len(names) == 19 and names[0] == "a person"
    rng = np.random.default_rng(2)
    joined = joined_items(names, 3, rng)
    joined.loc[rng.random(len(joined)) < 0.2, "refused"] = True
    frame = intensity_frame(joined)
    cells = compute_cells(frame)
    assert len(cells) == 19 * 19
    # M0 by plain loops over the answered items
    m0 = np.full((19, 19), np.nan)
    for i, p in enumerate(names):
        for j, e in enumerate(names):
            sel = joined[(joined.perceiver == p) & (joined.experiencer == e) & ~joined.refused]
            m0[i, j] = sel["expected_value"].mean() if len(sel) else np.nan
    got = to_matrix(cells, "m0")
    assert list(got.index) == names and list(got.columns) == names
    np.testing.assert_allclose(got.to_numpy(), m0, rtol=0, atol=1e-9)
    flat = m0[np.isfinite(m0)]
    expected_m = (m0 - sum(flat) / len(flat)) / math.sqrt(sum((flat - flat.mean()) ** 2) / len(flat))
    np.testing.assert_allclose(to_matrix(cells, "m").to_numpy(), expected_m, atol=1e-9)
    rel = cells.set_index(["perceiver", "experiencer"])["relation"]
    assert rel[("a white person", "a Caucasian")] == "same"
    assert rel[("a Latina", "a Latinx")] == "same"
    assert rel[("a Black person", "an Asian")] == "different"
    assert rel[("a person", "a person")] == "unspecified"
    assert rel[("a person", "a Latino")] == "unspecified" and rel[("a Latino", "a person")] == "unspecified"


def test_nationality_same_is_identity_not_cultural_group():
    ids = pd.DataFrame(
        {
            "category": "nationality",
            "order": [0, 1, 2],
            "identity": ["a person", "a person from China", "a person from Japan"],
            "group": ["unspecified", "Confucian", "Confucian"],
            "unspecified": [True, False, False],
        }
    )
    joined = joined_items(list(ids["identity"]), 2, np.random.default_rng(3), category="nationality")
    cells = compute_cells(intensity_frame(joined), ids).set_index(["perceiver", "experiencer"])
    assert cells.loc[("a person from China", "a person from Japan"), "relation"] == "different"
    assert cells.loc[("a person from Japan", "a person from Japan"), "relation"] == "same"


def test_unknown_identity_is_an_error():
    joined = joined_items(["x1", "zz"], 1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="zz"):
        compute_cells(intensity_frame(joined), TINY)


# ----------------------------------------------------------------------------- δ and the permutation test


def brute_delta(m: np.ndarray, same: np.ndarray) -> float:
    a = [m[i, j] for i in range(len(m)) for j in range(len(m)) if same[i, j]]
    b = [m[i, j] for i in range(len(m)) for j in range(len(m)) if not same[i, j]]
    return sum(a) / len(a) - sum(b) / len(b)


def all_permutation_deltas(m: np.ndarray, same: np.ndarray) -> list[float]:
    """δ of every (row permutation, column permutation) pair, by explicit re-indexing."""
    n = len(m)
    out = []
    for r in itertools.permutations(range(n)):
        for c in itertools.permutations(range(n)):
            moved = [[m[r[i], c[j]] for j in range(n)] for i in range(n)]
            out.append(brute_delta(np.array(moved), same))
    return out


def blocks(sizes: list[int]) -> np.ndarray:
    label = np.repeat(np.arange(len(sizes)), sizes)
    return label[:, None] == label[None, :]


def test_gap_delta_matches_loops():
    rng = np.random.default_rng(4)
    m, same = rng.normal(size=(5, 5)), blocks([2, 3])
    assert gap_delta(m, same) == pytest.approx(brute_delta(m, same), abs=1e-12)
    m[0, 1] = np.nan  # a cell without answered items is left out of its set
    kept = [(i, j) for i in range(5) for j in range(5) if (i, j) != (0, 1)]
    a = np.mean([m[i, j] for i, j in kept if same[i, j]])
    b = np.mean([m[i, j] for i, j in kept if not same[i, j]])
    assert gap_delta(m, same) == pytest.approx(a - b, abs=1e-12)


def test_permuted_deltas_equal_explicit_reindexing_for_every_pair():
    rng = np.random.default_rng(5)
    m, same = rng.normal(size=(4, 4)), blocks([2, 2])
    perms = np.array(list(itertools.permutations(range(4))))
    rows = np.repeat(perms, len(perms), axis=0)
    cols = np.tile(perms, (len(perms), 1))
    got = permuted_deltas(m, same, rows, cols, batch=50)  # batches that do not divide 576
    np.testing.assert_allclose(got, all_permutation_deltas(m, same), atol=1e-12)


@pytest.mark.parametrize(("sizes", "seed"), [([2, 2], 6), ([1, 1, 1], 7), ([2, 2], 8)])
def test_permutation_p_value_matches_exact_enumeration(sizes, seed):
    rng = np.random.default_rng(seed)
    n = sum(sizes)
    same = blocks(sizes)
    # an in-group effect, so p is neither 0 nor 1
    m = rng.normal(size=(n, n)) + 0.8 * same
    exact = all_permutation_deltas(m, same)
    obs = brute_delta(m, same)
    exact_p = sum(abs(d) >= abs(obs) - 1e-12 for d in exact) / len(exact)
    res = permutation_test(m, same, n_permutations=10_000, seed=seed)
    assert res.delta == pytest.approx(obs, abs=1e-12)
    # Monte Carlo p over 10,000 draws: standard error <= 0.005
    assert res.p_value == pytest.approx(exact_p, abs=0.02)
    lo, hi = np.quantile(exact, [0.025, 0.975])
    spread = max(exact) - min(exact)
    assert abs(res.null_low - lo) < 0.1 * spread and abs(res.null_high - hi) < 0.1 * spread


def test_null_samples_are_row_and_column_permutations_never_cellwise():
    rng = np.random.default_rng(9)
    m, same = rng.normal(size=(3, 3)), np.eye(3, dtype=bool)
    reachable = np.array(all_permutation_deltas(m, same))
    res = permutation_test(m, same, n_permutations=2_000, seed=1)
    distance = np.abs(res.null[:, None] - reachable[None, :]).min(axis=1)
    assert distance.max() < 1e-12
    # a cell-wise shuffle reaches other values: the check above can fail
    cellwise = [gap_delta(rng.permutation(m.ravel()).reshape(3, 3), same) for _ in range(200)]
    assert np.abs(np.array(cellwise)[:, None] - reachable[None, :]).min(axis=1).max() > 1e-6


def test_permutations_are_independent_and_seeded():
    rows, cols = draw_permutations(6, 500, np.random.default_rng(0))
    assert (np.sort(rows, axis=1) == np.arange(6)).all() and (np.sort(cols, axis=1) == np.arange(6)).all()
    assert (rows != cols).any(axis=1).mean() > 0.9  # rows and columns are drawn separately
    m, same = np.random.default_rng(1).normal(size=(6, 6)), blocks([3, 3])
    a, b = permutation_test(m, same, seed=42), permutation_test(m, same, seed=42)
    assert (a.null_low, a.null_high, a.p_value) == (b.null_low, b.null_high, b.p_value)
    c = permutation_test(m, same, seed=43)
    assert not np.array_equal(a.null, c.null)


def test_compute_gap_leaves_the_unspecified_identity_out():
    rng = np.random.default_rng(10)
    names = list(TINY["identity"])
    joined = joined_items(names, 4, rng)
    # `a person` rows and columns far off: they move M's scale but not which cells δ compares
    joined.loc[(joined.perceiver == "a person") | (joined.experiencer == "a person"), "expected_value"] += 500
    cells = compute_cells(intensity_frame(joined), TINY)
    m = to_matrix(cells, "m").to_numpy()
    sub, same = m[1:, 1:], blocks([2, 2])
    gap = compute_gap(cells, n_permutations=2_000, seed=3)
    assert len(gap) == 1
    row = gap.iloc[0]
    assert row["delta"] == pytest.approx(brute_delta(sub, same), abs=1e-12)
    assert (row["n_same"], row["n_different"]) == (8, 8)
    exact = all_permutation_deltas(sub, same)
    assert row["null_low"] >= min(exact) - 1e-12 and row["null_high"] <= max(exact) + 1e-12
    assert row["note"] == "" and row["seed"] == 3 and row["n_permutations"] == 2_000


# ----------------------------------------------------------------------------- per-cell tests


def test_cell_tests_match_scipy_ttest_rel():
    rng = np.random.default_rng(11)
    names = list(TINY["identity"])
    joined = joined_items(names, 12, rng)
    joined.loc[rng.random(len(joined)) < 0.15, "refused"] = True
    frame = intensity_frame(joined)
    tests = cell_tests(frame, TINY)
    assert len(tests) == 2 * 25
    answered = joined[~joined.refused]
    value = answered.set_index(["perceiver", "experiencer", "text_id"])["expected_value"]
    events = sorted(joined["text_id"].unique())

    def series(p: str, e: str) -> np.ndarray:
        return np.array([value.get((p, e, t), np.nan) for t in events])

    for reference in ("perceiver", "experiencer"):
        fam = tests[tests.reference == reference].set_index(["perceiver", "experiencer"])
        ps = []
        for p, e in itertools.product(names, names):
            row = fam.loc[(p, e)]
            if p == e:
                assert math.isnan(row["p_value"]) and row["note"] == "cell is its own reference"
                continue
            ref = (p, p) if reference == "perceiver" else (e, e)
            a, b = series(p, e), series(*ref)
            both = np.isfinite(a) & np.isfinite(b)
            expected = stats.ttest_rel(a[both], b[both])
            assert row["n_pairs"] == both.sum()
            assert row["t"] == pytest.approx(expected.statistic, rel=1e-9)
            assert row["p_value"] == pytest.approx(expected.pvalue, rel=1e-9)
            assert row["mean_diff"] == pytest.approx(np.mean(a[both] - b[both]), abs=1e-9)
            ps.append(expected.pvalue)
        assert (fam["n_tests"] == 20).all()
        bonf = fam.drop([(n, n) for n in names])["p_bonferroni"].to_numpy()
        np.testing.assert_allclose(np.sort(bonf), np.sort(np.minimum(1.0, np.array(ps) * 20)), rtol=1e-9)


def test_cell_tests_degenerate_cells_are_nan_with_a_note():
    joined = joined_items(list(TINY["identity"]), 3, np.random.default_rng(12))
    # x1 rates x2 exactly 5 above its own in-group cell: constant paired differences
    own = joined[(joined.perceiver == "x1") & (joined.experiencer == "x1")].set_index("text_id")["expected_value"]
    sel = (joined.perceiver == "x1") & (joined.experiencer == "x2")
    joined.loc[sel, "expected_value"] = joined.loc[sel, "text_id"].map(own).to_numpy() + 5.0
    # y1 -> y2: only one answered event
    sel = (joined.perceiver == "y1") & (joined.experiencer == "y2")
    joined.loc[sel & (joined.text_id != "ev000"), "refused"] = True
    tests = cell_tests(intensity_frame(joined), TINY)
    per = tests[tests.reference == "perceiver"].set_index(["perceiver", "experiencer"])
    assert math.isnan(per.loc[("x1", "x2"), "t"]) and per.loc[("x1", "x2"), "note"] == "paired differences are constant"
    assert per.loc[("x1", "x2"), "mean_diff"] == pytest.approx(5.0)
    assert (
        math.isnan(per.loc[("y1", "y2"), "p_value"]) and per.loc[("y1", "y2"), "note"] == "fewer than 2 paired events"
    )
    assert (per["n_tests"] == 18).all()  # 20 off-diagonal cells, 2 of them untestable
    assert not per["significant"][per["p_value"].isna()].any()


# ----------------------------------------------------------------------------- degenerate matrices and summaries


def test_all_refused_matrix_gives_nan_with_notes():
    joined = joined_items(list(TINY["identity"]), 2, np.random.default_rng(13))
    joined["refused"] = True
    frame = intensity_frame(joined)
    cells = compute_cells(frame, TINY)
    assert cells["m0"].isna().all() and cells["m"].isna().all()
    assert (cells["note"] == "no answered items").all()
    gap = compute_gap(cells, n_permutations=100).iloc[0]
    assert math.isnan(gap["delta"]) and math.isnan(gap["p_value"]) and gap["note"] != ""
    summary = matrix_summary(cells).iloc[0]
    assert math.isnan(summary["m0_mean"]) and summary["note"] == "no answered items"
    tests = cell_tests(frame, TINY)
    assert tests["p_value"].isna().all() and (tests["note"] != "").all()
    assert (tests["n_tests"] == 0).all()


def test_constant_matrix_gives_nan_with_notes():
    joined = joined_items(list(TINY["identity"]), 2, np.random.default_rng(14))
    joined["expected_value"] = 50.0
    cells = compute_cells(intensity_frame(joined), TINY)
    assert cells["m"].isna().all() and (cells["note"] == "M0 is constant: M undefined").all()
    gap = compute_gap(cells, n_permutations=100).iloc[0]
    assert math.isnan(gap["delta"]) and gap["note"] == "M0 is constant: M undefined"
    m = np.ones((4, 4))
    res = permutation_test(m, blocks([2, 2]), n_permutations=100)
    assert res.delta == 0.0 and math.isnan(res.p_value) and res.note == "M is constant"


def test_no_different_group_cells_gives_nan():
    res = permutation_test(np.random.default_rng(0).normal(size=(3, 3)), np.ones((3, 3), dtype=bool))
    assert math.isnan(res.delta) and "no same-group or no different-group" in res.note


def test_matrix_and_identity_summaries_by_hand():
    rng = np.random.default_rng(15)
    joined = joined_items(list(TINY["identity"]), 3, rng)
    joined.loc[(joined.perceiver == "y2") & (joined.experiencer == "x1"), "refused"] = True
    cells = compute_cells(intensity_frame(joined), TINY)
    m0 = to_matrix(cells, "m0").to_numpy()
    m = to_matrix(cells, "m").to_numpy()
    s = matrix_summary(cells).iloc[0]
    flat = m0[np.isfinite(m0)]
    assert s["n_cells"] == 25 and s["n_cells_missing"] == 1
    assert s["m0_mean"] == pytest.approx(flat.mean()) and s["m0_std"] == pytest.approx(flat.std())
    assert (s["m0_min"], s["m0_max"]) == (pytest.approx(flat.min()), pytest.approx(flat.max()))
    i, j = np.unravel_index(np.nanargmax(m), m.shape)
    assert s["m_max"] == pytest.approx(m[i, j])
    assert (s["m_max_perceiver"], s["m_max_experiencer"]) == (TINY["identity"][i], TINY["identity"][j])
    ident = identity_summary(cells).set_index(["role", "identity"])
    row = m[TINY["identity"].tolist().index("y2")]
    assert ident.loc[("perceiver", "y2"), "mean"] == pytest.approx(np.nanmean(row))
    assert ident.loc[("perceiver", "y2"), "n_cells"] == 4
    col = m[:, 1]
    assert ident.loc[("experiencer", "x1"), "std"] == pytest.approx(np.nanstd(col))


def test_two_scorings_of_one_model_are_two_matrices():
    names = list(TINY["identity"])
    a = joined_items(names, 3, np.random.default_rng(16)).assign(model_revision="r1", scoring='{"mode":"dist"}')
    b = joined_items(names, 3, np.random.default_rng(17)).assign(model_revision="r1", scoring='{"mode":"gen"}')
    both = compute_gap(compute_cells(intensity_frame(pd.concat([a, b], ignore_index=True)), TINY), seed=5)
    assert len(both) == 2 and list(both["scoring"]) == ['{"mode":"dist"}', '{"mode":"gen"}']
    alone = compute_gap(compute_cells(intensity_frame(b), TINY), seed=5)
    assert both["delta"].iat[1] == pytest.approx(alone["delta"].iat[0], abs=1e-12)
    assert both["null_low"].iat[1] == alone["null_low"].iat[0]


def test_duplicate_items_in_one_matrix_are_an_error():
    joined = joined_items(["x1", "x2"], 2, np.random.default_rng(18))
    doubled = pd.concat([joined, joined.iloc[:1]], ignore_index=True)
    with pytest.raises(ValueError, match="occurs twice"):
        cell_tests(intensity_frame(doubled), TINY)
