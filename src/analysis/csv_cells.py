"""The one way the project writes CSV files: text cells that a spreadsheet would run are made inert.

Report tables (`analysis.report`) and exports (`analysis.export_files`) are made to be opened
in a spreadsheet, and their text comes from anyone's prompt dataset (names, prompts) or a
`--model-name`. A cell that begins with `=`, `+`, `-`, `@`, a tab or a carriage return is read
as a formula by Excel, LibreOffice and Google Sheets (CSV injection; OWASP's guidance), so
such a text cell is written with a leading `'`, which those programs show as text and do not
run. Numbers are written as they are (a negative number is a number, not a formula), and the
parquet tables beside the CSV files keep every value verbatim.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

#: the first characters that make a spreadsheet read a cell as a formula
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def inert(value: Any) -> Any:
    """`value` with a `'` before it when it is text a spreadsheet would run; anything else unchanged."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def inert_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of `frame` whose text cells and column names are `inert` (numeric columns untouched)."""
    out = frame.copy()
    for column in out.columns:
        if not pd.api.types.is_numeric_dtype(out[column]) and not pd.api.types.is_bool_dtype(out[column]):
            out[column] = out[column].map(inert)
    out.columns = [inert(c) if isinstance(c, str) else c for c in out.columns]
    return out


def csv_text(frame: pd.DataFrame) -> str:
    """`frame` as CSV text (no index), every text cell and header `inert`."""
    return inert_frame(frame).to_csv(index=False)
