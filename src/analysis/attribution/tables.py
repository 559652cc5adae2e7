"""Attribution probe (docs/DESIGN.md section 3): joined prompt + result rows -> tidy metric tables. No I/O.

The per-item score is `d = (p_effort + p_ability) - (p_difficulty + p_luck)`: internal minus
external attribution. Options are presented in a per-item permutation, so `choice_probs` is
mapped to causes through the item's own `choice_types`, never by position.

Units. With the `rotations` option order an item is presented four times (ids `<base>.r0`..
`.r3`); the rotations of one item are one observation, not four, so the cause probabilities
are averaged over an item's presentations before anything is counted (`collapse_rotations`).
With the default `permuted` order this is the identity.

Refusals. Every table has a `refused_items` column: `included` computes on all items,
`excluded` drops refused presentations before anything else (so an item whose every
presentation was refused disappears, and so does a difference that needs it). A group is
reported in both variants even when all its items were refused: its statistics are NaN and
`note` says why. Statistics that cannot be computed (n < 2, zero variance) are NaN with a note
too (see `analysis.stats`); no group ever raises.

Matching rule for the actor-actor Δd (and the single-actor pool of the actor-observer
comparison): a paired item's target actor is matched to the single-actor items with the same
model run and the same `MATCH_COLUMNS`: dimension, identity label, gender, first name, outcome,
domain and scenario number. The release numbers scenarios the same way in every setting
(scenario k of a domain is the same situation in single-actor, actor-actor and actor-observer
files), and the builder draws two-person names from the same seeded per-group samples as the
single-actor items, so with the published recipes every paired item has exactly one
single-actor match (one per rotation before collapsing). For target Y the actor is the second
person (`identity_2`, `gender_2`, `name_2`, `outcome_2`). `d_single` is the mean d over the
matches; an item without a match gets NaN and a note.

The actor-observer comparison (Δd1, Δd2) is `analysis.attribution.observer`, built on the
helpers here; `analysis.attribution.probe.attribution_tables` computes every table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from promptgen.attribution.release import CAUSES
from promptgen.core.errors import ProbeError

from ..columns import RUN_COLUMNS, require_columns, results_where
from ..stats import one_sample_t, two_sample_t

INTERNAL = ("effort", "ability")
EXTERNAL = ("difficulty", "luck")
PROB_COLUMNS = tuple(f"p_{c}" for c in CAUSES)
REFUSED_ITEMS = "refused_items"
VARIANTS = ("included", "excluded")

SINGLE_GROUPS = ("dimension", "identity", "gender", "outcome")
DOMAIN_GROUPS = ("domain", "outcome")
MATCH_COLUMNS = ("dimension", "identity", "gender", "name", "outcome", "domain", "scenario")
DELTA_GROUPS = ("outcome_config", "dimension", "identity", "gender", "outcome")
PAIR_GROUPS = ("outcome_config", "gender_pair", "dimension", "identity", "identity_2")
#: columns shared by the X and Y items of one actor-actor scenario instance (persons as stated)
PAIR_INSTANCE = ("template_id", "dimension", "identity", "gender", "name", "identity_2", "gender_2", "name_2")
SHARE_GROUPS = ("setting", "outcome")

ONE_SAMPLE_COLUMNS = ("n_items", "n_refused", "n", "mean", "sd", "t", "df", "p", "ci_low", "ci_high", "note")
TWO_SAMPLE_COLUMNS = (
    "comparison",
    "condition",
    "n_refused",
    "n_single",
    "n_condition",
    "mean_single",
    "mean_condition",
    "delta_d",
    "sd_pooled",
    "smd",
    "t",
    "df",
    "p",
    "ci_low",
    "ci_high",
    "note",
)
SHARE_COLUMNS = ("cause", "n_items", "n", "count", "share", "note")

#: large or per-presentation columns that per-item tables do not carry
_HEAVY = (
    "prompt",
    "messages",
    "choices",
    "choice_labels",
    "choice_types",
    "choice_logprobs",
    "choice_probs",
    "choice_tokens",
    "chosen_index",
    "number_min",
    "number_max",
    "number_probs",
    "expected_value",
    "argmax_value",
    "generated_text",
    "parsed_value",
    "statement",
    "option_seed",
    "option_order",
)
#: (person X's column, person Y's column) in two-person rows
_SECOND_PERSON = (
    ("identity", "identity_2"),
    ("identity_original", "identity_2_original"),
    ("gender", "gender_2"),
    ("name", "name_2"),
    ("outcome", "outcome_2"),
)
_ROTATION_SUFFIX = re.compile(r"\.r[0-9]+$")


# ----------------------------------------------------------------------------- per item


#: the results the errors name (`columns.results_where`): the rows' files, else this
_where = partial(results_where, fallback="attribution results")
_require = partial(require_columns, fallback="attribution results")


def cause_matrix(frame: pd.DataFrame) -> np.ndarray:
    """(n, 4) probabilities in CAUSES order, from each row's `choice_probs` and `choice_types`.

    A row without probabilities (None, or NaN when a letter-mode item had no valid mass) is a
    row of NaN. Types that are not a permutation of the four causes are an error naming the
    item, since mapping them by position would silently mix causes.
    """
    n = len(frame)
    out = np.full((n, len(CAUSES)), np.nan)
    for row, (item_id, types, probs) in enumerate(
        zip(frame["id"], frame["choice_types"], frame["choice_probs"], strict=True)
    ):
        types = list(types) if types is not None else []
        if sorted(types) != sorted(CAUSES):
            raise ProbeError(
                f"{_where(frame)}: item {item_id!r}: choice_types {types} is not a permutation of {', '.join(CAUSES)}"
            )
        if probs is None:
            continue
        probs = np.asarray(probs, dtype=np.float64)
        if probs.shape != (len(CAUSES),):
            raise ProbeError(f"{_where(frame)}: item {item_id!r}: {len(probs)} choice_probs for {len(CAUSES)} options")
        out[row, [CAUSES.index(t) for t in types]] = probs
    return out


def _scores(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(d, top cause) from cause-ordered probabilities; the top cause is None without probabilities.

    Exact ties go to the first cause in CAUSES order (np.argmax); with float scores they do not occur in practice.
    """
    inside = [CAUSES.index(c) for c in INTERNAL]
    outside = [CAUSES.index(c) for c in EXTERNAL]
    d = p[:, inside].sum(axis=1) - p[:, outside].sum(axis=1)
    ok = np.isfinite(p).all(axis=1)
    best = np.argmax(np.where(ok[:, None], p, 0.0), axis=1)
    top = np.array([CAUSES[i] if k else None for i, k in zip(best, ok, strict=True)], dtype=object)
    return d, top


def compute_items(joined: pd.DataFrame) -> pd.DataFrame:
    """Per presented item: metadata, run, `refused`, `p_<cause>`, `d`, `top_cause`, `base_id`.

    `joined` is `analysis.load.join(prompts, results)` of one attribution config.
    """
    _require(joined, ("id", "setting", "choice_types", "choice_probs", "refused", *RUN_COLUMNS), "attribution analysis")
    if joined["refused"].isna().any():
        raise ProbeError(f"{_where(joined)}: `refused` is empty for some rows; the results are malformed")
    p = cause_matrix(joined)
    d, top = _scores(p)
    out = joined.drop(columns=[c for c in _HEAVY if c in joined.columns]).copy()
    out["refused"] = joined["refused"].astype(bool).to_numpy()
    for j, col in enumerate(PROB_COLUMNS):
        out[col] = p[:, j]
    out["d"] = d
    out["top_cause"] = top
    rotated = out["rotation"].notna() if "rotation" in out.columns else pd.Series(False, index=out.index)
    out["base_id"] = [_ROTATION_SUFFIX.sub("", i) if r else i for i, r in zip(out["id"], rotated, strict=True)]
    return out.reset_index(drop=True)


def collapse_rotations(items: pd.DataFrame) -> pd.DataFrame:
    """One row per item and run: cause probabilities (and `valid_mass`) averaged over the item's presented rotations.

    `refused` is True when any presentation was refused; `n_presentations` counts them.
    Without rotations (the default option order) the rows are returned unchanged.
    """
    keys = [*RUN_COLUMNS, "base_id"]
    if not items.duplicated(keys).any():
        return items.assign(n_presentations=1)
    means = [*PROB_COLUMNS, *(["valid_mass"] if "valid_mass" in items.columns else [])]
    skip = (*keys, *means, "d", "top_cause", "refused", "id", "rotation")
    meta = [c for c in items.columns if c not in skip]
    grouped = items.groupby(keys, sort=False, dropna=False)
    out = grouped[meta].first() if meta else grouped.size().to_frame().iloc[:, :0]
    out = out.join(grouped[means].mean())
    out["refused"] = grouped["refused"].any()
    out["n_presentations"] = grouped.size()
    out = out.reset_index()
    d, top = _scores(out[list(PROB_COLUMNS)].to_numpy(np.float64))
    out["d"], out["top_cause"] = d, top
    out["id"] = out["base_id"]
    return out


def _variants(items: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """{"included": all items, "excluded": refused presentations dropped}, both with rotations collapsed."""
    return {"included": collapse_rotations(items), "excluded": collapse_rotations(items[~items["refused"]])}


def _check_setting(items: pd.DataFrame, setting: str) -> None:
    found = sorted(set(items["setting"].astype(str)) - {setting})
    if found:
        raise ProbeError(f"{_where(items)}: expected {setting} items, found setting(s) {', '.join(found)}")


# ----------------------------------------------------------------------------- grouping


#: one group's values of the columns a statistic needs (numpy: slicing wide frames per group is slow)
Group = dict[str, np.ndarray]


def _groups(frame: pd.DataFrame, keys: Sequence[str], needed: Sequence[str]) -> dict[tuple, Group]:
    """{group key: {column: the group's values}} for the `needed` columns."""
    if frame.empty:
        return {}
    arrays = {c: frame[c].to_numpy() for c in needed}
    indices = frame.groupby(list(keys), sort=True, dropna=False).indices
    return {key: {c: a[i] for c, a in arrays.items()} for key, i in indices.items()}


def _check_keys(frame: pd.DataFrame, keys: Sequence[str]) -> None:
    _require(frame, keys, "grouping")
    empty = [c for c in keys if frame[c].isna().any()]
    if empty:
        raise ProbeError(f"{_where(frame)}: group column(s) {', '.join(empty)} are empty for some rows")


def _join_notes(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def _one_sample_row(group: Group | None, full: Group, value: str) -> dict[str, Any]:
    n_refused = int(full["refused"].sum())
    if group is None:
        r = one_sample_t([])
        return {**_stats(r.as_dict()), "n_items": 0, "n_refused": n_refused, "note": "all items refused"}
    values = group[value].astype(np.float64)
    missing = int((~np.isfinite(values)).sum())
    r = one_sample_t(values, nan_policy="omit")
    extra = f"{missing} of {len(values)} without a value" if missing else ""
    return {**_stats(r.as_dict()), "n_items": len(values), "n_refused": n_refused, "note": _join_notes(r.note, extra)}


def _stats(d: dict[str, Any]) -> dict[str, Any]:
    return {k: d[k] for k in ("n", "mean", "sd", "t", "df", "p", "ci_low", "ci_high", "note")}


def _table(
    frames: dict[str, pd.DataFrame],
    by: Sequence[str],
    row: Callable[[Group | None, Group], dict[str, Any] | list[dict[str, Any]]],
    columns: Sequence[str],
    needed: Sequence[str],
) -> pd.DataFrame:
    """One row (or several) per group and refusal variant; groups come from the `included` frame."""
    keys = [*RUN_COLUMNS, *by]
    _check_keys(frames["included"], keys)
    base = _groups(frames["included"], keys, needed)
    rows = []
    for variant in VARIANTS:
        groups = base if variant == "included" else _groups(frames[variant], keys, needed)
        for key in sorted(base):
            made = row(groups.get(key), base[key])
            for r in made if isinstance(made, list) else [made]:
                rows.append({**dict(zip(keys, key, strict=True)), REFUSED_ITEMS: variant, **r})
    return pd.DataFrame(rows, columns=[*RUN_COLUMNS, REFUSED_ITEMS, *by, *columns])


def _one_sample_table(frames: dict[str, pd.DataFrame], by: Sequence[str], value: str) -> pd.DataFrame:
    return _table(frames, by, lambda g, full: _one_sample_row(g, full, value), ONE_SAMPLE_COLUMNS, [value, "refused"])


# ----------------------------------------------------------------------------- single actor


def single_actor_table(single_items: pd.DataFrame, by: Sequence[str] = SINGLE_GROUPS) -> pd.DataFrame:
    """Mean d per group with a one-sample t-test against 0 and a 95% CI of the mean.

    `single_items` is `compute_items` of the single_actor config; pass `by=DOMAIN_GROUPS` for the
    per-domain table. Success and failure are never pooled by the defaults: d means the
    opposite thing for the two outcomes.
    """
    _check_setting(single_items, "single_actor")
    return _one_sample_table(_variants(single_items), by, "d")


# ----------------------------------------------------------------------------- actor-actor


def actor_view(pair_items: pd.DataFrame) -> pd.DataFrame:
    """Actor-actor items from the target actor's side.

    `identity`, `identity_original`, `gender`, `name`, `outcome` become the target's and
    `partner_*` the other person's; the stated-order `*_2` columns are dropped. This is what
    lets a target-Y item be matched to the single-actor items of person Y.
    """
    persons = [(first, second) for first, second in _SECOND_PERSON if first in pair_items.columns]
    _require(pair_items, ["target", *(second for _, second in persons)], "the actor view")
    y = (pair_items["target"] == "Y").to_numpy()
    out = pair_items.drop(columns=[second for _, second in persons])
    for first, second in persons:
        a, b = pair_items[first].to_numpy(object), pair_items[second].to_numpy(object)
        out[first] = np.where(y, b, a)
        out[f"partner_{first}"] = np.where(y, a, b)
    return out


def actor_actor_delta_items(single: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """Per paired item: `d_paired`, `d_single` (mean over matched single-actor items), `delta_d` = d_single - d_paired.

    Both frames are one refusal variant with rotations collapsed (`collapse_rotations`). See
    the module docstring for the matching rule. `refused` is True when the paired item or any
    of its single-actor matches was refused.
    """
    keys = [*RUN_COLUMNS, *MATCH_COLUMNS]
    _require(single, keys, "the actor-actor Δd")
    view = actor_view(pairs)
    _require(view, keys, "the actor-actor Δd")
    matched = single.groupby(keys, dropna=False, sort=False).agg(
        d_single=("d", "mean"), n_single=("d", "count"), single_refused=("refused", "any")
    )
    out = view.rename(columns={"d": "d_paired"}).merge(matched.reset_index(), on=keys, how="left")
    out["n_single"] = out["n_single"].fillna(0).astype(int)
    out["refused"] = out["refused"].astype(bool) | out["single_refused"].astype("boolean").fillna(False).astype(bool)
    out["delta_d"] = out["d_single"] - out["d_paired"]
    out["note"] = np.where(out["n_single"] == 0, "no single-actor item with a value for this actor and scenario", "")
    return out.drop(columns="single_refused")


def actor_actor_delta_table(
    single_items: pd.DataFrame, pair_items: pd.DataFrame, by: Sequence[str] = DELTA_GROUPS
) -> pd.DataFrame:
    """Mean Δd = d_single - d_paired per group (the target actor's identity, gender, outcome), one-sample t against 0.

    Positive Δd: the actor gets less internal attribution next to another person than alone.
    """
    return delta_table(actor_actor_delta_frames(single_items, pair_items), by)


def delta_table(frames: Mapping[str, pd.DataFrame], by: Sequence[str] = DELTA_GROUPS) -> pd.DataFrame:
    """`actor_actor_delta_table` of Δd items already made (`actor_actor_delta_frames`)."""
    return _one_sample_table(dict(frames), by, "delta_d")


def actor_actor_delta_frames(single_items: pd.DataFrame, pair_items: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The Δd items (`actor_actor_delta_items`) per refusal variant: what the Δd table and its precision read."""
    _check_setting(single_items, "single_actor")
    _check_setting(pair_items, "actor_actor")
    singles, pairs = _variants(single_items), _variants(pair_items)
    return {v: actor_actor_delta_items(singles[v], pairs[v]) for v in VARIANTS}


def actor_actor_pair_items(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per scenario instance: `d_X`, `d_Y` and `delta_d_pair` = d_X - d_Y (X is the person named first).

    X's and Y's items are paired by run and `PAIR_INSTANCE` (the persons as stated, which both
    items share). An instance with a missing side keeps NaN and a note.
    """
    keys = [*RUN_COLUMNS, *PAIR_INSTANCE]
    _require(pairs, [*keys, "target"], "the actor-actor Δd_pair")
    extra = [c for c in ("outcome_config", "gender_pair", "outcome", "outcome_2", "domain", "scenario") if c in pairs]
    sides = {}
    for target in ("X", "Y"):
        side = pairs[pairs["target"] == target]
        if side.duplicated(keys).any():
            example = side.loc[side.duplicated(keys), "id"].iloc[0]
            raise ProbeError(f"{_where(pairs)}: two {target} items for one scenario instance (e.g. {example!r})")
        cols = keys + (extra if target == "X" else [])
        sides[target] = side[[*cols, "id", "d", "refused"]].rename(
            columns={"id": f"id_{target}", "d": f"d_{target}", "refused": f"refused_{target}"}
        )
    out = sides["X"].merge(sides["Y"], on=keys, how="outer", sort=False)
    if extra:  # instances with only a Y item: take their shared columns from the Y rows
        y_extra = pairs[pairs["target"] == "Y"][[*keys, *extra]]
        out = out.set_index(keys)
        out[extra] = out[extra].combine_first(y_extra.set_index(keys)[extra])
        out = out.reset_index()
    out["delta_d_pair"] = out["d_X"] - out["d_Y"]
    flags = [out[f"refused_{t}"].astype("boolean").fillna(False).astype(bool) for t in ("X", "Y")]
    out["refused"] = flags[0] | flags[1]
    out["note"] = np.select(
        [out["id_X"].isna(), out["id_Y"].isna()], ["no X item for this instance", "no Y item for this instance"], ""
    )
    return out


def actor_actor_pair_table(pair_items: pd.DataFrame, by: Sequence[str] = PAIR_GROUPS) -> pd.DataFrame:
    """Mean Δd_pair = d_X - d_Y per group (X's and Y's identity), one-sample t against 0."""
    _check_setting(pair_items, "actor_actor")
    frames = {v: actor_actor_pair_items(f) for v, f in _variants(pair_items).items()}
    return _one_sample_table(frames, by, "delta_d_pair")


# ----------------------------------------------------------------------------- two samples


def two_sample_row(single: np.ndarray, condition: np.ndarray, why: str) -> dict[str, Any]:
    """The `TWO_SAMPLE_COLUMNS` statistics of Δd = mean(single) - mean(condition), `why` first in `note`."""
    r = two_sample_t(single.astype(np.float64), condition.astype(np.float64), nan_policy="omit")
    return {
        "n_single": r.n1,
        "n_condition": r.n2,
        "mean_single": r.mean1,
        "mean_condition": r.mean2,
        "delta_d": r.diff,
        "sd_pooled": r.sd_pooled,
        "smd": r.smd,
        "t": r.t,
        "df": r.df,
        "p": r.p,
        "ci_low": r.ci_low,
        "ci_high": r.ci_high,
        "note": _join_notes(why, r.note),
    }


# ----------------------------------------------------------------------------- shares


def attribution_shares(items: pd.DataFrame, by: Sequence[str] = SHARE_GROUPS) -> pd.DataFrame:
    """Fraction of items whose most probable cause is each cause, per run and group (long: one row per cause)."""

    def row(group: Group | None, full: Group) -> list[dict[str, Any]]:
        top = group["top_cause"] if group is not None else np.array([], dtype=object)
        n = int(pd.notna(top).sum())
        note = "all items refused" if group is None else ("no item has probabilities" if n == 0 else "")
        return [
            {
                "cause": cause,
                "n_items": len(top),
                "n": n,
                "count": int((top == cause).sum()),
                "share": (top == cause).sum() / n if n else np.nan,
                "note": note,
            }
            for cause in CAUSES
        ]

    return _table(_variants(items), by, row, SHARE_COLUMNS, ["top_cause", "refused"])
