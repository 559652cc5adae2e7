"""Mean d's sampling precision: the cluster bootstrap over templates (`analysis.precision`, docs/DESIGN.md section 9).

A sample of a designed attribution config draws templates (domain x scenario x outcome) and
keeps every identity, gender, name and option order of each, so one template's items sit in many
groups of the single-actor table. The bootstrap resamples templates and recomputes every group's
mean d (its items' sum over its items' count, rotations collapsed as the tables do) from the
resampled templates' sums; the actor-actor Δd the same way, over the paired items' templates. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from ..columns import RUN_COLUMNS
from ..precision import RESAMPLES, Metric, Precision, Sample, cluster_bootstrap, precision_columns, unit_sums
from .tables import REFUSED_ITEMS, _variants

#: the unit a sample of a designed config draws (`promptgen.attribution.spec`'s first `SampleUnit`)
UNIT, UNIT_COLUMN = "template", "template_id"


def group_means(groups: int) -> Metric:
    """Summed cells (B x 2·groups: d totals, then item counts) -> each group's mean d (groups x B)."""

    def metric(summed: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return (summed[:, :groups] / summed[:, groups:]).T

    return metric


def mean_precision(
    frames: Mapping[str, pd.DataFrame],
    samples: dict[tuple[str, ...], Sample],
    by: Sequence[str],
    value: str,
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> dict[tuple, Precision]:
    """Per run, refusal variant and group of `by`: the mean of `value` with its bootstrap interval over templates.

    `frames` holds one frame per refusal variant (`tables._variants`: rotations collapsed), its items' `value`
    per row; keys are (*RUN_COLUMNS, refused_items, *by), as the one-sample tables' rows. Empty without a
    `template_id` column (nothing to resample). A row without a finite value counts in no mean, as in the tables.
    """
    if any(UNIT_COLUMN not in frame.columns for frame in frames.values()):
        return {}
    out: dict[tuple, Precision] = {}
    for variant, frame in frames.items():
        for run, rows in frame.groupby(list(RUN_COLUMNS), sort=False, dropna=False):
            groups, labels = pd.factorize(pd.MultiIndex.from_frame(rows[list(by)]))
            units, _ = pd.factorize(rows[UNIT_COLUMN])
            total, count = unit_sums(units, groups, len(labels), rows[value].to_numpy(dtype=float))
            population, sample_seed = samples.get(tuple(map(str, run)), (None, None))
            found = cluster_bootstrap(
                np.hstack([total, count]),
                group_means(len(labels)),
                population=population,
                unit=UNIT,
                sample_seed=sample_seed,
                resamples=resamples,
                seed=seed,
            )
            # a group whose items all come from one template has nothing to resample: no interval
            spread = (count > 0).sum(axis=0) >= 2
            for label, precision, ok in zip(labels, found, spread, strict=True):
                out[(*run, variant, *label)] = (
                    precision if ok else replace(precision, low=np.nan, high=np.nan, se=np.nan)
                )
    return out


def mean_d_precision(
    items: pd.DataFrame,
    samples: dict[tuple[str, ...], Sample],
    by: Sequence[str],
    *,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> dict[tuple, Precision]:
    """Mean d per run, refusal variant and group of `by` with its interval (`mean_precision`); `items` is
    `tables.compute_items` of one config."""
    return mean_precision(_variants(items), samples, by, "d", resamples=resamples, seed=seed)


def with_precision(
    table: pd.DataFrame, items: pd.DataFrame, samples: dict[tuple[str, ...], Sample], by: Sequence[str], seed: int
) -> pd.DataFrame:
    """A one-sample table of mean d per `by` (`tables.single_actor_table`) with each row's sampling precision."""
    found = mean_d_precision(items, samples, by, seed=seed)
    return precision_columns(table, found, [*RUN_COLUMNS, REFUSED_ITEMS, *by], "d")


def delta_with_precision(
    table: pd.DataFrame,
    frames: Mapping[str, pd.DataFrame],
    samples: dict[tuple[str, ...], Sample],
    by: Sequence[str],
    seed: int,
) -> pd.DataFrame:
    """The actor-actor Δd table (`tables.actor_actor_delta_table`) with each row's sampling precision over the
    templates of the paired items (`frames`: `tables.actor_actor_delta_frames`). A template's single-actor
    matches move with it: the same templates are drawn in every config of the probe (one seeded order)."""
    found = mean_precision(frames, samples, by, "delta_d", seed=seed)
    return precision_columns(table, found, [*RUN_COLUMNS, REFUSED_ITEMS, *by], "Δd")
