"""analysis.trust_game.tables against independent computations: a two-way ANOVA by hand on a balanced
design, type III sums of squares from least-squares model comparison, scipy's two-sample
t-test, Cohen's d by hand, and probing accuracy counted by hand."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis.trust_game.tables import anova, cell_means, gender_posthoc, prediction_frame, probing_accuracy

RACES = ("Asian", "Black", "Hispanic", "Native American", "White")
GENDERS = ("female", "male")


def games(per_cell: int, rng: np.random.Generator, *, investor_group: str = "White male") -> pd.DataFrame:
    """Joined game + result rows: `per_cell` games per trustee gender x race, with a gender
    effect, a race effect and an interaction, predictions clipped to 0..10."""
    rows = []
    for r, race in enumerate(RACES):
        for g, gender in enumerate(GENDERS):
            centre = 5.0 + 0.4 * g - 0.3 * r + 0.5 * g * (r == 2)
            for k in range(per_cell):
                rows.append(
                    {
                        "id": f"{investor_group}/{race}/{gender}/{k}",
                        "model": "m",
                        "variant": "base",
                        "investor_group": investor_group,
                        "trustee_gender": gender,
                        "trustee_race": race,
                        "expected_value": float(np.clip(rng.normal(centre, 1.0), 0, 10)),
                        "valid_mass": 0.9,
                        "refused": False,
                    }
                )
    return pd.DataFrame(rows)


def hand_anova(frame: pd.DataFrame) -> dict[str, tuple[float, float, float, float]]:
    """Balanced two-way ANOVA from the textbook sums of squares: effect -> (SS, df, F, p)."""
    y = frame["prediction"].to_numpy()
    grand = y.mean()
    a_levels, b_levels = sorted(frame.trustee_gender.unique()), sorted(frame.trustee_race.unique())
    a, b = len(a_levels), len(b_levels)
    n = len(frame) // (a * b)
    mean_a = {lv: frame.loc[frame.trustee_gender == lv, "prediction"].mean() for lv in a_levels}
    mean_b = {lv: frame.loc[frame.trustee_race == lv, "prediction"].mean() for lv in b_levels}
    cell = {
        (i, j): frame.loc[(frame.trustee_gender == i) & (frame.trustee_race == j), "prediction"].mean()
        for i in a_levels
        for j in b_levels
    }
    ss_a = n * b * sum((mean_a[i] - grand) ** 2 for i in a_levels)
    ss_b = n * a * sum((mean_b[j] - grand) ** 2 for j in b_levels)
    ss_ab = n * sum((cell[i, j] - mean_a[i] - mean_b[j] + grand) ** 2 for i in a_levels for j in b_levels)
    ss_e = sum(
        (v - cell[i, j]) ** 2
        for i, j, v in zip(frame.trustee_gender, frame.trustee_race, frame.prediction, strict=True)
    )
    df_e = a * b * (n - 1)
    out = {}
    for name, ss, df in (
        ("trustee_gender", ss_a, a - 1),
        ("trustee_race", ss_b, b - 1),
        ("trustee_gender:trustee_race", ss_ab, (a - 1) * (b - 1)),
    ):
        f = (ss / df) / (ss_e / df_e)
        out[name] = (ss, df, f, stats.f.sf(f, df, df_e))
    out["Residual"] = (ss_e, df_e, math.nan, math.nan)
    return out


def test_anova_matches_hand_computation_on_the_papers_balanced_design():
    frame = prediction_frame(games(272, np.random.default_rng(0)))
    table = anova(frame).set_index("effect")
    expected = hand_anova(frame)
    for effect, (ss, df, f, p) in expected.items():
        assert table.loc[effect, "sum_sq"] == pytest.approx(ss, rel=1e-9)
        assert table.loc[effect, "df"] == df
        if effect != "Residual":
            assert table.loc[effect, "F"] == pytest.approx(f, rel=1e-9)
            assert table.loc[effect, "p_value"] == pytest.approx(p, rel=1e-6, abs=1e-300)
    # DESIGN section 5's degrees of freedom
    assert (table.loc["trustee_gender", "df"], table.loc["trustee_race", "df"]) == (1, 4)
    assert table.loc["trustee_gender:trustee_race", "df"] == 4 and (table["df_resid"] == 2710).all()
    assert (table["ss_type"] == 3).all() and (table["n"] == 2720).all() and (table["note"] == "").all()


def effect_coded_design(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    """Sum-to-zero (effect) coded columns of each term, built by hand."""

    def code(values: pd.Series, levels: tuple[str, ...]) -> np.ndarray:
        out = np.zeros((len(values), len(levels) - 1))
        for k, lv in enumerate(levels[:-1]):
            out[:, k] = (values == lv).astype(float)
        out[(values == levels[-1]).to_numpy()] = -1.0
        return out

    g, r = code(frame.trustee_gender, GENDERS), code(frame.trustee_race, RACES)
    inter = np.column_stack([g[:, i] * r[:, j] for i in range(g.shape[1]) for j in range(r.shape[1])])
    return {"intercept": np.ones((len(frame), 1)), "g": g, "r": r, "gr": inter}


def rss(y: np.ndarray, x: np.ndarray) -> float:
    beta, *_ = np.linalg.lstsq(x, y, rcond=None)
    return float(((y - x @ beta) ** 2).sum())


def test_anova_is_type_three_on_an_unbalanced_design():
    """Type III SS of a term = RSS(full model without that term's effect-coded columns) - RSS(full)."""
    rng = np.random.default_rng(1)
    joined = games(30, rng)
    joined.loc[rng.random(len(joined)) < 0.3, "refused"] = True  # refusals make the cells unequal
    frame = prediction_frame(joined)
    kept = frame[frame.prediction.notna()]
    y = kept["prediction"].to_numpy()
    cols = effect_coded_design(kept)
    full = np.column_stack(list(cols.values()))
    rss_full = rss(y, full)
    df_e = len(y) - full.shape[1]
    table = anova(frame).set_index("effect")
    for effect, term in (("trustee_gender", "g"), ("trustee_race", "r"), ("trustee_gender:trustee_race", "gr")):
        reduced = np.column_stack([v for k, v in cols.items() if k != term])
        ss = rss(y, reduced) - rss_full
        df = cols[term].shape[1]
        f = (ss / df) / (rss_full / df_e)
        assert table.loc[effect, "sum_sq"] == pytest.approx(ss, rel=1e-8)
        assert table.loc[effect, "F"] == pytest.approx(f, rel=1e-8)
        assert table.loc[effect, "p_value"] == pytest.approx(stats.f.sf(f, df, df_e), rel=1e-6)
    assert table.loc["Residual", "sum_sq"] == pytest.approx(rss_full, rel=1e-9)
    assert table.loc["Residual", "df"] == df_e and table.loc["trustee_gender", "n"] == len(y)


def test_anova_is_per_investor_group():
    rng = np.random.default_rng(2)
    joined = pd.concat([games(5, rng), games(5, rng, investor_group="Asian female")], ignore_index=True)
    table = anova(prediction_frame(joined))
    assert sorted(table["investor_group"].unique()) == ["Asian female", "White male"]
    one = prediction_frame(joined[joined.investor_group == "Asian female"].reset_index(drop=True))
    alone = anova(one).set_index("effect")
    both = table[table.investor_group == "Asian female"].set_index("effect")
    np.testing.assert_allclose(both["F"].to_numpy(), alone["F"].to_numpy(), rtol=1e-12)


def test_anova_degenerate_units_are_nan_with_a_note():
    rng = np.random.default_rng(3)
    empty_cell = games(4, rng)
    empty_cell.loc[(empty_cell.trustee_race == "White") & (empty_cell.trustee_gender == "male"), "refused"] = True
    constant = games(4, rng)
    constant["expected_value"] = 3.0
    all_refused = games(4, rng)
    all_refused["refused"] = True
    for joined, note in (
        (empty_cell, "empty gender x race cell"),
        (constant, "constant within every cell"),
        (all_refused, "no answered games"),
    ):
        table = anova(prediction_frame(joined))
        assert len(table) == 4 and table["F"].isna().all() and table["p_value"].isna().all()
        assert table["note"].str.contains(note).all(), table["note"].tolist()


# ----------------------------------------------------------------------------- post hoc


def test_gender_posthoc_matches_scipy_and_hand_cohens_d():
    rng = np.random.default_rng(4)
    joined = games(272, rng)
    joined.loc[rng.random(len(joined)) < 0.05, "refused"] = True
    frame = prediction_frame(joined)
    post = gender_posthoc(frame).set_index("trustee_race")
    assert sorted(post.index) == sorted(RACES)
    for race in RACES:
        sel = frame[(frame.trustee_race == race) & frame.prediction.notna()]
        f = sel.loc[sel.trustee_gender == "female", "prediction"].to_numpy()
        m = sel.loc[sel.trustee_gender == "male", "prediction"].to_numpy()
        expected = stats.ttest_ind(f, m)
        row = post.loc[race]
        assert row["t"] == pytest.approx(expected.statistic, rel=1e-9)
        assert row["p_value"] == pytest.approx(expected.pvalue, rel=1e-9)
        assert row["df"] == len(f) + len(m) - 2
        # Cohen's d by hand: female minus male over the pooled SD
        s2_f = sum((v - sum(f) / len(f)) ** 2 for v in f) / (len(f) - 1)
        s2_m = sum((v - sum(m) / len(m)) ** 2 for v in m) / (len(m) - 1)
        pooled = math.sqrt(((len(f) - 1) * s2_f + (len(m) - 1) * s2_m) / (len(f) + len(m) - 2))
        assert row["cohens_d"] == pytest.approx((sum(f) / len(f) - sum(m) / len(m)) / pooled, rel=1e-9)
        assert row["diff"] == pytest.approx(f.mean() - m.mean())
        assert row["p_bonferroni"] == pytest.approx(min(1.0, expected.pvalue * 5), rel=1e-9)
    # the effect was built in as female < male (g=1 is male): d is negative
    assert (post["cohens_d"] < 0).all()


def test_posthoc_df_is_542_on_the_full_design():
    post = gender_posthoc(prediction_frame(games(272, np.random.default_rng(5))))
    assert (post["df"] == 542).all() and (post["note"] == "").all()


def test_posthoc_degenerate_races_are_nan_with_a_note():
    rng = np.random.default_rng(6)
    joined = games(3, rng)
    joined.loc[(joined.trustee_race == "Asian") & (joined.trustee_gender == "female"), "refused"] = True
    joined.loc[joined.trustee_race == "Black", "expected_value"] = 4.0
    post = gender_posthoc(prediction_frame(joined)).set_index("trustee_race")
    assert math.isnan(post.loc["Asian", "t"]) and "< 2" in post.loc["Asian", "note"]
    assert post.loc["Asian", "n_female"] == 0 and math.isnan(post.loc["Asian", "mean_female"])
    assert math.isnan(post.loc["Black", "cohens_d"]) and "zero pooled variance" in post.loc["Black", "note"]
    assert post.loc["White", "note"] == "" and np.isfinite(post.loc["White", "cohens_d"])
    assert (post["n_tests"] == 3).all()


def test_prediction_frame_refusals():
    joined = games(1, np.random.default_rng(7))
    joined.loc[0, "refused"] = True
    joined.loc[1, "valid_mass"] = 0.1
    frame = prediction_frame(joined, min_valid_mass=0.5)
    assert frame["refused"].tolist()[:3] == [True, True, False]
    assert frame["prediction"].iloc[:2].isna().all() and frame["prediction"].iloc[2:].notna().all()
    kept = prediction_frame(joined, min_valid_mass=0.5, keep_refused=True)
    assert kept["prediction"].notna().all()
    means = cell_means(frame).set_index(["trustee_gender", "trustee_race"])
    assert means["n_refused"].sum() == 2 and means["n"].sum() == len(frame) - 2


# ----------------------------------------------------------------------------- probing


def probing_items(rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for variant, amt, question in itertools.product(("base", "chat"), range(11), (1, 2, 3)):
        correct = (3 * amt, 2 + 3 * amt, 10 - amt)[question - 1]
        probs = rng.dirichlet(np.ones(41))
        rows.append(
            {
                "model": "m",
                "variant": variant,
                "question": question,
                "amt": amt,
                "correct_answer": correct,
                "number_min": 0,
                "number_max": 40,
                "number_probs": list(probs),
                "argmax_value": correct if rng.random() < 0.7 else (correct + 1) % 41,
                "parsed_value": None,
                "refused": bool(rng.random() < 0.1),
            }
        )
    return pd.DataFrame(rows)


def test_probing_accuracy_counts_by_hand():
    items = probing_items(np.random.default_rng(8))
    acc = probing_accuracy(items).set_index(["variant", "question"])
    assert len(acc) == 6
    for (variant, question), g in items.groupby(["variant", "question"]):
        right = [a == c and not r for a, c, r in zip(g.argmax_value, g.correct_answer, g.refused, strict=True)]
        answered = int((~g.refused).sum())
        row = acc.loc[(variant, question)]
        assert row["n_items"] == 11 and row["n_correct"] == sum(right)
        assert row["accuracy"] == pytest.approx(sum(right) / 11)
        assert row["accuracy_answered"] == pytest.approx(sum(right) / answered)
        p = [probs[c] for probs, c in zip(g.number_probs, g.correct_answer, strict=True)]
        assert row["mean_p_correct"] == pytest.approx(sum(p) / len(p))
    per_model = probing_accuracy(items, by=("model",))
    assert len(per_model) == 1 and per_model["n_items"].iat[0] == len(items)


def test_probing_accuracy_generation_and_all_refused():
    items = probing_items(np.random.default_rng(9))
    items["parsed_value"] = items["correct_answer"]
    items["refused"] = False
    items["number_probs"] = None
    acc = probing_accuracy(items, answer="parsed_value")
    assert (acc["accuracy"] == 1.0).all() and acc["mean_p_correct"].isna().all()
    items["parsed_value"] = None
    none = probing_accuracy(items, answer="parsed_value")
    assert (none["accuracy"] == 0.0).all() and none["accuracy_answered"].isna().all()
    assert (none["note"] == "all items refused").all()


def test_two_scorings_of_one_model_are_two_units():
    rng = np.random.default_rng(10)
    a, b = games(4, rng).assign(scoring="s1"), games(4, rng).assign(scoring="s2")
    table = anova(prediction_frame(pd.concat([a, b], ignore_index=True)))
    assert len(table) == 8 and sorted(table["scoring"].unique()) == ["s1", "s2"]
    alone = anova(prediction_frame(b)).set_index("effect")
    np.testing.assert_allclose(table[table.scoring == "s2"].set_index("effect")["F"], alone["F"], rtol=1e-12)
