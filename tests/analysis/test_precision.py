"""The sampling precision of headline numbers (`analysis.precision`, docs/DESIGN.md section 9).

The vectorised bootstrap is checked against a direct recomputation: each resample's events
copied out as rows and run through the project's own δ (`compute_cells`, `compute_gap`) and
mean d. The finite population correction is checked by coverage on a population whose value is
known, where leaving it out would fail for sure.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from analysis.attribution.precision import delta_with_precision, mean_d_precision, mean_precision
from analysis.attribution.tables import delta_table
from analysis.empathy import tables as emp
from analysis.empathy.precision import delta_metric, gap_precision
from analysis.empathy.probe import headline as empathy_headline
from analysis.precision import Precision, _weights, cluster_bootstrap, precision_columns, unit_sums

RUN = {"model": "m", "model_revision": "main", "scoring": "{}"}


def religion_frame(events: int, rng: np.random.Generator) -> pd.DataFrame:
    """Intensity rows of one religion matrix: an in-group effect, an event effect and noise, a few refused."""
    ids = emp.category_identities(None, "religion")["identity"].to_numpy()
    p, e, t = (a.ravel() for a in np.meshgrid(ids, ids, np.arange(events), indexing="ij"))
    value = 50 + 5.0 * (p == e) + rng.normal(0, 8, events)[t] + rng.normal(0, 10, len(t))
    value[rng.random(len(t)) < 0.02] = np.nan
    return pd.DataFrame({**RUN, "category": "religion", "setting": "P0S0T0", "perceiver": p, "experiencer": e}).assign(
        text_id=[f"ev{k}" for k in t], intensity=value
    )


def direct_delta(frame: pd.DataFrame) -> float:
    gap = emp.compute_gap(emp.compute_cells(frame), n_permutations=10)
    return float(gap["delta"].iat[0])


def test_bootstrap_resamples_equal_the_analysis_on_the_resampled_events():
    rng = np.random.default_rng(1)
    frame = religion_frame(9, rng)
    ids = emp.category_identities(None, "religion")
    n = len(ids)
    units, events = pd.factorize(frame["text_id"])
    cells = emp._codes(frame["perceiver"], ids, "p") * n + emp._codes(frame["experiencer"], ids, "e")
    total, count = unit_sums(units, cells, n * n, frame["intensity"].to_numpy())
    rel = emp.relation_matrix(ids, "religion").ravel()
    metric = delta_metric(rel == emp.SAME, rel == emp.DIFFERENT)
    idx = rng.integers(0, len(events), (12, len(events)))
    fast = metric(_weights(idx, len(events)) @ np.hstack([total, count]))
    for row, draw in zip(fast, idx, strict=True):
        # the slow way: each drawn event's rows copied in (a twice-drawn event twice, as its own event)
        copies = [frame[frame["text_id"] == events[u]].assign(text_id=f"draw{k}") for k, u in enumerate(draw)]
        assert row == pytest.approx(direct_delta(pd.concat(copies, ignore_index=True)), abs=1e-12)
    # and the estimate is the analysis's δ of all the events
    (found,) = gap_precision(frame, {}, resamples=200).values()
    assert found.estimate == pytest.approx(direct_delta(frame), abs=1e-12)
    assert found.low < found.estimate < found.high and found.se > 0


def test_mean_d_precision_resamples_templates_whole():
    rng = np.random.default_rng(2)
    rows = [
        {**RUN, "template_id": f"t{t}", "identity": identity, "outcome": "success", "refused": False,
         "d": 0.2 * t + (identity == "a") * 0.1 + rng.normal(0, 0.1), "base_id": f"t{t}.{identity}.{k}"}
        for t in range(15) for identity in "abc" for k in range(2)
    ]  # fmt: skip
    items = pd.DataFrame(rows)
    found = mean_d_precision(items, {}, ("identity",), resamples=400)
    for identity in "abc":
        got = found[("m", "main", "{}", "included", identity)]
        own = items[items["identity"] == identity]
        assert got.estimate == pytest.approx(own["d"].mean())
        # templates, not items, are the units: the spread is that of the template means (15 of them)
        per_template = own.groupby("template_id")["d"].mean()
        assert got.se == pytest.approx(per_template.std(ddof=0) / math.sqrt(15), rel=0.15)
        assert got.n == 15


def test_delta_d_precision_resamples_the_paired_items_templates():
    """Δd's interval (DESIGN 9: "attribution d per identity and Δd"): templates are the units; the standard
    error is checked against the ratio estimator's linearised one, computed by hand from per-template sums."""
    rng = np.random.default_rng(8)
    rows = [
        {**RUN, "template_id": f"t{t}", "identity": identity, "refused": False,
         "delta_d": 0.05 * (t % 7) + (identity == "a") * 0.2 + rng.normal(0, 0.1)}
        for t in range(40) for identity in "ab" for _ in range(1 + t % 3)
    ]  # fmt: skip
    frame = pd.DataFrame(rows)
    frame.loc[[3, 17], "delta_d"] = np.nan  # no single-actor match: in no mean, as in the table
    frames = {"included": frame, "excluded": frame}
    found = mean_precision(frames, {}, ("identity",), "delta_d", resamples=2000)
    for identity in "ab":
        got = found[("m", "main", "{}", "included", identity)]
        own = frame[(frame["identity"] == identity) & frame["delta_d"].notna()]
        assert got.estimate == pytest.approx(own["delta_d"].mean()) and got.n == 40
        sums = own.groupby("template_id")["delta_d"].agg(["sum", "count"])
        ratio = sums["sum"].sum() / sums["count"].sum()
        linearised = math.sqrt(((sums["sum"] - ratio * sums["count"]) ** 2).sum()) / sums["count"].sum()
        assert got.se == pytest.approx(linearised, rel=0.15)
    # the table the report shows: its mean and the interval's text, over 40 of 160 templates
    table = delta_with_precision(
        delta_table(frames, ("identity",)), frames, {("m", "main", "{}"): (160, 3)}, ("identity",), seed=0
    )
    row = table[(table["identity"] == "a") & (table["refused_items"] == "included")].iloc[0]
    assert row["mean"] == pytest.approx(found[("m", "main", "{}", "included", "a")].estimate)
    assert (
        row["precision"].startswith(f"Δd = {row['mean']:.2f} (95% CI ")
        and "40 of 160 templates, seed 3" in row["precision"]
    )
    assert row["sample_ci_low"] < row["mean"] < row["sample_ci_high"] and row["sample_units"] == 40


def test_a_full_run_has_no_interval_and_says_all_events():
    frame = religion_frame(6, np.random.default_rng(3))
    (full,) = gap_precision(frame, {("m", "main", "{}"): (6, 4)}).values()
    assert math.isnan(full.low) and math.isnan(full.high) and full.se == 0 and full.mde == 0
    assert full.text("δ") == f"δ = {full.estimate:.2f} (all 6 events)"


def test_the_interval_shrinks_by_the_finite_population_correction():
    """Without replacement, n of N: the standard error and half-width shrink by sqrt(1 - n/N), the bias (which falls
    as 1/n - 1/N) by 1 - n/N; a scipy interval's deviations from the estimate by sqrt(1 - n/N)."""
    sums = np.random.default_rng(4).normal(size=(40, 1))
    mean = lambda s: s[:, 0] / 40  # noqa: E731
    (free,) = cluster_bootstrap(sums, mean, resamples=500, seed=7)
    (part,) = cluster_bootstrap(sums, mean, population=160, resamples=500, seed=7)
    scale = math.sqrt(1 - 40 / 160)
    assert part.half_width == pytest.approx(free.half_width * scale)
    centre = lambda p: (p.low + p.high) / 2  # noqa: E731
    assert part.estimate - centre(part) == pytest.approx((free.estimate - centre(free)) * scale**2)
    assert part.se == pytest.approx(free.se * scale) and part.mde == pytest.approx(2.8 * part.se)
    (free,) = cluster_bootstrap(sums, mean, resamples=500, seed=7, method="BCa")
    (part,) = cluster_bootstrap(sums, mean, population=160, resamples=500, seed=7, method="BCa")
    assert part.high - part.estimate == pytest.approx((free.high - free.estimate) * scale)
    assert part.estimate - part.low == pytest.approx((free.estimate - free.low) * scale)


def test_coverage_of_a_large_share_sample_is_near_95_percent():
    """n = 3/4 of N: the correction halves the interval. Without it the coverage is ~99.99% (z = 3.9);
    with it 95%: 400 samples' misses lie in 8..36 (binomial 20 ± 4.4), which a wrong method cannot hit."""
    rng = np.random.default_rng(5)
    population = rng.gamma(2.0, 1.0, 240)
    truth = population.mean()
    misses = 0
    for k in range(400):
        sample = rng.choice(population, 180, replace=False)
        (got,) = cluster_bootstrap(sample[:, None], lambda s: s[:, 0] / 180, population=240, resamples=400, seed=k)
        misses += not got.low <= truth <= got.high
    assert 8 <= misses <= 36


def test_headline_text_for_a_sampled_and_a_full_run():
    sampled = Precision(0.3114, 0.2712, 0.3498, 0.02, 600, 6050, "event", 0)
    assert sampled.text("δ") == "δ = 0.31 (95% CI 0.27-0.35; 600 of 6,050 events, seed 0)"
    assert Precision(-0.3, -0.41, -0.2, 0.05, 24, 6050, "event").text("δ") == (
        "δ = -0.30 (95% CI -0.41 to -0.20; 24 of 6,050 events)"
    )
    full = Precision(0.3114, np.nan, np.nan, 0.0, 6050, 6050, "event", 0)
    assert full.text("δ") == "δ = 0.31 (all 6,050 events)"
    null = {"null_low": -0.1, "null_high": 0.1, "refused_items": "excluded"}
    gap = pd.DataFrame(
        [{**RUN, "category": "religion", "setting": s, "delta": 0.3114, "p_value": 0.01, **null} for s in "AB"]
    )
    keys = ["model", "model_revision", "scoring", "category", "setting"]
    found = {("m", "main", "{}", "religion", "A"): sampled, ("m", "main", "{}", "religion", "B"): full}
    table = precision_columns(gap, found, keys, "δ")
    head = empathy_headline({"empathy_gap": table}, {})
    assert head["sampling precision (95% CI)"].tolist() == [sampled.text("δ"), full.text("δ")]
    assert head["MDE"].tolist() == pytest.approx([0.056, 0.0])


def test_units_for_a_half_width_invert_the_standard_errors_fall():
    """The size m returned is the first whose half-width, hw(n) * sqrt((1/m - 1/N) / (1/n - 1/N)), is at most eps."""
    from analysis.precision import units_for_half_width

    def half_width(m: int, hw: float, n: int, population: int) -> float:
        return hw * math.sqrt((1 / m - 1 / population) / (1 / n - 1 / population))

    rng = np.random.default_rng(9)
    for _ in range(200):
        population = int(rng.integers(50, 20_000))
        n = int(rng.integers(2, population))
        hw = float(rng.uniform(0.01, 2))
        eps = float(rng.uniform(0.005, 1))
        m = units_for_half_width(hw, n, population, eps)
        assert 2 <= m <= population
        assert half_width(m, hw, n, population) <= eps * (1 + 1e-9)
        if m > 2:  # two units at least: one has no interval
            assert half_width(m - 1, hw, n, population) > eps
    assert units_for_half_width(0.0, 30, 100, 0.1) == 30  # no spread: what was scored suffices
    assert units_for_half_width(0.5, 100, 100, 0.1) == 100  # the whole population: no sampling error
    assert units_for_half_width(math.inf, 30, 100, 0.1) == 100  # no finite interval: the whole population
    assert units_for_half_width(0.01, 30, 100, 5.0) == 2  # a huge EPS: the fewest units with an interval


def test_the_size_for_a_precision_gives_that_precision_in_simulation():
    """A pilot of 60 of 3,000 units sizes the sample for eps; samples of that size, bootstrapped as the analysis
    does, have half-widths around eps (0.083 for 0.08 here): the sizing is honest, not just algebra. The
    tolerance is the pilot's own error: a half-width from 60 units is off by about 1/sqrt(120), 9%."""
    from analysis.precision import units_for_half_width

    rng = np.random.default_rng(10)
    population = rng.gamma(2.0, 1.0, 3000)
    mean = lambda n: lambda s: s[:, 0] / n  # noqa: E731

    pilot = rng.choice(population, 60, replace=False)
    (got,) = cluster_bootstrap(pilot[:, None], mean(60), population=3000, resamples=2000, seed=1)
    eps = 0.08
    m = units_for_half_width(got.half_width, 60, 3000, eps)
    assert 60 < m < 3000
    widths = []
    for k in range(40):
        sample = rng.choice(population, m, replace=False)
        (at_m,) = cluster_bootstrap(sample[:, None], mean(m), population=3000, resamples=1000, seed=k)
        widths.append(at_m.half_width)
    assert np.mean(widths) == pytest.approx(eps, rel=0.25), np.mean(widths)
    assert np.std(widths) / np.mean(widths) < 0.1


def test_units_for_precision_reads_every_table_with_an_interval():
    from analysis.precision import units_for_precision

    frame = religion_frame(40, np.random.default_rng(11))
    found = gap_precision(frame, {("m", "main", "{}"): (400, 0)}, resamples=400)
    gap = pd.DataFrame([{**RUN, "category": "religion", "setting": "P0S0T0", "delta": 0.0}])
    table = precision_columns(gap, {("m", "main", "{}", "religion", "P0S0T0"): next(iter(found.values()))},
                              ["model", "model_revision", "scoring", "category", "setting"], "δ")  # fmt: skip
    rows = units_for_precision({"empathy_gap": table, "other": pd.DataFrame({"x": [1]})}, eps=0.05)
    (row,) = rows.itertuples()
    precision = next(iter(found.values()))
    assert row.table == "empathy_gap" and row.units == 40 and row.population == 400
    assert row.half_width == pytest.approx(precision.half_width)
    from analysis.precision import units_for_half_width

    assert row.needed == units_for_half_width(precision.half_width, 40, 400, 0.05)


@pytest.mark.parametrize("method", ["BCa", "percentile"])
def test_the_interval_is_scipy_s_own_for_a_mean(method: str) -> None:
    """Units' values summed with a count column: the metric is their mean, and the cluster bootstrap's interval (its
    resamples as unit weights, the BCa jackknife's leave-one-out samples too) is `scipy.stats.bootstrap`'s on the
    values themselves, with the same seed."""
    from scipy.stats import bootstrap

    values = np.random.default_rng(11).gamma(1.5, 2.0, 60)
    sums = np.column_stack([values, np.ones_like(values)])
    (got,) = cluster_bootstrap(sums, lambda s: s[..., 0] / s[..., 1], resamples=999, seed=3, method=method)
    want = bootstrap(
        (values,),
        np.mean,
        n_resamples=999,
        batch=500,
        vectorized=True,
        method=method,
        rng=np.random.default_rng(3),
    ).confidence_interval
    assert (got.low, got.high) == pytest.approx((want.low, want.high), rel=1e-12)
    assert got.estimate == pytest.approx(values.mean())


def test_the_default_interval_is_the_bootstrap_s_bias_corrected_normal_one() -> None:
    """A ratio of sums is biased at small n. The default interval is the estimate less the bootstrap's bias (its
    resamples' mean minus the estimate), ± z(0.975) bootstrap SEs: computed here from `scipy.stats.bootstrap`'s own
    resamples of the units, with the same seed."""
    from scipy.stats import bootstrap, norm

    rng = np.random.default_rng(12)
    sums = np.column_stack([rng.gamma(1.5, 2.0, 30), rng.integers(1, 6, 30)]).astype(float)
    ratio = lambda s: s[..., 0] / s[..., 1]  # noqa: E731
    (got,) = cluster_bootstrap(sums, ratio, resamples=999, seed=5)
    dist = bootstrap(
        (np.arange(30),),
        lambda i, axis=-1: ratio(sums[i].sum(axis=-2)),
        n_resamples=999,
        batch=500,
        vectorized=True,
        method="percentile",
        rng=np.random.default_rng(5),
    ).bootstrap_distribution
    estimate = sums[:, 0].sum() / sums[:, 1].sum()
    centre, half = 2 * estimate - dist.mean(), norm.ppf(0.975) * dist.std(ddof=1)
    assert got.estimate == pytest.approx(estimate)
    assert (got.low, got.high) == pytest.approx((centre - half, centre + half), rel=1e-12)
    assert got.se == pytest.approx(dist.std(ddof=1)) and dist.mean() != pytest.approx(estimate, abs=1e-6)
    with pytest.raises(ValueError, match="no interval method 'student'"):
        cluster_bootstrap(sums, ratio, method="student")
