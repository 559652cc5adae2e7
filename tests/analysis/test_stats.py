"""analysis.stats against scipy and hand-computed cases, and its NaN-with-a-reason contract."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from analysis.stats import bonferroni, cohens_d, one_sample_t, pooled_sd, signed_rank, two_sample_t


def test_one_sample_matches_scipy_and_its_confidence_interval() -> None:
    x = np.random.default_rng(1).normal(0.3, 1.0, size=17)
    r = one_sample_t(x)
    ref = sps.ttest_1samp(x, 0.0)
    ci = ref.confidence_interval(0.95)
    assert r.n == 17 and r.df == 16
    assert r.t == pytest.approx(ref.statistic, rel=1e-12)
    assert r.p == pytest.approx(ref.pvalue, rel=1e-10)
    assert (r.ci_low, r.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-10)
    assert r.mean == pytest.approx(x.mean()) and r.sd == pytest.approx(x.std(ddof=1))
    assert r.note == ""


def test_one_sample_hand_computed_with_popmean_and_other_confidence() -> None:
    # 1, 2, 3, 4 against 1: mean 2.5, sd sqrt(5/3), se sqrt(5/12), t = 1.5 / se, df 3
    r = one_sample_t([1.0, 2.0, 3.0, 4.0], popmean=1.0, confidence=0.9)
    se = math.sqrt(5 / 12)
    assert r.t == pytest.approx(1.5 / se)
    assert r.p == pytest.approx(2 * sps.t.sf(1.5 / se, 3))
    half = sps.t.ppf(0.95, 3) * se
    assert (r.ci_low, r.ci_high) == pytest.approx((2.5 - half, 2.5 + half))


@pytest.mark.parametrize(
    ("values", "mean", "note"),
    [
        ([], math.nan, "no values"),
        ([0.4], 0.4, "n=1"),
        ([0.1, 0.1, 0.1], 0.1, "zero variance"),  # float mean of 0.1s is not exactly 0.1
    ],
)
def test_one_sample_degenerate_groups_give_nan_and_a_reason(values: list[float], mean: float, note: str) -> None:
    r = one_sample_t(values)
    assert math.isnan(r.t) and math.isnan(r.p) and math.isnan(r.ci_low) and math.isnan(r.ci_high)
    assert note in r.note
    assert (math.isnan(r.mean) and math.isnan(mean)) or r.mean == pytest.approx(mean)


def test_missing_values_raise_unless_omitted() -> None:
    with pytest.raises(ValueError, match="non-finite"):
        one_sample_t([1.0, math.nan, 2.0])
    r = one_sample_t([1.0, math.nan, 2.0, 4.0], nan_policy="omit")
    assert r.n == 3
    assert r.t == pytest.approx(sps.ttest_1samp([1.0, 2.0, 4.0], 0.0).statistic)
    with pytest.raises(ValueError, match="non-finite"):
        two_sample_t([1.0, 2.0], [math.inf, 1.0, 2.0])
    with pytest.raises(ValueError, match="nan_policy"):
        one_sample_t([1.0, 2.0], nan_policy="propagate")  # type: ignore[arg-type]


def test_two_sample_matches_scipy_equal_variance() -> None:
    rng = np.random.default_rng(2)
    a, b = rng.normal(0.2, 1.0, 11), rng.normal(-0.1, 1.5, 14)
    r = two_sample_t(a, b)
    ref = sps.ttest_ind(a, b, equal_var=True)
    ci = ref.confidence_interval(0.95)
    assert r.t == pytest.approx(ref.statistic, rel=1e-12)
    assert r.p == pytest.approx(ref.pvalue, rel=1e-10)
    assert r.df == pytest.approx(ref.df) == 23
    assert (r.ci_low, r.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-10)
    assert r.diff == pytest.approx(a.mean() - b.mean())
    assert (r.n1, r.n2, r.note) == (11, 14, "")


def test_two_sample_standardised_mean_difference_by_hand() -> None:
    # a: mean 2, SS 2; b: mean 5, SS 20; s_p = sqrt(22 / 5)
    a, b = [1.0, 2.0, 3.0], [2.0, 4.0, 6.0, 8.0]
    r = two_sample_t(a, b)
    sp = math.sqrt(22 / 5)
    assert r.sd_pooled == pytest.approx(sp)
    assert pooled_sd(np.array(a), np.array(b)) == pytest.approx(sp)
    assert r.smd == pytest.approx(-3 / sp)
    assert r.t == pytest.approx(-3 / (sp * math.sqrt(1 / 3 + 1 / 4)))
    d, note = cohens_d(a, b)
    assert d == pytest.approx(-3 / sp) and note == ""
    assert cohens_d(b, a)[0] == pytest.approx(3 / sp)


@pytest.mark.parametrize(
    ("a", "b", "note"),
    [
        ([1.0], [1.0, 2.0, 3.0], "n1=1 < 2"),
        ([1.0, 2.0], [], "n2=0 < 2"),
        ([0.3, 0.3], [0.3, 0.3, 0.3], "zero pooled variance"),
        ([0.2, 0.2], [0.7, 0.7], "zero pooled variance"),
    ],
)
def test_two_sample_degenerate_groups_give_nan_and_a_reason(a: list[float], b: list[float], note: str) -> None:
    r = two_sample_t(a, b)
    assert math.isnan(r.t) and math.isnan(r.p) and math.isnan(r.smd)
    assert note in r.note
    if a and b:
        assert r.diff == pytest.approx(np.mean(a) - np.mean(b))


def test_bonferroni_counts_only_tests_that_ran() -> None:
    adjusted = bonferroni([0.01, 0.2, math.nan, 0.6])
    np.testing.assert_allclose(adjusted, [0.03, 0.6, math.nan, 1.0])
    np.testing.assert_allclose(bonferroni([0.01, 0.02], m=10), [0.1, 0.2])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        bonferroni([1.5])


def test_signed_rank_is_scipys_wilcoxon_over_the_finite_pairs() -> None:
    rng = np.random.default_rng(5)
    x, y = rng.normal(0.2, 1, 30), rng.normal(0, 1, 30)
    r = signed_rank(x, y, min_n=5)
    ref = sps.wilcoxon(x, y)
    assert (r.n, r.statistic, r.p, r.note) == (30, pytest.approx(ref.statistic), pytest.approx(ref.pvalue), "")
    z = np.round(rng.normal(0.1, 1, 12), 1)
    z[:3] = 0.0  # zeros: zsplit halves their ranks between both signs
    assert signed_rank(z, zero_method="zsplit").p == pytest.approx(sps.wilcoxon(z, zero_method="zsplit").pvalue)
    x[3] = np.nan
    assert signed_rank(x, y).n == 29 and signed_rank(x, y).p == pytest.approx(
        sps.wilcoxon(np.delete(x, 3), np.delete(y, 3)).pvalue
    )


def test_signed_rank_small_or_untestable_cells_are_nan_with_a_note() -> None:
    few = signed_rank([0.1, 0.2, 0.3, 0.4], min_n=5)
    assert few.n == 4 and math.isnan(few.p) and "< 5" in few.note
    zero = signed_rank([0.5] * 6, [0.5] * 6)
    assert math.isnan(zero.p) and "zero" in zero.note
