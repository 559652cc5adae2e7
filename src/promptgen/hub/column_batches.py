"""Rows added a group at a time as columns, handed to the writer as Arrow tables.

Why: a builder that yields one dict per row, which `row_batches` then re-reads column by
column and `pa.Table.from_pydict` converts again, spends most of a multi-million-row build in
that bookkeeping (58% of the 3.3 M-row talent-or-luck build, before the parquet writer did any
work). Rows of one template and identity pair share most of their columns, so a builder here
adds a group of `n` rows at once: the columns they share once (`same`), the ones that vary as
lists (`each`), and list columns flat with a fixed width per row (`flat`). Tables leave in
batches of exactly `size` rows, as `row_batches` cut them, so the files written are the same
bytes. `messages` left out is the prompt as one user turn (`contract.user_messages`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import accumulate
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from .folder import BATCH_ROWS

if TYPE_CHECKING:
    from datasets import Features


class ColumnBatches:
    """The rows of one config as columns; `add` a group of rows, then iterate `tables()` to hand them on."""

    def __init__(self, features: Features, *, size: int = BATCH_ROWS) -> None:
        self.schema: pa.Schema = features.arrow_schema
        self.size = size
        self._lists = {f.name for f in self.schema if pa.types.is_list(f.type)}
        self._values: dict[str, list] = {name: [] for name in self.schema.names}
        #: per list column, the length of each row's list (the flat values sit in `_values`)
        self._lengths: dict[str, list[int]] = {name: [] for name in self._lists}
        #: whether `messages` is made from the prompt (left out of `add`)
        self._derived = False
        self._checked: set[tuple[tuple[str, ...], ...]] = set()
        self.rows = 0

    def add(
        self,
        n: int,
        *,
        same: Mapping[str, Any] = {},
        each: Mapping[str, Sequence[Any]] = {},
        flat: Mapping[str, tuple[Sequence[Any], int]] = {},
    ) -> None:
        """Append `n` rows: `same` holds a value every row shares (a list column's value is one row's list),
        `each` one scalar per row, `flat` a list column's `n * width` values with its `width`."""
        self._check(tuple(same), tuple(each), tuple(flat))
        values, lengths = self._values, self._lengths
        for name, value in same.items():
            if name in lengths:
                values[name].extend(list(value) * n)
                lengths[name].extend([len(value)] * n)
            else:
                values[name].extend([value] * n)
        for name, column in each.items():
            if len(column) != n:
                raise ValueError(f"column {name!r}: {n} values expected, got {len(column)}")
            values[name].extend(column)
        for name, (column, width) in flat.items():
            if len(column) != n * width:
                raise ValueError(f"list column {name!r}: {n} rows of {width} expected, got {len(column)} values")
            values[name].extend(column)
            lengths[name].extend([width] * n)
        self.rows += n

    def _check(self, same: tuple[str, ...], each: tuple[str, ...], flat: tuple[str, ...]) -> None:
        """Each column given once, in the right form (a builder calls `add` with the same columns each time,
        so a set of names is checked once)."""
        if (same, each, flat) in self._checked:
            return
        given = [*same, *each, *flat]
        derived = "messages" not in given
        missing = [c for c in self.schema.names if c not in given and not (c == "messages" and derived)]
        extra = [c for c in given if c not in self._values]
        wrong = [c for c in each if c in self._lists] + [c for c in flat if c not in self._lists]
        if missing or extra or wrong or len(given) != len(set(given)):
            raise ValueError(
                f"columns differ from the features (missing {missing}, extra {extra}, lists given as scalars or "
                f"scalars as lists {wrong}, or given twice)"
            )
        if self._checked and derived != self._derived:
            raise ValueError("`messages` given for some rows and left out for others")
        self._derived = derived
        self._checked.add((same, each, flat))

    def tables(self, *, final: bool = False) -> Iterator[pa.Table]:
        """Tables of `size` rows while that many are held; with `final`, the rest too."""
        while self.rows >= self.size or (final and self.rows):
            yield self._take(min(self.size, self.rows))

    def _take(self, n: int) -> pa.Table:
        columns = {f.name: self._column(f, n) for f in self.schema if not (f.name == "messages" and self._derived)}
        if self._derived:
            columns["messages"] = self._messages(columns["prompt"], n)
        self.rows -= n
        return pa.Table.from_arrays([columns[name] for name in self.schema.names], schema=self.schema)

    def _column(self, field: pa.Field, n: int) -> pa.Array:
        values = self._values[field.name]
        if field.name not in self._lists:
            head = values[:n]
            del values[:n]
            return pa.array(head, type=field.type)
        lengths = self._lengths[field.name]
        offsets = [0, *accumulate(lengths[:n])]
        del lengths[:n]
        head = values[: offsets[-1]]
        del values[: offsets[-1]]
        return pa.ListArray.from_arrays(
            pa.array(offsets, pa.int32()), pa.array(head, type=field.type.value_type), type=field.type
        )

    def _messages(self, prompts: pa.Array, n: int) -> pa.Array:
        """Each row's prompt as one user turn, as `contract.user_messages` writes it."""
        message_type = self.schema.field("messages").type
        role = pa.array(["user"] * n, pa.string())
        turns = pa.StructArray.from_arrays([role, prompts], fields=list(message_type.value_type))
        return pa.ListArray.from_arrays(pa.array(range(n + 1), pa.int32()), turns, type=message_type)
