"""Intergroup empathy gap (docs/DESIGN.md section 4): scored items -> M0, M, the gap δ and its tests.

Every step is a pure function from frames to tidy frames, so a report can show any step and
a test can check any step against an independent computation::

    intensity_frame(joined, score=...)   one row per item: group keys, perceiver, experiencer, text_id, intensity
    compute_cells(frame)                 one row per matrix cell: M0, M, same/different/unspecified, counts
    compute_gap(cells, seed=...)         one row per matrix: δ, 95% null interval, p (structured permutation test)
    cell_tests(frame)                    one row per cell and reference: paired t-test, Bonferroni-corrected
    matrix_summary(cells)                μ ± σ and min/max of M0 and M per matrix
    refusal_rates(frame)                 refusal rate per category and setting

A matrix is one (model, model_revision, scoring, category, setting); the run columns are
group keys where the frame has them.

The unspecified identity (`a person`) is a row and a column of M0 and M (first, as the
heatmaps show it) and takes part in the z-scoring of M, but it is in neither the same-group
nor the different-group set: δ and the permutation test use the specified identities only,
and the permutations shuffle those rows and columns only (under the null hypothesis the
specified identities' labels are exchangeable; `a person` is another kind of label).

Statistics that cannot be computed (no answered items, a constant matrix, a cell that is its
own reference) are NaN with the reason in `note`; an empty `note` means the row is fine.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from promptgen.empathy.prompts import identity_rows

from ..columns import NUMBER_SCORES, RUN_COLUMNS, NumberScore
from ..refusals import refusal_mask
from ..stats import bonferroni, paired_t

Score = NumberScore
SCORES = NUMBER_SCORES
#: keys that split the items into matrices, in this order, where the frame has them: the run
#: (model, revision, scoring settings: two scorings of one model are two analyses), then the design
GROUP_KEYS: tuple[str, ...] = (*RUN_COLUMNS, "category", "setting")
#: categories whose in-group is a block of identities (race: White, Black, Asian, Hispanic);
#: in the others (nationality, religion) an identity is its own group (docs/DESIGN.md section 4).
SAME_BY_GROUP: frozenset[str] = frozenset({"race"})
REFERENCES: tuple[str, ...] = ("perceiver", "experiencer")

SAME, DIFFERENT, UNSPECIFIED = "same", "different", "unspecified"


def group_keys(frame: pd.DataFrame) -> list[str]:
    """The keys of `GROUP_KEYS` that the frame has: one matrix per combination of their values."""
    return [k for k in GROUP_KEYS if k in frame.columns]


# ----------------------------------------------------------------------------- items


def intensity_frame(
    joined: pd.DataFrame,
    *,
    score: Score = "expected_value",
    min_valid_mass: float | None = None,
    keep_refused: bool = False,
) -> pd.DataFrame:
    """Prompt rows joined with their result rows -> one tidy row per item with its `intensity`.

    `score` picks the intensity of an item, as the run that made the results scored it:
    `expected_value` (or `argmax_value`) of the distribution over 0..max when the run read
    the number distribution, `parsed_value` when it generated greedily and parsed a number
    (the paper's way). An item is refused when the runner said so, when the chosen score is
    missing (no parseable number), or, if `min_valid_mass` is given, when the distribution
    put less mass than that on valid numbers. Refused items keep their row (refusal rates
    need them) with `intensity` NaN, so every mean excludes them (docs/DESIGN.md section 4);
    `keep_refused=True` keeps the value they have, for the "with refusals" variant (section 6).
    """
    if score not in SCORES:
        raise ValueError(f"score must be one of {SCORES}, got {score!r}")
    need = ["category", "setting", "perceiver", "experiencer", "text_id", score]
    missing = [c for c in need if c not in joined.columns]
    if missing:
        raise ValueError(f"intensity_frame: the frame lacks columns {missing}")
    value = pd.to_numeric(joined[score], errors="coerce").astype(float)
    refused = refusal_mask(joined, value, min_valid_mass=min_valid_mass)
    keys = group_keys(joined)
    out = joined[[*keys, "perceiver", "experiencer", "text_id"]].copy()
    out["intensity"] = value if keep_refused else value.mask(refused)
    out["refused"] = refused.to_numpy()
    return out.reset_index(drop=True)


def refusal_rates(frame: pd.DataFrame) -> pd.DataFrame:
    """Refusals per matrix (model, category, setting): refusals are excluded from every mean,
    so their rate is reported beside the means (docs/DESIGN.md section 4)."""
    keys = group_keys(frame)
    columns = [*keys, "n_items", "n_refused", "refusal_rate", "note"]
    if frame.empty:
        return pd.DataFrame(columns=columns)
    out = (
        frame.groupby(keys, sort=False, dropna=False)
        .agg(n_items=("refused", "size"), n_refused=("refused", "sum"))
        .reset_index()
    )
    out["n_refused"] = out["n_refused"].astype(int)
    out["refusal_rate"] = out["n_refused"] / out["n_items"]
    out["note"] = np.where(out["n_refused"] == out["n_items"], "all items refused", "")
    return out[columns]


# ----------------------------------------------------------------------------- identities


def default_identities() -> pd.DataFrame:
    """The released `identities` config (category, order, identity, group, unspecified)."""
    return pd.DataFrame(identity_rows())


def category_identities(identity_table: pd.DataFrame | None, category: str) -> pd.DataFrame:
    """One category's identities in matrix order (`a person` first)."""
    table = default_identities() if identity_table is None else identity_table
    ids = table[table["category"] == category].sort_values("order").reset_index(drop=True)
    if ids.empty:
        raise ValueError(f"no identities of category {category!r} in the identity table")
    return ids


def relation_matrix(ids: pd.DataFrame, category: str) -> np.ndarray:
    """`same` / `different` / `unspecified` for every (perceiver, experiencer) of `ids`.

    same(i, j): same race block, or (nationality, religion) the same identity; any pair with
    the unspecified identity is in neither set.
    """
    label = ids["group"] if category in SAME_BY_GROUP else ids["identity"]
    label = label.to_numpy()
    unspec = ids["unspecified"].to_numpy(dtype=bool)
    rel = np.where(label[:, None] == label[None, :], SAME, DIFFERENT).astype(object)
    rel[unspec[:, None] | unspec[None, :]] = UNSPECIFIED
    return rel


def _codes(values: pd.Series, ids: pd.DataFrame, what: str) -> np.ndarray:
    """Matrix positions of identity texts (vectorised: a config has millions of rows)."""
    codes = pd.Index(ids["identity"]).get_indexer(values)
    if (codes < 0).any():
        unknown = sorted(map(str, pd.unique(values[codes < 0])))
        raise ValueError(f"{what} {unknown} are not identities of this category")
    return codes


# ----------------------------------------------------------------------------- M0 and M


def zscore_matrix(m0: np.ndarray) -> tuple[np.ndarray, str]:
    """M = (M0 - mean(M0)) / std(M0) over all cells with a mean (population std, ddof=0).

    Returns (M, note); M is all NaN with a note when M0 has no spread to scale by.
    """
    finite = np.isfinite(m0)
    if finite.sum() < 2:
        return np.full_like(m0, np.nan), "fewer than 2 cells with a mean: M undefined"
    sd = float(np.std(m0[finite]))
    if sd == 0.0:
        return np.full_like(m0, np.nan), "M0 is constant: M undefined"
    return (m0 - np.mean(m0[finite])) / sd, ""


def _matrices(
    frame: pd.DataFrame, keys: list[str], identity_table: pd.DataFrame | None
) -> Iterator[tuple[tuple, pd.DataFrame, str, pd.DataFrame]]:
    """(group key, rows, category, its identities in the paper's order) of each matrix, in order of appearance."""
    for key, g in frame.groupby(keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        category = dict(zip(keys, key, strict=True))["category"]
        yield key, g, category, category_identities(identity_table, category)


def compute_cells(frame: pd.DataFrame, identity_table: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (matrix, perceiver, experiencer): M0 (mean intensity over the answered
    events), M (M0 z-scored within the matrix) and the cell's relation, with every identity
    pair of the category present (an unanswered cell is NaN with a note, not missing)."""
    keys = group_keys(frame)
    out = []
    for key, g, category, ids in _matrices(frame, keys, identity_table):
        n = len(ids)
        p = _codes(g["perceiver"], ids, "perceivers")
        e = _codes(g["experiencer"], ids, "experiencers")
        value = g["intensity"].to_numpy(dtype=float)
        answered = np.isfinite(value)
        flat = p * n + e
        n_items = np.bincount(flat, minlength=n * n)
        n_events = np.bincount(flat[answered], minlength=n * n)
        total = np.bincount(flat[answered], weights=value[answered], minlength=n * n)
        with np.errstate(invalid="ignore", divide="ignore"):
            m0 = np.where(n_events > 0, total / np.maximum(n_events, 1), np.nan).reshape(n, n)
        m, matrix_note = zscore_matrix(m0)
        cell_note = np.where(n_items == 0, "no items", np.where(n_events == 0, "no answered items", matrix_note))
        cells = pd.DataFrame(
            {
                "perceiver": np.repeat(ids["identity"].to_numpy(), n),
                "experiencer": np.tile(ids["identity"].to_numpy(), n),
                "perceiver_order": np.repeat(ids["order"].to_numpy(), n),
                "experiencer_order": np.tile(ids["order"].to_numpy(), n),
                "perceiver_group": np.repeat(ids["group"].to_numpy(), n),
                "experiencer_group": np.tile(ids["group"].to_numpy(), n),
                "relation": relation_matrix(ids, category).ravel(),
                "n_items": n_items,
                "n_events": n_events,
                "m0": m0.ravel(),
                "m": m.ravel(),
                "note": cell_note,
            }
        )
        for k, v in zip(reversed(keys), reversed(key), strict=True):
            cells.insert(0, k, v)
        out.append(cells)
    if not out:
        return pd.DataFrame(columns=[*keys, "perceiver", "experiencer", "relation", "n_items", "n_events", "m0", "m"])
    return pd.concat(out, ignore_index=True)


def to_matrix(cells: pd.DataFrame, value: str = "m") -> pd.DataFrame:
    """One matrix's cells -> perceivers x experiencers (wide, the paper's order), e.g. for a heatmap."""
    first = cells.drop_duplicates("perceiver").sort_values("perceiver_order")["perceiver"]
    wide = cells.pivot(index="perceiver", columns="experiencer", values=value)
    return wide.loc[first.to_numpy(), first.to_numpy()]


# ----------------------------------------------------------------------------- δ and the permutation test


def gap_delta(m: np.ndarray, same: np.ndarray) -> float:
    """δ = mean(M[same]) - mean(M[not same]) over the cells with a value (`same` is boolean,
    and holds only the specified identities: the caller leaves the unspecified one out)."""
    valid = np.isfinite(m)
    a, b = valid & same, valid & ~same
    if not a.any() or not b.any():
        return float("nan")
    return float(m[a].mean() - m[b].mean())


def draw_permutations(n: int, n_permutations: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Independent row and column permutations of range(n), one pair per null sample:
    (row_perms, col_perms), each of shape (n_permutations, n). All rows first, then all
    columns, so the draw does not depend on how the deltas are later batched."""
    base = np.broadcast_to(np.arange(n), (n_permutations, n))
    rows = rng.permuted(base, axis=1)
    cols = rng.permuted(base, axis=1)
    return rows, cols


def permuted_deltas(
    m: np.ndarray, same: np.ndarray, row_perms: np.ndarray, col_perms: np.ndarray, *, batch: int = 2048
) -> np.ndarray:
    """δ of M with rows reordered by `row_perms[k]` and columns by `col_perms[k]`, for every k.

    The same-group mask stays fixed while the matrix moves under it: whole rows and whole
    columns move, so each identity keeps all its cells together (a cell-wise shuffle would
    break the row and column structure that a perceiver or experiencer effect puts in M).
    Vectorised by gathering `batch` permuted matrices at once.
    """
    valid = np.isfinite(m)
    filled = np.where(valid, m, 0.0)
    same_f = same.astype(float)
    total, count = filled.sum(), valid.sum()
    out = np.empty(len(row_perms))
    for start in range(0, len(row_perms), batch):
        r = row_perms[start : start + batch, :, None]
        c = col_perms[start : start + batch, None, :]
        moved = filled[r, c]
        sum_same = np.einsum("bij,ij->b", moved, same_f)
        if valid.all():
            n_same = np.full(len(moved), same.sum())
        else:
            n_same = np.einsum("bij,ij->b", valid[r, c].astype(float), same_f)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[start : start + batch] = sum_same / n_same - (total - sum_same) / (count - n_same)
    return out


@dataclass(frozen=True)
class PermutationResult:
    """The structured permutation test of one matrix; `null` holds every permuted δ."""

    delta: float
    null_low: float
    null_high: float
    p_value: float
    n_permutations: int
    note: str = ""
    null: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)


def permutation_test(
    m: np.ndarray, same: np.ndarray, *, n_permutations: int = 10_000, seed: int = 0, confidence: float = 0.95
) -> PermutationResult:
    """δ of M and its null distribution under independent row and column permutations.

    p is two-sided, (1 + #{|δ*| >= |δ|}) / (1 + n) (the permuted δ* are centred on 0 by
    construction), with ties within floating-point noise counted as extreme; the interval
    is the central `confidence` quantile range of the null. Same seed, same interval.
    """
    if m.ndim != 2 or m.shape[0] != m.shape[1] or same.shape != m.shape:
        raise ValueError(f"need a square M and a same-shaped mask, got {m.shape} and {same.shape}")
    nan = float("nan")
    delta = gap_delta(m, same)
    if not np.isfinite(delta):
        return PermutationResult(nan, nan, nan, nan, 0, "no same-group or no different-group cell with a value")
    if np.nanstd(m) == 0.0:
        return PermutationResult(delta, nan, nan, nan, 0, "M is constant")
    rows, cols = draw_permutations(len(m), n_permutations, np.random.default_rng(seed))
    null = permuted_deltas(m, same, rows, cols)
    finite = null[np.isfinite(null)]
    note = "" if len(finite) == len(null) else f"{len(null) - len(finite)} permutations left a set empty"
    if len(finite) == 0:
        return PermutationResult(delta, nan, nan, nan, 0, note, null)
    tol = 1e-9 * max(1.0, float(np.nanmax(np.abs(m))))
    extreme = int(np.count_nonzero(np.abs(finite) >= abs(delta) - tol))
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    return PermutationResult(delta, float(low), float(high), (1 + extreme) / (1 + len(finite)), len(finite), note, null)


def compute_gap(
    cells: pd.DataFrame, *, n_permutations: int = 10_000, seed: int = 0, confidence: float = 0.95
) -> pd.DataFrame:
    """One row per matrix: δ of M, the null interval and p of the structured permutation test.

    Every matrix draws its permutations from a generator seeded with `seed`, so a matrix's
    interval does not depend on which other matrices are analysed with it.
    """
    keys = group_keys(cells)
    rows = []
    for key, g in cells.groupby(keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        spec = g[g["relation"] != UNSPECIFIED]
        order = spec.drop_duplicates("perceiver").sort_values("perceiver_order")["perceiver"].to_numpy()
        m = spec.pivot(index="perceiver", columns="experiencer", values="m").loc[order, order].to_numpy(dtype=float)
        rel = spec.pivot(index="perceiver", columns="experiencer", values="relation").loc[order, order].to_numpy()
        same = rel == SAME
        if not np.isfinite(m).any():
            notes = g["note"][g["note"] != ""]
            nan = float("nan")
            res = PermutationResult(nan, nan, nan, nan, 0, notes.iat[0] if len(notes) else "M undefined")
        else:
            res = permutation_test(m, same, n_permutations=n_permutations, seed=seed, confidence=confidence)
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "delta": res.delta,
                "null_low": res.null_low,
                "null_high": res.null_high,
                "p_value": res.p_value,
                "n_permutations": res.n_permutations,
                "seed": seed,
                "confidence": confidence,
                "n_same": int(same.sum()),
                "n_different": int((~same).sum()),
                "note": res.note,
            }
        )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- per-cell tests


def event_array(g: pd.DataFrame, ids: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """One matrix's items -> intensities I[p, e, event] (NaN where refused or absent), and
    the event ids along the last axis. Pairing is by event: the same narrative (`text_id`)
    rated in two cells of the same matrix."""
    n = len(ids)
    p = _codes(g["perceiver"], ids, "perceivers")
    e = _codes(g["experiencer"], ids, "experiencers")
    t, events = pd.factorize(g["text_id"], sort=True)
    flat = (p * n + e) * len(events) + t
    if len(flat) and np.bincount(flat, minlength=n * n * len(events)).max() > 1:
        raise ValueError("a (perceiver, experiencer, text_id) occurs twice in one matrix")
    out = np.full(n * n * len(events), np.nan)
    out[flat] = g["intensity"].to_numpy(dtype=float)
    return out.reshape(n, n, len(events)), np.asarray(events)


def cell_tests(frame: pd.DataFrame, identity_table: pd.DataFrame | None = None, *, alpha: float = 0.05) -> pd.DataFrame:
    """Per matrix and off-diagonal cell: paired t-tests over events of I(p, e) against the
    perceiver's in-group cell I(p, p) and against the experiencer's I(e, e) (docs/DESIGN.md section 4).

    Each reference is one family: Bonferroni multiplies its p-values by the number of cells
    of that matrix with a finite p (the diagonal, a cell against itself, is NaN and not
    counted). `significant` (p_bonferroni < alpha) is what the heatmaps leave unmasked.
    Cells with the unspecified identity are tested too; they are heatmap cells like the rest.
    """
    keys = group_keys(frame)
    out = []
    for key, g, _, ids in _matrices(frame, keys, identity_table):
        n = len(ids)
        x, _ = event_array(g, ids)
        diag = x[np.arange(n), np.arange(n)]  # (n, events): I(i, i)
        names = ids["identity"].to_numpy()
        off = ~np.eye(n, dtype=bool)
        for reference in REFERENCES:
            ref = diag[:, None, :] if reference == "perceiver" else diag[None, :, :]
            res = paired_t(x, np.broadcast_to(ref, x.shape))
            res["note"] = np.where(off, res["note"], "cell is its own reference")
            for col in ("t", "df", "p_value"):
                res[col] = np.where(off, res[col], np.nan)
            p_adj, m = bonferroni(res["p_value"].ravel()), int(np.isfinite(res["p_value"]).sum())
            ref_p = np.repeat(names, n) if reference == "perceiver" else np.tile(names, n)
            table = pd.DataFrame(
                {
                    **dict(zip(keys, key, strict=True)),
                    "perceiver": np.repeat(names, n),
                    "experiencer": np.tile(names, n),
                    "perceiver_order": np.repeat(ids["order"].to_numpy(), n),
                    "experiencer_order": np.tile(ids["order"].to_numpy(), n),
                    "reference": reference,
                    "reference_cell": ref_p + " / " + ref_p,
                    **{k: np.asarray(v).ravel() for k, v in res.items()},
                    "n_tests": m,
                    "p_bonferroni": p_adj.ravel(),
                }
            )
            table["significant"] = table["p_bonferroni"] < alpha
            out.append(table)
    if not out:
        return pd.DataFrame(columns=[*keys, "perceiver", "experiencer", "reference", "p_value", "p_bonferroni"])
    frame_out = pd.concat(out, ignore_index=True)
    first = [c for c in frame_out.columns if c != "note"]
    return frame_out[[*first, "note"]]


# ----------------------------------------------------------------------------- summaries


def matrix_summary(cells: pd.DataFrame) -> pd.DataFrame:
    """Per matrix: μ ± σ (population σ), min and max of M0 (the model's intensity scale), and
    where M is lowest and highest (M's own mean and σ are 0 and 1 by construction)."""
    keys = group_keys(cells)
    rows = []
    for key, g in cells.groupby(keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        m0, m = g["m0"].to_numpy(dtype=float), g["m"].to_numpy(dtype=float)
        row: dict[str, object] = {**dict(zip(keys, key, strict=True)), "n_cells": len(g)}
        row["n_cells_missing"] = int(np.isnan(m0).sum())
        has0, has = np.isfinite(m0), np.isfinite(m)
        row["m0_mean"] = float(m0[has0].mean()) if has0.any() else np.nan
        row["m0_std"] = float(m0[has0].std()) if has0.any() else np.nan
        row["m0_min"] = float(m0[has0].min()) if has0.any() else np.nan
        row["m0_max"] = float(m0[has0].max()) if has0.any() else np.nan
        for which, pick in (("min", np.nanargmin), ("max", np.nanargmax)):
            i = pick(m) if has.any() else None
            row[f"m_{which}"] = float(m[i]) if i is not None else np.nan
            row[f"m_{which}_perceiver"] = g["perceiver"].iat[i] if i is not None else None
            row[f"m_{which}_experiencer"] = g["experiencer"].iat[i] if i is not None else None
        notes = g["note"][(g["note"] != "") & (g["note"] != "no answered items") & (g["note"] != "no items")]
        row["note"] = "no answered items" if not has0.any() else (notes.iat[0] if len(notes) else "")
        rows.append(row)
    return pd.DataFrame(rows)


def identity_summary(cells: pd.DataFrame, *, axis: Sequence[str] = ("perceiver", "experiencer")) -> pd.DataFrame:
    """Per matrix and identity, μ ± σ (population σ, as in M's z-scoring), min and max of its
    row (as perceiver) and its column (as experiencer) of M: how one identity's ratings, or
    the ratings of it, sit in the matrix."""
    keys = group_keys(cells)
    out = []
    for role in axis:
        g = cells.groupby([*keys, role, f"{role}_order"], sort=False, dropna=False)["m"]
        table = g.agg(mean="mean", std=lambda s: s.std(ddof=0), min="min", max="max", n_cells="count").reset_index()
        table = table.rename(columns={role: "identity", f"{role}_order": "order"})
        table.insert(len(keys), "role", role)
        out.append(table)
    return pd.concat(out, ignore_index=True)
