"""The rows of an Arrow table whose columns hold given values: a protocol's rows, or `--where COLUMN=V1,V2`.

How a protocol names the rows its paper scored (the Trust Game's configs hold every prompt variant of a
game; its paper read the plain-text ones). Values are read by the column's type, so `--where` text means
the same on a boolean, a numeric or a text column. `runners.selection.select.select_rows` is the caller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from promptgen.core.errors import ProbeError


def where_text(where: Mapping[str, Sequence[str]]) -> str:
    """`column in (v1, v2) and ...`: how an error names a row selection."""
    return " and ".join(f"{column} in ({', '.join(values)})" for column, values in where.items())


def where_mask(table: Any, where: Mapping[str, Sequence[str]], what: str) -> Any:
    """Boolean array: which rows of an Arrow `table` hold one of `where`'s values in each of its columns.

    Values are read by the column's type (`_where_hits`): true/false in any case for a boolean
    column, numbers for a numeric one, text otherwise; a list or struct column cannot be
    selected by one value. A missing column or a value its type cannot hold is one `ProbeError`
    naming `what`. A file of a config may match no row (a narrowed load reads file by file).
    """
    import pyarrow.compute as pc

    keep = None
    for column, values in where.items():
        if column not in table.column_names:
            raise ProbeError(
                f"{what} has no column {column!r} to select rows by (--where {column}=...); its columns: "
                f"{', '.join(table.column_names)}"
            )
        hit = _where_hits(table[column], column, values, what)
        keep = hit if keep is None else pc.and_(keep, hit)
    return keep


#: the words a boolean column's `--where` value may be, in any case
_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def _where_hits(array: Any, column: str, values: Sequence[str], what: str) -> Any:
    """Boolean array: which values of `array` equal one of `values`, read by the column's Arrow type."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = array.type
    if pa.types.is_nested(kind):
        raise ProbeError(
            f"{what}: column {column!r} holds {kind} values (lists or records), which --where cannot select by; "
            "pick a column of text, numbers or true/false"
        )
    if pa.types.is_boolean(kind):
        wanted = []
        for value in values:
            word = value.strip().lower()
            if word not in _TRUE + _FALSE:
                raise ProbeError(f"{what}: column {column!r} is true/false; --where {column}={value} is neither")
            wanted.append(word in _TRUE)
        return pc.fill_null(pc.is_in(array, value_set=pa.array(wanted, pa.bool_())), False)
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        numbers = []
        for value in values:
            try:
                numbers.append(float(value))
            except ValueError:
                problem = f"column {column!r} holds numbers; --where {column}={value} is not one"
                raise ProbeError(f"{what}: {problem}") from None
        column_values = pc.cast(array, pa.float64())
        return pc.fill_null(pc.is_in(column_values, value_set=pa.array(numbers, pa.float64())), False)
    return pc.fill_null(pc.is_in(pc.cast(array, pa.string()), value_set=pa.array(list(values))), False)
