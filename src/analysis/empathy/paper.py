"""The intergroup-empathy paper's Tables 2, 3, 6, 7 and heatmap masks, by the authors' notebook rules.

`analysis.empathy.tables` is the project's reading of the paper's text (item-level exclusion, one
z-scoring with `a person`, a permutation p-value, Bonferroni per reference). The numbers the
paper prints come from the authors' analysis notebook
(`analysis/analysis_after_processing.ipynb` of houyu0930/intergroup-empathy-bias at cdfd1a6,
pinned under tests/reference), whose rules differ; this module computes those, so the paper's
tables can be reproduced beside the project's own (docs/DESIGN.md section 4, "Metrics, the
paper's tables"). Each rule names the notebook function it follows:

- exclusion (`get_excluded_id_set`, `get_excluded_id_set_no_default`): an event (`text_id`)
  refused in ANY cell of the matrix considered is dropped from EVERY cell of it; the full
  matrix (with `a person`) for μ ± σ, min/max, the refusal share and the heatmaps, the
  specified identities only for δ;
- M0 (`draw_heatmap`, `get_filtered_matrix`): a cell's mean intensity over the kept events,
  rounded to 2 decimals with Python's `round`; μ and σ are `np.mean` / `np.std` (population) of
  the rounded M0 and M = (M0 - μ) / σ;
- δ (`get_delta`, `check_in_group`): mean of M over same-group cells minus mean over the other
  cells, on the specified matrix z-scored on its own; same group = same race block for race,
  the same identity for nationality and religion;
- interval (`get_interval`, `permute_matrix`): δ of 10,000 matrices with rows and columns
  permuted independently, the 2.5th and 97.5th percentiles (`np.percentile`);
- refusal share, Table 6 (`get_excluded_id_set`): excluded events / events per cell;
- heatmap mask (`get_mask_cells`): an off-diagonal cell without `a person` is shown only where
  the paired t-tests (`scipy.stats.ttest_rel`, over the kept events) of I(p, p) against I(p, e)
  and of I(e, e) against I(p, e) both have p < 0.05 / (n + 1)², n + 1 identities with `a person`;
  a NaN p (identical lists) hides the cell; diagonal and `a person` cells are always shown.

Where the notebook would stop (its files hold every event of every cell and it divides by
zero otherwise) these functions return NaN with the reason in `note`: an event missing from a
cell (a partial run) is left out of that cell's mean and of the t-tests that need it, and a cell
with no kept event has no mean. The input is `analysis.empathy.tables.intensity_frame`'s: refused
items have `intensity` NaN (the notebook's -1) or `refused` True.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from . import tables as emp

#: the notebook's `matrix` kinds: with `a person` (exclusion over all cells) and without it
FULL, SPECIFIED = "full", "specified"
#: `get_mask_cells`' family-wise level, divided by the number of cells of the full matrix
MASK_ALPHA = 0.05
#: `get_interval`'s percentiles
INTERVAL = (2.5, 97.5)


@dataclass(frozen=True)
class EventArrays:
    """One matrix's items as (perceiver, experiencer, event) arrays, events along the last axis."""

    value: np.ndarray  # intensity, NaN where refused or absent
    refused: np.ndarray  # bool: the item exists and was refused
    present: np.ndarray  # bool: the item exists
    events: np.ndarray  # the text_id of each position on the last axis


def event_arrays(g: pd.DataFrame, ids: pd.DataFrame) -> EventArrays:
    """One matrix's rows -> `EventArrays` over its identities `ids` (in their order).

    Refused is the runner's `refused` flag or a missing intensity: the notebook's -1 is an
    answer without a number, which `intensity_frame` turns into NaN.
    """
    n = len(ids)
    index = pd.Index(ids["identity"])
    p = index.get_indexer(g["perceiver"])
    e = index.get_indexer(g["experiencer"])
    if (p < 0).any() or (e < 0).any():
        unknown = sorted({*map(str, g["perceiver"][p < 0]), *map(str, g["experiencer"][e < 0])})
        raise ValueError(f"identities {unknown} are not in this category's identity table")
    t, events = pd.factorize(g["text_id"], sort=True)
    size = n * n * len(events)
    flat = (p * n + e) * len(events) + t
    if len(flat) and np.bincount(flat, minlength=size).max() > 1:
        raise ValueError("a (perceiver, experiencer, text_id) occurs twice in one matrix")
    intensity = g["intensity"].to_numpy(dtype=float)
    refused_rows = ~np.isfinite(intensity)
    if "refused" in g.columns:
        refused_rows |= g["refused"].fillna(False).to_numpy(dtype=bool)
    value, refused, present = np.full(size, np.nan), np.zeros(size, bool), np.zeros(size, bool)
    value[flat] = np.where(refused_rows, np.nan, intensity)
    refused[flat] = refused_rows
    present[flat] = True
    shape = (n, n, len(events))
    return EventArrays(value.reshape(shape), refused.reshape(shape), present.reshape(shape), np.asarray(events))


def excluded_events(arrays: EventArrays, keep: np.ndarray) -> np.ndarray:
    """Events refused in any cell of the submatrix `keep` x `keep` (`get_excluded_id_set`): a
    boolean over the event axis. `keep` selects identities (all of them: the full matrix)."""
    return arrays.refused[np.ix_(keep, keep)].any(axis=(0, 1))


def rounded_means(arrays: EventArrays, keep: np.ndarray, excluded: np.ndarray) -> np.ndarray:
    """M0 of the submatrix `keep` x `keep`: each cell's mean over its kept events, rounded as
    the notebook rounds it, `round(sum(list) / len(list), 2)` (Python's `round`, exact for the
    double it is given: numpy's `round` multiplies by 100 first and can differ at a tie)."""
    sub = arrays.value[np.ix_(keep, keep)][:, :, ~excluded]
    answered = np.isfinite(sub)
    count = answered.sum(axis=-1)
    total = np.where(answered, sub, 0.0).sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return np.array([round(float(v), 2) if np.isfinite(v) else np.nan for v in mean.ravel()]).reshape(mean.shape)


def zscore(m0: np.ndarray) -> tuple[np.ndarray, float, float, str]:
    """(M, μ, σ, note): M = (M0 - μ) / σ with μ, σ = `np.mean`, `np.std` of M0 (the notebook's
    lines), over the cells with a mean; M is NaN with a note when σ is 0 or undefined."""
    finite = m0[np.isfinite(m0)]
    if finite.size == 0:
        return np.full_like(m0, np.nan), np.nan, np.nan, "no cell with a kept event"
    mean = float(np.mean(m0)) if finite.size == m0.size else float(np.mean(finite))
    std = float(np.std(m0)) if finite.size == m0.size else float(np.std(finite))
    note = "" if finite.size == m0.size else f"{m0.size - finite.size} cells without a kept event"
    if std == 0.0:
        return np.full_like(m0, np.nan), mean, std, "M0 is constant: M undefined"
    return (m0 - mean) / std, mean, std, note


def permutations(n: int, n_permutations: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The row and column orders of the null samples (`permute_matrix` draws them with
    `random.shuffle`, here a seeded numpy Generator: same seed, same interval)."""
    return emp.draw_permutations(n, n_permutations, np.random.default_rng(seed))


def null_deltas(m: np.ndarray, same: np.ndarray, *, n_permutations: int = 10_000, seed: int = 0) -> np.ndarray:
    """δ of every permuted matrix (`get_interval`'s list), vectorised: `permute_matrix` puts
    M[row[r], col[c]] at (r, c), and `emp.permuted_deltas` gathers exactly that."""
    rows, cols = permutations(len(m), n_permutations, seed)
    return emp.permuted_deltas(m, same, rows, cols)


def _matrices(frame: pd.DataFrame, identity_table: pd.DataFrame | None) -> Iterator[tuple[dict, str, pd.DataFrame]]:
    """(group key as a dict, category, rows) per matrix, in order of appearance."""
    keys = emp.group_keys(frame)
    if frame.empty or "category" not in keys:
        return
    for key, g in frame.groupby(keys, sort=False, dropna=False):
        key = dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True))
        yield key, str(key["category"]), g


def _specified(ids: pd.DataFrame) -> np.ndarray:
    return ~ids["unspecified"].to_numpy(dtype=bool)


def _same(ids: pd.DataFrame, category: str, keep: np.ndarray) -> np.ndarray:
    """`check_in_group` over the kept identities: same race block, else the same identity."""
    return emp.relation_matrix(ids[keep].reset_index(drop=True), category) == emp.SAME


# ----------------------------------------------------------------------------- Tables 2 and 3: δ


def paper_gap(
    frame: pd.DataFrame,
    identity_table: pd.DataFrame | None = None,
    *,
    n_permutations: int = 10_000,
    seed: int = 0,
) -> pd.DataFrame:
    """Per matrix: δ on the specified identities and its permutation interval, as the notebook's
    last cells compute them (`get_excluded_id_set_no_default`, `get_filtered_matrix`, `get_delta`,
    `get_interval`). Every matrix draws from a generator seeded with `seed`."""
    keys = emp.group_keys(frame)
    rows = []
    for key, category, g in _matrices(frame, identity_table):
        ids = emp.category_identities(identity_table, category)
        keep = _specified(ids)
        arrays = event_arrays(g, ids)
        m, _, _, note = zscore(rounded_means(arrays, keep, excluded_events(arrays, keep)))
        same = _same(ids, category, keep)
        delta, low, high, n_done = emp.gap_delta(m, same), np.nan, np.nan, 0
        if np.isfinite(delta):
            null = null_deltas(m, same, n_permutations=n_permutations, seed=seed)
            null = null[np.isfinite(null)]
            if null.size:
                low, high = (float(v) for v in np.percentile(null, INTERVAL))
                n_done = int(null.size)
        elif not note:
            note = "no same-group or no different-group cell with a value"
        rows.append(
            {
                **key,
                "delta": delta,
                "ci_low": low,
                "ci_high": high,
                "n_permutations": n_done,
                "seed": seed,
                "note": note,
            }
        )
    columns = [*keys, "delta", "ci_low", "ci_high", "n_permutations", "seed", "note"]
    return pd.DataFrame(rows, columns=columns)


# ----------------------------------------------------------------------------- Tables 6 and 7: μ ± σ, min/max, refusals


def paper_matrix(frame: pd.DataFrame, identity_table: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per matrix and kind (`full`: with `a person`, as `draw_heatmap` and Table 6 use it;
    `specified`: without, as `get_filtered_matrix` uses it for δ): μ and σ of the rounded M0,
    min and max of M, and the excluded events over the events (`refusal_rate`)."""
    keys = emp.group_keys(frame)
    rows = []
    for key, category, g in _matrices(frame, identity_table):
        ids = emp.category_identities(identity_table, category)
        arrays = event_arrays(g, ids)
        for kind, keep in ((FULL, np.ones(len(ids), bool)), (SPECIFIED, _specified(ids))):
            excluded = excluded_events(arrays, keep)
            events = int(arrays.present[np.ix_(keep, keep)].any(axis=(0, 1)).sum())
            m, mean, std, note = zscore(rounded_means(arrays, keep, excluded))
            has = np.isfinite(m)
            rows.append(
                {
                    **key,
                    "matrix": kind,
                    "mean": mean,
                    "std": std,
                    "min": float(m[has].min()) if has.any() else np.nan,
                    "max": float(m[has].max()) if has.any() else np.nan,
                    "excluded_events": int(excluded.sum()),
                    "events": events,
                    "refusal_rate": excluded.sum() / events if events else np.nan,
                    "note": note,
                }
            )
    columns = [*keys, "matrix", "mean", "std", "min", "max", "excluded_events", "events", "refusal_rate", "note"]
    return pd.DataFrame(rows, columns=columns)


# ----------------------------------------------------------------------------- the heatmaps' mask


def mask_pvalues(arrays: EventArrays, excluded: np.ndarray, specified: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`get_mask_cells`' two p-value matrices over the full matrix: I(p, p) vs I(p, e) and
    I(e, e) vs I(p, e), paired over the kept events; 0 on the diagonal and in `a person`'s row
    and column (the notebook leaves them at `np.zeros`' 0). An event missing from either cell
    of a pair is left out of that test (the notebook's complete files never miss one)."""
    x = arrays.value[:, :, ~excluded]
    n = x.shape[0]
    diag = x[np.arange(n), np.arange(n)]
    tested = specified[:, None] & specified[None, :] & ~np.eye(n, dtype=bool)
    policy = "omit" if not np.isfinite(x[tested]).all() else "propagate"
    out = []
    for reference in (diag[:, None, :], diag[None, :, :]):  # the perceiver's, then the experiencer's
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)  # identical lists: NaN, as the notebook gets
            p = stats.ttest_rel(np.broadcast_to(reference, x.shape), x, axis=-1, nan_policy=policy).pvalue
        out.append(np.where(tested, np.asarray(p, dtype=float), 0.0))
    return out[0], out[1]


def paper_mask(frame: pd.DataFrame, identity_table: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per matrix and cell of the full matrix (`a person` first, the notebook's order): M0, M
    (z-scored with `a person`, as `draw_heatmap` colours it), the two `get_mask_cells` p-values
    and `shown` (the notebook's `mask` negated: both p < 0.05 / (n + 1)²)."""
    keys = emp.group_keys(frame)
    out = []
    for key, category, g in _matrices(frame, identity_table):
        ids = emp.category_identities(identity_table, category)
        arrays = event_arrays(g, ids)
        n = len(ids)
        excluded = excluded_events(arrays, np.ones(n, bool))
        m0 = rounded_means(arrays, np.ones(n, bool), excluded)
        m, _, _, note = zscore(m0)
        p_perceiver, p_experiencer = mask_pvalues(arrays, excluded, _specified(ids))
        threshold = MASK_ALPHA / n**2
        shown = (p_perceiver < threshold) & (p_experiencer < threshold)
        names, order = ids["identity"].to_numpy(), ids["order"].to_numpy()
        cells = pd.DataFrame(
            {
                **{k: [v] * (n * n) for k, v in key.items()},
                "perceiver": np.repeat(names, n),
                "experiencer": np.tile(names, n),
                "perceiver_order": np.repeat(order, n),
                "experiencer_order": np.tile(order, n),
                "m0": m0.ravel(),
                "m": m.ravel(),
                "p_perceiver": p_perceiver.ravel(),
                "p_experiencer": p_experiencer.ravel(),
                "threshold": threshold,
                "shown": shown.ravel(),
                "note": note,
            }
        )
        out.append(cells)
    columns = [*keys, "perceiver", "experiencer", "perceiver_order", "experiencer_order", "m0", "m"]
    columns += ["p_perceiver", "p_experiencer", "threshold", "shown", "note"]
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=columns)
