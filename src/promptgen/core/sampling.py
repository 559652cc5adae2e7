"""Drawing a small subset of a prompt config that keeps every group (`probes demo`'s row selectors)."""

from __future__ import annotations

from typing import Any

#: every draw is seeded, so two demo runs score the same items
SEED = 0


def stratified_rows(frame: Any, by: list[str], n: int, seed: int = SEED) -> list[int]:
    """Row positions (`frame`'s index) of `n` rows per group of `by`, in table order.

    Drawn at random with `seed` when every group has `n` rows; else the first `n` of each group
    (a draw without replacement cannot take more rows than a group has).
    """
    groups = frame.groupby(by, sort=True, dropna=False)
    full = bool((groups.size() >= n).all())
    picked = groups.sample(n=n, random_state=seed, replace=False) if full else groups.head(n)
    return sorted(picked.index.tolist())
