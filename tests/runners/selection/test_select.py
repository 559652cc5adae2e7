"""`select_rows`: a run's rows in one order (where, sample, shard, limit), checked against a by-hand selection."""

from __future__ import annotations

import pyarrow as pa
import pytest

from promptgen.core.errors import ProbeError
from runners.results.layout import shard_of
from runners.selection.select import EVERY_ROW, Selection, select_rows

IDS = [f"item-{k}" for k in range(40)]
TABLE = pa.table({"id": IDS, "variant": ["plain" if k % 3 else "json" for k in range(40)]})


def test_every_row_is_a_range_and_a_limit_its_first_rows() -> None:
    assert select_rows(TABLE, EVERY_ROW, "cfg").rows == range(40)
    assert select_rows(TABLE, Selection(limit=7), "cfg").rows == range(7)


@pytest.mark.parametrize(("shard", "limit"), [((0, 1), None), ((1, 3), None), ((2, 3), 5), ((0, 2), 100)])
def test_where_then_shard_then_limit(shard: tuple[int, int], limit: int | None) -> None:
    selection = Selection(where={"variant": ["plain"]}, shard=shard, limit=limit)
    by_hand = [k for k in range(40) if k % 3 and shard_of(IDS[k], shard[1]) == shard[0]][:limit]
    assert list(select_rows(TABLE, selection, "cfg").rows) == by_hand


@pytest.mark.parametrize("limit", [None, 1, 9, 30])
def test_files_in_order_give_the_rows_one_table_gives(limit: int | None) -> None:
    """A narrowed load reads the config file by file, stopping at the limit: the same rows as the whole table."""
    selection = Selection(where={"variant": ["plain"]}, shard=(1, 2), limit=limit)
    files = [TABLE.slice(0, 13), TABLE.slice(13, 13), TABLE.slice(26)]
    assert list(select_rows(iter(files), selection, "cfg").rows) == list(select_rows(TABLE, selection, "cfg").rows)


def test_a_where_no_row_meets_is_one_line_and_a_selection_is_a_comparable_value() -> None:
    with pytest.raises(ProbeError, match="cfg: no row has variant in \\(none\\)"):
        select_rows(TABLE, Selection(where={"variant": ["none"]}), "cfg")
    assert Selection(where={"variant": ["plain"]}) == Selection(where={"variant": ("plain",)})
    with pytest.raises(ProbeError, match="--limit must be positive"):
        Selection(limit=0)
