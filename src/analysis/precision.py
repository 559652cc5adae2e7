"""A headline metric's sampling precision: a cluster bootstrap over the sampled units (docs/DESIGN.md section 9). Pure.

A sample draws units (empathy: events; attribution: templates), not rows, and a metric is a
function of its cells' sums over those units (M0's cell means and the z-scored matrix for δ; the
mean d of an identity's items). So the bootstrap resamples units with replacement and recomputes
the metric from the resampled units' cell sums, the structure the metric needs (every cell of an
event, every identity of a template) kept whole. A resample is a weight per unit (how often it was
drawn), so B resamples of n units are one (B x n) @ (n x cells) product: `scipy.stats.bootstrap`
draws the indices, `_weights` turns them into counts.

The interval is the bias-corrected normal interval of the bootstrap (`METHOD = "bc-normal"`;
`scipy.stats.bootstrap` draws 2,000 resamples by default): the estimate less the bootstrap's bias
(the resamples' mean minus the estimate), plus or minus z(0.975) bootstrap standard errors. δ is a
difference of z-scored cells: with few events the cell means are noisier, their spread larger, and
δ shrinks toward 0 (at 150 events, by 0.077 on average for the largest simulated gap, an interval's
half-width being 0.27). scipy's BCa interval corrects only part of that: it held the full-set δ in
88% of such samples, and 92.8% of all 1,400 150-event intervals of `benchmarks/sample_coverage.py`.
Subtracting the bootstrap's own estimate of the bias brings that to about 94% with the same
resamples (`benchmarks/results/sample_coverage.json`). A metric that is a mean (attribution d) has
no bias, and the interval is the usual mean ± 1.96 SE. `METHOD` may also name one of scipy's own
intervals ("BCa", "percentile", "basic"), as the benchmark's `--method` does to compare them.
Resamples without a value (a resample leaving a cell empty) are left out of the bias and SE.
A sample of n of N units is drawn without replacement, so its estimate varies less than the
bootstrap's (which treats the units as drawn from an infinite population) by the finite
population correction sqrt(1 - n/N): the standard error and the interval's deviations from the
estimate are scaled by it, and the bias, which falls as 1/n - 1/N, by 1 - n/N. A full run
(n == N) has no sampling error at all: no interval.
`benchmarks/sample_coverage.py` checks the coverage of the result on the release's real events.

The minimum detectable effect is 2.8 x the standard error: the true difference a two-sided 5%
test detects with 80% power at this size (1.96 + 0.84).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import DegenerateDataWarning, bootstrap, norm

from .columns import RUN_COLUMNS, SAMPLE_POPULATION_COLUMN, SAMPLE_SEED_COLUMN

#: resamples of every interval (DESIGN 9: 2,000 or more)
RESAMPLES = 2000
#: the interval: "bc-normal" (the estimate less the bootstrap's bias, ± z SE), or one of `scipy.stats.bootstrap`'s
METHOD = "bc-normal"
#: every interval `METHOD` may name
METHODS = ("bc-normal", "BCa", "percentile", "basic")
CONFIDENCE = 0.95
#: minimum detectable effect per standard error: z(0.975) + z(0.80)
MDE_PER_SE = 2.8
#: resamples computed at once: (BATCH x n) weights in memory
BATCH = 500

#: a headline's columns for a table's precision columns
PRECISION_HEADINGS = {"precision": "sampling precision (95% CI)", "sample_mde": "MDE"}

#: per resample, its units' summed cells (B x cells) -> the metric (B,) or (metrics x B)
Metric = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Precision:
    """One metric's estimate and its sampling interval over `n` of `population` units (None: unknown)."""

    estimate: float
    low: float
    high: float
    se: float
    n: int
    population: int | None
    unit: str = "unit"
    seed: int | None = None

    @property
    def full(self) -> bool:
        """Every unit of the population scored: the value has no sampling error."""
        return self.population is not None and self.n >= self.population

    @property
    def mde(self) -> float:
        """The minimum detectable effect at this size (2.8 standard errors)."""
        return MDE_PER_SE * self.se

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def sample_text(self) -> str:
        """What was scored: "600 of 6,050 events, seed 0", "all 6,050 events", "600 events"."""
        plural = f"{self.unit}s"
        if self.full:
            return f"all {self.population:,} {plural}"
        of = f" of {self.population:,}" if self.population is not None else ""
        seed = f", seed {self.seed}" if self.seed is not None else ""
        return f"{self.n:,}{of} {plural}{seed}"

    def text(self, name: str, digits: int = 2) -> str:
        """ "δ = 0.31 (95% CI 0.27-0.35; 600 of 6,050 events, seed 0)", or "δ = 0.31 (all 6,050 events)"."""
        value = f"{name} = {_num(self.estimate, digits)}"
        if self.full or not math.isfinite(self.low):
            return f"{value} ({self.sample_text()})"
        low, high = _num(self.low, digits), _num(self.high, digits)
        between = f"{low} to {high}" if self.low < 0 else f"{low}-{high}"
        return f"{value} ({CONFIDENCE:.0%} CI {between}; {self.sample_text()})"

    def as_row(self) -> dict[str, object]:
        """The columns a table carries (`sample_`: the papers' own tests have a `ci_low` of their own): the
        interval, standard error and minimum detectable effect (NaN interval for a full run), the sample."""
        return {
            "sample_ci_low": self.low,
            "sample_ci_high": self.high,
            "sample_se": self.se,
            "sample_mde": self.mde,
            "sample_units": self.n,
            "sample_population": self.population if self.population is not None else np.nan,
            "sample_seed": self.seed if self.seed is not None else np.nan,
        }


def _num(x: float, digits: int) -> str:
    return "nan" if not math.isfinite(x) else f"{x:.{digits}f}"


def unit_sums(units: np.ndarray, cells: np.ndarray, n_cells: int, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per unit and cell, the sum of the finite `values` and their count: (n_units x n_cells) each.

    `units` and `cells` are integer codes per row (0..n_units-1, 0..n_cells-1); a row whose value
    is NaN (a refused item) counts in neither, as the metrics leave it out of every mean.
    """
    n_units = int(units.max()) + 1 if len(units) else 0
    ok = np.isfinite(values)
    flat = units[ok] * n_cells + cells[ok]
    size = n_units * n_cells
    total = np.bincount(flat, weights=values[ok], minlength=size).reshape(n_units, n_cells)
    count = np.bincount(flat, minlength=size).astype(float).reshape(n_units, n_cells)
    return total, count


def _weights(idx: np.ndarray, n: int) -> np.ndarray:
    """Resampled unit indices (batch x n) -> how often each unit was drawn (batch x n)."""
    rows = np.repeat(np.arange(len(idx)), idx.shape[1])
    return np.bincount(rows * n + idx.ravel(), minlength=len(idx) * n).reshape(len(idx), n).astype(float)


def fpc(n: int, population: int | None) -> float:
    """sqrt(1 - n/N): how much less a without-replacement sample's estimate varies (1: N unknown)."""
    if population is None:
        return 1.0
    return math.sqrt(max(0.0, 1.0 - n / population))


def cluster_bootstrap(
    sums: np.ndarray,
    metric: Metric,
    *,
    population: int | None = None,
    unit: str = "unit",
    sample_seed: int | None = None,
    resamples: int = RESAMPLES,
    seed: int = 0,
    confidence: float = CONFIDENCE,
    method: str | None = None,
) -> list[Precision]:
    """The precision of each metric `metric` computes from the units' cell sums (n_units x cells).

    `metric` takes summed cells (B x cells) and returns (B,) for one metric or (k x B) for k; the
    estimate is the metric of every unit's sum. The interval is the bootstrap's (`method`, else `METHOD`) over
    units, its deviations from the estimate and the standard error scaled by `fpc` (the bias by its square).
    """
    method = method or METHOD
    sums = np.asarray(sums, dtype=float)
    n = len(sums)
    estimate = np.atleast_1d(np.asarray(metric(sums.sum(axis=0)[None, :]), dtype=float).reshape(-1))
    nan = np.full(len(estimate), np.nan)
    scale = fpc(n, population)

    def made(low: np.ndarray, high: np.ndarray, se: np.ndarray) -> list[Precision]:
        return [
            Precision(float(e), float(lo), float(hi), float(s), n, population, unit, sample_seed)
            for e, lo, hi, s in zip(estimate, low, high, se, strict=True)
        ]

    if population is not None and n >= population:
        return made(nan, nan, np.zeros(len(estimate)))
    if n < 2:
        return made(nan, nan, nan)

    def statistic(idx: np.ndarray, axis: int = -1) -> np.ndarray:
        idx = np.moveaxis(np.asarray(idx), axis, -1)
        lead = idx.shape[:-1]  # a resample has n indices; the BCa jackknife's leave-one-out samples n - 1
        out = np.asarray(metric(_weights(idx.reshape(-1, idx.shape[-1]), n) @ sums), dtype=float)
        return out.reshape((*out.shape[:-1], *lead))

    own = method == "bc-normal"
    if method not in METHODS:
        raise ValueError(f"no interval method {method!r}: one of {', '.join(METHODS)}")
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateDataWarning)  # a NaN interval, replaced below
        res = bootstrap(
            (np.arange(n),),
            statistic,
            n_resamples=resamples,
            batch=BATCH,
            vectorized=True,
            method="percentile" if own else method,  # the percentile interval needs no jackknife: the cheapest
            confidence_level=confidence,
            rng=np.random.default_rng(seed),
        )
    dist = np.asarray(res.bootstrap_distribution, dtype=float).reshape(len(estimate), -1)
    se = np.nanstd(dist, axis=1, ddof=1)
    if own:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a metric no resample has a value for: NaN
            bias = np.nanmean(dist, axis=1) - estimate
        centre, half = estimate - bias * scale**2, norm.ppf(0.5 + confidence / 2) * se * scale
        return made(centre - half, centre + half, se * scale)
    tail = (1 - confidence) / 2
    # NaN resamples (a resample leaving a cell empty) are left out, not allowed to blank the interval: where the
    # method's interval is NaN, the percentile interval of the resamples that have a value
    low, high = np.nanquantile(dist, [tail, 1 - tail], axis=1)
    given_low = np.atleast_1d(np.asarray(res.confidence_interval.low, dtype=float)).reshape(-1)
    given_high = np.atleast_1d(np.asarray(res.confidence_interval.high, dtype=float)).reshape(-1)
    ok = np.isfinite(given_low) & np.isfinite(given_high)
    low, high = np.where(ok, given_low, low), np.where(ok, given_high, high)
    return made(estimate - (estimate - low) * scale, estimate + (high - estimate) * scale, se * scale)


def precision_columns(table: pd.DataFrame, found: dict[tuple, Precision], keys: list[str], name: str) -> pd.DataFrame:
    """`table` with each row's precision (looked up by its `keys` values) as columns, and the headline text.

    A row without one gets NaN columns and an empty text.
    """
    empty = Precision(np.nan, np.nan, np.nan, np.nan, 0, None)
    rows = []
    for key in zip(*(table[k] for k in keys), strict=True):
        got = found.get(tuple(key))
        row = (got or empty).as_row()
        row["precision"] = got.text(name) if got is not None else ""
        if got is None:
            row["sample_units"] = np.nan
        rows.append(row)
    extra = pd.DataFrame(rows, index=table.index, columns=[*empty.as_row(), "precision"])
    return pd.concat([table, extra], axis=1)


#: one run's sample: (population N or None, the sample's seed or None)
Sample = tuple[int | None, int | None]


def run_samples(joined: pd.DataFrame) -> dict[tuple[str, ...], Sample]:
    """Per run (its `RUN_COLUMNS` values), its sample's population and seed from the columns `collect` adds.

    A frame without them (rows made by hand, a probe without a sample unit) gives no entry: the
    interval is then computed without a population (no correction, no "of N").
    """
    if SAMPLE_POPULATION_COLUMN not in joined.columns:
        return {}
    seeds = joined[SAMPLE_SEED_COLUMN] if SAMPLE_SEED_COLUMN in joined.columns else pd.Series(np.nan, joined.index)
    first = joined.assign(_seed=seeds).groupby(list(RUN_COLUMNS), sort=False, dropna=False).first()
    return {
        tuple(map(str, key)): (_int(row[SAMPLE_POPULATION_COLUMN]), _int(row["_seed"])) for key, row in first.iterrows()
    }


def _int(value: object) -> int | None:
    return None if value is None or pd.isna(value) else int(value)  # type: ignore[call-overload]


def units_for_half_width(half_width: float, n: int, population: int | None, eps: float) -> int:
    """The fewest units whose interval's half-width is at most `eps`, from one measured at `n` of `population`.

    The half-width of a mean over n units falls as sqrt((1 - n/N) / n) (the standard error with the
    finite population correction), so hw(m)^2 = hw(n)^2 * n / (1 - n/N) * (1/m - 1/N); solved for m.
    A full population has no sampling error: N (or n when N is unknown) is the most ever needed.
    """
    if math.isnan(half_width) or half_width <= 0:
        return n  # no spread measured: what was scored is as precise as it gets
    if math.isinf(half_width):
        return population or n  # no finite interval at n: only the whole population is sure to do
    share = 1.0 - n / population if population else 1.0
    if share <= 0:
        return population or n
    spread = half_width**2 * n / share  # hw(m)^2 = spread * (1/m - 1/N)
    inverse = eps**2 / spread + (1.0 / population if population else 0.0)
    needed = max(2, math.ceil(1.0 / inverse - 1e-9))  # one unit has no interval at all
    return min(needed, population) if population else needed


def units_for_precision(tables: Mapping[str, pd.DataFrame], eps: float) -> pd.DataFrame:
    """Every headline number with a sampling interval (a table's `sample_ci_low`/`sample_ci_high` rows, as
    `precision_columns` writes them) and the units its half-width needs to be at most `eps`, widest first.

    Columns: table, the row's number as its text (`precision`), half_width, units, population, needed.
    """
    rows = []
    for name, table in tables.items():
        if not {"sample_ci_low", "sample_ci_high", "sample_units"} <= set(table.columns):
            continue
        for _, row in table.iterrows():
            low, high = row["sample_ci_low"], row["sample_ci_high"]
            if pd.isna(low) or pd.isna(high) or pd.isna(row["sample_units"]):
                continue
            population = _int(row.get("sample_population"))
            half = (float(high) - float(low)) / 2
            n = int(row["sample_units"])
            rows.append(
                {
                    "table": name,
                    "precision": row.get("precision", ""),
                    "half_width": half,
                    "units": n,
                    "population": population,
                    "needed": units_for_half_width(half, n, population, eps),
                }
            )
    columns = ["table", "precision", "half_width", "units", "population", "needed"]
    return pd.DataFrame(rows, columns=columns).sort_values("needed", ascending=False, kind="stable")
