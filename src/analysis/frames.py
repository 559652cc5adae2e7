"""Walking a table group by group: the one helper the metric and figure modules share."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pandas as pd


def keyed_groups(
    frame: pd.DataFrame, keys: Sequence[str], *, sort: bool = False
) -> Iterator[tuple[dict[str, Any], pd.DataFrame]]:
    """(key values by name, rows) per combination of `keys`, NaN keys kept as groups of their own.

    With no keys, one pair holding the whole frame, so a table without run or config columns is
    one group rather than none. `sort=False` keeps the order of first appearance (the tables'
    order); figures sort for a stable file order.
    """
    keys = list(keys)
    if not keys:
        yield {}, frame
        return
    for key, g in frame.groupby(keys, sort=sort, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        yield dict(zip(keys, key, strict=True)), g
