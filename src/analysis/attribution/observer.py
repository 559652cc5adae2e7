"""Attribution probe, the actor-observer comparison (docs/DESIGN.md section 3): Δd1 and Δd2 with SMD. No I/O.

An actor's single-actor d against the d of the same actor beside an observer, without
(`context`) and with (`context+identity`) the observer's identity: the standardised mean
difference and the equal-variance t-test per group (`actor_observer_table`). Per-item scores,
refusal variants, the matching rule and the two-sample statistics are `analysis.attribution.tables`'s;
this module only imports them, so `analysis.attribution.tables` never imports it back.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from promptgen.core.errors import ProbeError

from ..columns import RUN_COLUMNS
from .tables import (
    MATCH_COLUMNS,
    REFUSED_ITEMS,
    TWO_SAMPLE_COLUMNS,
    VARIANTS,
    Group,
    _check_keys,
    _check_setting,
    _groups,
    _require,
    _variants,
    two_sample_row,
)

OBSERVER_GROUPS = ("dimension", "identity", "gender", "outcome", "observer_cause")
OBSERVER_COMPARISONS = (("delta_d1", "context"), ("delta_d2", "context+identity"))


def actor_observer_table(
    single_items: pd.DataFrame,
    observer_items: pd.DataFrame,
    by: Sequence[str] = OBSERVER_GROUPS,
    match_on: Sequence[str] = MATCH_COLUMNS,
) -> pd.DataFrame:
    """Δd1 = mean d_single - mean d_context and Δd2 = mean d_single - mean d_context+identity per group.

    Long format: one row per group, comparison (`delta_d1`, `delta_d2`) and refusal variant, with
    the standardised mean difference (μ_single - μ_condition) / s_p (pooled SD) and the two-sided
    equal-variance t-test. The single-actor sample of a group is the single-actor items matched
    (by `match_on`) to any of the group's observer items; pass a shorter `match_on`, e.g.
    `("dimension", "identity", "gender", "outcome")`, to compare against all single-actor items of
    the actor's identity instead of the same actors and scenarios. Group columns must be filled
    in both conditions (so not the observer's `identity_2`, which context items lack).
    """
    _check_setting(single_items, "single_actor")
    _check_setting(observer_items, "actor_observer")
    _require(observer_items, ["condition", *match_on], "the actor-observer comparison")
    _require(single_items, match_on, "the actor-observer comparison")
    if "condition" in by:
        raise ProbeError("actor-observer groups must not include `condition`: each group compares both conditions")
    singles, observers = _variants(single_items), _variants(observer_items)
    keys = [*RUN_COLUMNS, *by]
    _check_keys(observers["included"], keys)
    pools = {v: _single_pools(singles[v], observers[v], keys, [*RUN_COLUMNS, *match_on]) for v in VARIANTS}
    needed = ["condition", "d", "refused"]
    base = _groups(observers["included"], keys, needed)
    rows = []
    for variant in VARIANTS:
        groups = base if variant == "included" else _groups(observers[variant], keys, needed)
        for key in sorted(base):
            full, group, pool = base[key], groups.get(key), pools[variant].get(key)
            full_pool = pools["included"].get(key)
            for comparison, condition in OBSERVER_COMPARISONS:
                in_full = full["condition"] == condition
                cond = group["d"][group["condition"] == condition] if group is not None else np.array([])
                n_refused = int(full["refused"][in_full].sum()) + (
                    0 if full_pool is None else int(full_pool["refused"].sum())
                )
                if not in_full.any():
                    why = "no items in this condition"
                elif len(cond) == 0:
                    why = "all condition items refused"
                elif pool is None:
                    why = "no matched single-actor items"
                else:
                    why = ""
                rows.append(
                    {
                        **dict(zip(keys, key, strict=True)),
                        REFUSED_ITEMS: variant,
                        "comparison": comparison,
                        "condition": condition,
                        "n_refused": n_refused,
                        **two_sample_row(pool["d"] if pool is not None else np.array([]), cond, why),
                    }
                )
    return pd.DataFrame(rows, columns=[*RUN_COLUMNS, REFUSED_ITEMS, *by, *TWO_SAMPLE_COLUMNS])


def _single_pools(
    single: pd.DataFrame, observer: pd.DataFrame, keys: list[str], match: list[str]
) -> dict[tuple, Group]:
    """Per observer group: the distinct single-actor items matched to any of its observer items."""
    wanted = observer[list(dict.fromkeys([*keys, *match]))].drop_duplicates()
    pool = wanted.merge(single[[*match, "base_id", "d", "refused"]], on=match, how="inner")
    return _groups(pool.drop_duplicates([*keys, "base_id"]), keys, ["d", "refused"])
