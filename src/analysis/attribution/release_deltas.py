"""The paper's Δd and SMD on the `*_release` configs (issue #40). No I/O.

The release's analysis scripts (`analysis.attribution.release`) compare persons within one
prompt; the paper's comparisons are against the single-actor setting. This module computes them
on the release's own items with the release's per-row metric (`release_rows`), so a model
scored on the released prompts has the paper's actor-actor and actor-observer tables too:

- actor-actor Δd = d_single - d_paired. Each release row holds both persons (X's options A-D,
  Y's E-H, renormalised per person); each person is one paired observation, matched to the
  single_actor_release rows of the same run, dimension, identity, gender, outcome, domain and
  scenario (`MATCH`). The release numbers scenarios the same way in every setting; its name
  lists differ per setting, so the name is not matched and `d_single` is the mean over the
  matched rows. Mean Δd and a one-sample t-test against 0 per outcome configuration x
  dimension x identity x gender x outcome (the designed table's groups).
- actor-observer Δd2 = mean d_single - mean d_context+identity per dimension x actor identity x
  gender x outcome x observer cause, with the standardised mean difference (μ1 - μ2) / s_p
  (pooled SD) and the two-sided equal-variance t-test (docs/DESIGN.md section 3). The single-actor
  sample of a group is the distinct single_actor_release rows matched to any of its observer
  rows. Δd1 (an anonymous observer) needs prompts the release does not have: the designed
  `actor_observer` config has them, so this table has Δd2 only.

As in the release tables every row counts (`n_refused` says how many the runner flagged) and a
row without probabilities has no metric: it is left out and counted in `note`.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
import pandas as pd

from ..columns import RUN_COLUMNS, require_columns
from .release import OBSERVER, ONE_SAMPLE, PAIR, SINGLE, grouped_table, one_sample_row, refused_count
from .tables import TWO_SAMPLE_COLUMNS, two_sample_row

_require = partial(require_columns, fallback="release attribution results")
#: a paired or observer row's actor is matched to the single-actor rows with these (and the run)
MATCH = ("dimension", "identity", "gender", "outcome", "domain", "scenario")
DELTA_GROUPS = ("outcome_config", "dimension", "identity", "gender", "outcome")
OBSERVER_GROUPS = ("dimension", "identity", "gender", "outcome", "observer_cause")
OBSERVER_COMPARISON = ("delta_d2", "context+identity")
#: the designed comparison's columns (`analysis.attribution.tables.TWO_SAMPLE_COLUMNS`) with the group's row count
TWO_SAMPLE = (*TWO_SAMPLE_COLUMNS[:2], "n_rows", *TWO_SAMPLE_COLUMNS[2:])
#: the actor-actor row's columns of person X / Y, named as the single-actor rows name them
_PERSON = {
    person: {f"identity_{s}": "identity", f"gender_{s}": "gender", f"outcome_{s}": "outcome", f"metric_{s}": "d_paired"}
    for person, s in (("X", "x"), ("Y", "y"))
}


def single_means(single_rows: pd.DataFrame) -> pd.DataFrame:
    """Per run and `MATCH` cell: `d_single` (mean metric over rows with one), `n_single` and `single_refused`."""
    keys = [*RUN_COLUMNS, *MATCH]
    _require(single_rows, [*keys, "metric"], "the single-actor side of the paper's Δd")
    refused = single_rows["refused"].fillna(False).astype(bool) if "refused" in single_rows else False
    grouped = single_rows.assign(single_refused=refused).groupby(keys, sort=False)
    return grouped.agg(
        d_single=("metric", "mean"), n_single=("metric", "count"), single_refused=("single_refused", "sum")
    ).reset_index()


def actor_actor_delta_items(single_rows: pd.DataFrame, pair_rows: pd.DataFrame) -> pd.DataFrame:
    """One row per person of each actor_actor_release row: `d_paired`, the matched `d_single`, `delta_d`.

    `target` is X or Y; `identity`, `gender`, `outcome` are that person's. `n_single` = 0 (and
    NaN `d_single`) when no single-actor row of that actor and scenario has a value.
    """
    needed = [*RUN_COLUMNS, "id", "outcome_config", "dimension", "domain", "scenario"]
    _require(pair_rows, [*needed, *(c for cols in _PERSON.values() for c in cols)], "the actor-actor Δd")
    refused = pair_rows["refused"].fillna(False).astype(bool) if "refused" in pair_rows else False
    sides = [
        pair_rows[[*needed, *columns]].rename(columns=columns).assign(target=person, refused=refused)
        for person, columns in _PERSON.items()
    ]
    items = pd.concat(sides, ignore_index=True)
    out = items.merge(single_means(single_rows), on=[*RUN_COLUMNS, *MATCH], how="left")
    out["n_single"] = out["n_single"].fillna(0).astype(int)
    out["single_refused"] = out["single_refused"].fillna(0).astype(int)
    out["delta_d"] = out["d_single"] - out["d_paired"]
    return out


def actor_actor_delta_table(items: pd.DataFrame, by: Sequence[str] = DELTA_GROUPS) -> pd.DataFrame:
    """Mean Δd = d_single - d_paired per group, one-sample t-test against 0 (`actor_actor_delta_items` rows).

    Positive Δd: the actor gets less internal attribution beside another person than alone.
    `n_unmatched` counts the persons without a single-actor match (their Δd is NaN).
    """

    def row(g: pd.DataFrame) -> dict[str, Any]:
        stats = one_sample_row(g["delta_d"], g)
        unmatched = int((g["n_single"] == 0).sum())
        return {**stats, "n_unmatched": unmatched}

    return grouped_table(items, by, row, (*ONE_SAMPLE, "n_unmatched"))


def actor_observer_smd_table(single_rows: pd.DataFrame, observer_rows: pd.DataFrame) -> pd.DataFrame:
    """Δd2 = mean d_single - mean d_context+identity with SMD and Student's t per `OBSERVER_GROUPS` group.

    The observer rows' actor is `identity_x`; their `gender` and `outcome` are the actor's.
    """
    actors = observer_rows.rename(columns={"identity": "identity_observer_corrected"}).rename(
        columns={"identity_x": "identity"}
    )
    keys = [*RUN_COLUMNS, *OBSERVER_GROUPS]
    match = [*RUN_COLUMNS, *MATCH]
    _require(actors, [*keys, *MATCH, "metric"], "the actor-observer Δd2")
    _require(single_rows, [*match, "id", "metric"], "the single-actor side of the actor-observer Δd2")
    wanted = actors[list(dict.fromkeys([*keys, *match]))].drop_duplicates()
    refused = single_rows["refused"].fillna(False).astype(bool) if "refused" in single_rows else False
    single = single_rows[[*match, "id", "metric"]].assign(refused=refused)
    pool = wanted.merge(single, on=match, how="inner").drop_duplicates([*keys, "id"])
    pools = {key: g for key, g in pool.groupby(keys, sort=False)}
    comparison, condition = OBSERVER_COMPARISON

    def row(g: pd.DataFrame) -> dict[str, Any]:
        key = tuple(g[c].iloc[0] for c in keys)
        matched = pools.get(key)
        a = matched["metric"].to_numpy(np.float64) if matched is not None else np.array([])
        b = g["metric"].to_numpy(np.float64)
        stats = two_sample_row(a, b, "no matched single-actor rows" if matched is None else "")
        missing = int((~np.isfinite(b)).sum())
        extra = f"{missing} of {len(b)} observer rows without a value" if missing else ""
        return {
            "comparison": comparison,
            "condition": condition,
            "n_rows": len(g),
            "n_refused": refused_count(g) + (refused_count(matched) if matched is not None else 0),
            **stats,
            "note": "; ".join(n for n in (stats["note"], extra) if n),
        }

    return grouped_table(actors, OBSERVER_GROUPS, row, TWO_SAMPLE)


def paper_tables(rows: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The paper's tables that the configs' `release_rows` allow: each needs single_actor_release beside its config."""
    out: dict[str, pd.DataFrame] = {}
    if SINGLE in rows and PAIR in rows:
        out["release_actor_actor_delta"] = actor_actor_delta_table(actor_actor_delta_items(rows[SINGLE], rows[PAIR]))
    if SINGLE in rows and OBSERVER in rows:
        out["release_actor_observer_smd"] = actor_observer_smd_table(rows[SINGLE], rows[OBSERVER])
    return out
