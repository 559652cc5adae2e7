"""The few tests every probe's analysis shares: one-sample t, two-sample equal-variance t, Cohen's d, Bonferroni.

Why not call scipy directly everywhere: analysis tables are built group by group, and a group
with one value or no variance must give a row with NaN and a reason, never an exception or a
warning-laden `inf`. These wrappers do that once, return named fields (`as_dict()` feeds a
table row), and otherwise defer to scipy for the distributions.

Missing values are never dropped silently: `nan_policy="raise"` (the default) rejects them;
`nan_policy="omit"` drops them and `n` counts what was used.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np
from scipy import stats

NanPolicy = Literal["raise", "omit"]


def _values(values: Sequence[float] | np.ndarray, nan_policy: NanPolicy, name: str = "values") -> np.ndarray:
    """A float array, with non-finite values rejected or dropped as asked."""
    if nan_policy not in ("raise", "omit"):
        raise ValueError(f"nan_policy must be 'raise' or 'omit', got {nan_policy!r}")
    x = np.asarray(values, dtype=np.float64).ravel()
    finite = np.isfinite(x)
    if not finite.all():
        if nan_policy == "raise":
            raise ValueError(
                f"{name} has {int((~finite).sum())} non-finite value(s); drop them or pass nan_policy='omit'"
            )
        x = x[finite]
    return x


def _constant(x: np.ndarray) -> bool:
    """Exactly equal values: their float SD can come out as 1e-17 instead of 0 and give a meaningless huge t."""
    return bool((x == x[0]).all())


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


@dataclass(frozen=True)
class OneSampleT:
    """One-sample t-test of the mean against `popmean`, with a confidence interval of the mean."""

    n: int
    mean: float
    sd: float  # sample standard deviation (ddof=1)
    t: float
    df: float
    p: float  # two-sided
    ci_low: float
    ci_high: float
    note: str  # empty when every field could be computed

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def one_sample_t(
    values: Sequence[float] | np.ndarray,
    popmean: float = 0.0,
    *,
    confidence: float = 0.95,
    nan_policy: NanPolicy = "raise",
) -> OneSampleT:
    """t = (mean - popmean) / (sd / sqrt(n)), df = n - 1, two-sided p; CI = mean ± t_crit · sd / sqrt(n).

    n < 2 or zero variance give NaN for what cannot be computed (the mean is still reported)
    and a `note` saying why, because a table of many groups must not stop at one degenerate group.
    """
    _check_confidence(confidence)
    x = _values(values, nan_policy)
    n = len(x)
    nan = math.nan
    if n == 0:
        return OneSampleT(0, nan, nan, nan, nan, nan, nan, nan, "no values")
    mean = float(x.mean())
    if n < 2:
        return OneSampleT(n, mean, nan, nan, nan, nan, nan, nan, "n=1 < 2: no variance estimate")
    df = float(n - 1)
    if _constant(x):
        return OneSampleT(n, mean, 0.0, nan, df, nan, nan, nan, "zero variance: t undefined")
    sd = float(x.std(ddof=1))
    if not sd > 0:
        return OneSampleT(n, mean, 0.0, nan, df, nan, nan, nan, "zero variance: t undefined")
    se = sd / math.sqrt(n)
    t = (mean - popmean) / se
    p = float(2.0 * stats.t.sf(abs(t), df))
    half = float(stats.t.ppf(0.5 + confidence / 2.0, df)) * se
    return OneSampleT(n, mean, sd, float(t), df, p, mean - half, mean + half, "")


@dataclass(frozen=True)
class TwoSampleT:
    """Two-sided independent two-sample t-test with equal variances, and the pooled-SD effect size.

    `diff` = mean1 - mean2; `smd` = diff / sd_pooled (Cohen's d); CI is that of `diff`.
    """

    n1: int
    n2: int
    mean1: float
    mean2: float
    diff: float
    sd_pooled: float
    smd: float
    t: float
    df: float
    p: float
    ci_low: float
    ci_high: float
    note: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def pooled_sd(a: np.ndarray, b: np.ndarray) -> float:
    """sqrt(((n1-1)s1² + (n2-1)s2²) / (n1+n2-2)): the SD both the equal-variance t and Cohen's d use."""
    n1, n2 = len(a), len(b)
    if n1 + n2 - 2 < 1:
        return math.nan
    ss = ((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum()
    return float(math.sqrt(ss / (n1 + n2 - 2)))


def two_sample_t(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    nan_policy: NanPolicy = "raise",
) -> TwoSampleT:
    """Student's t (equal variances), df = n1 + n2 - 2, and the standardised mean difference (mean1 - mean2) / s_p.

    Each sample needs n >= 2 (so each contributes a variance estimate) and s_p > 0; otherwise the
    fields that cannot be computed are NaN and `note` says why.
    """
    _check_confidence(confidence)
    x, y = _values(a, nan_policy, "a"), _values(b, nan_policy, "b")
    n1, n2 = len(x), len(y)
    nan = math.nan
    m1 = float(x.mean()) if n1 else nan
    m2 = float(y.mean()) if n2 else nan
    diff = m1 - m2
    short = [f"n{i}={n} < 2" for i, n in ((1, n1), (2, n2)) if n < 2]
    if short:
        return TwoSampleT(n1, n2, m1, m2, diff, nan, nan, nan, nan, nan, nan, nan, "; ".join(short))
    sp = 0.0 if _constant(x) and _constant(y) else pooled_sd(x, y)
    df = float(n1 + n2 - 2)
    if not sp > 0:
        return TwoSampleT(n1, n2, m1, m2, diff, 0.0, nan, nan, df, nan, nan, nan, "zero pooled variance: t undefined")
    se = sp * math.sqrt(1.0 / n1 + 1.0 / n2)
    t = diff / se
    p = float(2.0 * stats.t.sf(abs(t), df))
    half = float(stats.t.ppf(0.5 + confidence / 2.0, df)) * se
    return TwoSampleT(n1, n2, m1, m2, diff, sp, diff / sp, float(t), df, p, diff - half, diff + half, "")


def cohens_d(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, *, nan_policy: NanPolicy = "raise"
) -> tuple[float, str]:
    """(mean(a) - mean(b)) / s_p with the pooled SD of `pooled_sd`, and a note (empty when defined)."""
    r = two_sample_t(a, b, nan_policy=nan_policy)
    return r.smd, r.note


def bonferroni(p_values: Sequence[float] | np.ndarray, m: int | None = None) -> np.ndarray:
    """min(1, p · m) per p-value; NaN stays NaN.

    `m` defaults to the number of non-NaN p-values, i.e. the tests that were actually run: a
    group whose test was undefined is not a comparison and must not inflate the correction.
    """
    p = np.asarray(p_values, dtype=np.float64)
    valid = ~np.isnan(p)
    if m is None:
        m = int(valid.sum())
    if m < 0:
        raise ValueError(f"m must be non-negative, got {m}")
    if ((p[valid] < 0) | (p[valid] > 1)).any():
        raise ValueError("p-values must lie in [0, 1]")
    return np.where(valid, np.minimum(1.0, p * max(m, 1)), np.nan)


def paired_t(a: np.ndarray, b: np.ndarray) -> dict[str, np.ndarray]:
    """Paired t-test of a against b along the last axis, over the pairs where both are
    finite; vectorised over the leading axes (every cell of a matrix in one call).

    Same statistic as scipy.stats.ttest_rel with nan_policy='omit', but NaN (with a reason in
    `note`) for fewer than 2 pairs or constant differences instead of a warning or an inf.
    """
    d = a - b
    valid = np.isfinite(d)
    n = valid.sum(axis=-1)
    d0 = np.where(valid, d, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = d0.sum(axis=-1) / n
        resid = np.where(valid, d - mean[..., None], 0.0)
        var = (resid**2).sum(axis=-1) / (n - 1)
        sd = np.sqrt(var)
        mean_a = np.where(valid, a, 0.0).sum(axis=-1) / n
        mean_b = np.where(valid, b, 0.0).sum(axis=-1) / n
        few = n < 2
        constant = ~few & (sd <= 1e-12 * np.maximum(1.0, np.abs(mean)))
        ok = ~few & ~constant
        t = np.where(ok, mean / (sd / np.sqrt(n)), np.nan)
    df = np.where(ok, n - 1, np.nan)
    p = np.where(ok, 2.0 * stats.t.sf(np.abs(t), np.where(ok, df, 1.0)), np.nan)
    note = np.where(few, "fewer than 2 paired events", np.where(constant, "paired differences are constant", ""))
    return {
        "n_pairs": n,
        "mean_cell": np.where(n > 0, mean_a, np.nan),
        "mean_reference": np.where(n > 0, mean_b, np.nan),
        "mean_diff": np.where(n > 0, mean, np.nan),
        "t": t,
        "df": df,
        "p_value": p,
        "note": note,
    }


@dataclass(frozen=True)
class SignedRank:
    """Wilcoxon signed-rank test (two-sided), as scipy computes it, or NaN with the reason."""

    n: int  # pairs (or values) used: both finite
    statistic: float
    p: float
    note: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def signed_rank(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray | None = None,
    *,
    zero_method: Literal["wilcox", "pratt", "zsplit"] = "wilcox",
    min_n: int = 1,
) -> SignedRank:
    """`scipy.stats.wilcoxon(x, y, zero_method=...)` over the pairs where both values are finite.

    The Talent-or-Luck release tests its heatmap cells this way and only cells with at least
    `min_n` rows (5 there); a cell below that, or one scipy cannot test (every difference
    zero), is NaN with a note, as the release's `except: nan` made it, never an exception.
    """
    a = np.asarray(x, dtype=np.float64).ravel()
    b = None if y is None else np.asarray(y, dtype=np.float64).ravel()
    keep = np.isfinite(a) if b is None else np.isfinite(a) & np.isfinite(b)
    a = a[keep]
    b = None if b is None else b[keep]
    n = len(a)
    if n < min_n:
        return SignedRank(n, math.nan, math.nan, f"n={n} < {min_n}: not tested")
    diff = a if b is None else a - b
    if zero_method == "wilcox" and not diff.any():
        return SignedRank(n, math.nan, math.nan, "every difference is zero: not tested")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            result = stats.wilcoxon(a, b, zero_method=zero_method)
        except ValueError as exc:
            return SignedRank(n, math.nan, math.nan, f"not tested: {exc}")
    p = float(result.pvalue)
    return SignedRank(n, float(result.statistic), p, "" if math.isfinite(p) else "scipy gave no p-value")
