"""δ's sampling precision: the cluster bootstrap over events (`analysis.precision`, docs/DESIGN.md section 9). Pure.

An event (`text_id`) is rated in every cell of a matrix, so the bootstrap resamples events and
recomputes δ as `analysis.empathy.tables` does from the resampled events' cells: M0 the cell
means over answered items, M0 z-scored over the cells with a mean (`a person` included), δ the
same-group minus different-group mean of M over the specified identities.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..columns import RUN_COLUMNS
from ..precision import RESAMPLES, Metric, Precision, Sample, cluster_bootstrap, unit_sums
from .tables import DIFFERENT, SAME, _codes, _matrices, group_keys, relation_matrix

#: the unit a sample of an empathy config draws (`promptgen.empathy.spec`'s `SampleUnit`)
UNIT = "event"


def delta_metric(same: np.ndarray, different: np.ndarray) -> Metric:
    """Summed cells (B x 2·cells: intensity totals, then answered counts) -> δ per resample (B,).

    `same` and `different` are the flattened matrix's masks; the z-scoring is over every cell
    with a mean (population σ), as `tables.zscore_matrix` does, and a resample whose M0 has no
    spread gets NaN.
    """
    cells = same.size

    def metric(summed: np.ndarray) -> np.ndarray:
        total, count = summed[:, :cells], summed[:, cells:]
        with np.errstate(invalid="ignore", divide="ignore"):
            m0 = np.where(count > 0, total / count, np.nan)
            finite = np.isfinite(m0)
            k = finite.sum(axis=1)
            mean = np.nansum(m0, axis=1) / k
            sd = np.sqrt(np.nansum((m0 - mean[:, None]) ** 2, axis=1) / k)
            m = (m0 - mean[:, None]) / np.where(sd > 0, sd, np.nan)[:, None]
            a, b = finite & same, finite & different
            delta = np.where(a, m, 0).sum(1) / a.sum(1) - np.where(b, m, 0).sum(1) / b.sum(1)
        return np.where((k >= 2) & (sd > 0), delta, np.nan)

    return metric


def gap_precision(
    frame: pd.DataFrame,
    samples: dict[tuple[str, ...], Sample],
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
    identity_table: pd.DataFrame | None = None,
) -> dict[tuple, Precision]:
    """Per matrix (its `group_keys` values), δ with its bootstrap interval over the matrix's events.

    `frame` is `tables.intensity_frame`'s rows (refused items NaN, or kept); `samples` maps a run to
    its population and seed (`analysis.precision.run_samples`).
    """
    keys = group_keys(frame)
    out: dict[tuple, Precision] = {}
    for key, g, category, ids in _matrices(frame, keys, identity_table):
        n = len(ids)
        cell = _codes(g["perceiver"], ids, "perceivers") * n + _codes(g["experiencer"], ids, "experiencers")
        units, _ = pd.factorize(g["text_id"])
        total, count = unit_sums(units, cell, n * n, g["intensity"].to_numpy(dtype=float))
        rel = relation_matrix(ids, category).ravel()
        run = tuple(str(v) for k, v in zip(keys, key, strict=True) if k in RUN_COLUMNS)
        population, sample_seed = samples.get(run, (None, None))
        (out[key],) = cluster_bootstrap(
            np.hstack([total, count]),
            delta_metric(rel == SAME, rel == DIFFERENT),
            population=population,
            unit=UNIT,
            sample_seed=sample_seed,
            resamples=resamples,
            seed=seed,
        )
    return out
