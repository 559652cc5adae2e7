"""`probes export --format jsonl`: every result row joined to its prompt row, one JSON object a line, per config.

The project's own export format, for any probe's results (`analysis.export_format.ExportFormat`);
a probe's paper's formats come from its analysis (`ProbeAnalysis.export_formats`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd

from .columns import RESULT_FILE_COLUMN, RUN_COLUMNS
from .export_format import JSONL, ExportFiles, ExportRows


def _json_value(value: Any) -> Any:
    """A frame cell as JSON: arrays as lists, NaN as null, numpy scalars as Python numbers."""
    if isinstance(value, np.ndarray | list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        return None if math.isnan(value) or math.isinf(value) else float(value)
    return value


def jsonl_lines(joined: pd.DataFrame) -> Iterator[str]:
    """One JSON object per joined row, every prompt and result column but the local part file's path.

    Runs one after the other (sorted by their run columns), each in the prompt config's order.
    """
    frame = joined.drop(columns=[RESULT_FILE_COLUMN], errors="ignore")
    frame = frame.sort_values(list(RUN_COLUMNS), kind="stable") if set(RUN_COLUMNS) <= set(frame.columns) else frame
    columns = list(frame.columns)
    for values in zip(*(frame[c].tolist() for c in columns), strict=True):
        row = {c: _json_value(v) for c, v in zip(columns, values, strict=True)}
        yield json.dumps(row, ensure_ascii=False, allow_nan=False)


class Jsonl:
    """`--format jsonl` (module docstring): every config of the results, whatever its probe."""

    name = JSONL
    rounds = False
    files: tuple[str, ...] = ("*.jsonl",)
    folders: tuple[str, ...] = ()

    def export(self, rows: ExportRows) -> ExportFiles:
        joined = {config: frame for by_config in rows.by_probe.values() for config, frame in by_config.items()}
        return ExportFiles(
            texts={f"{c}.jsonl": "".join(f"{line}\n" for line in jsonl_lines(frame)) for c, frame in joined.items()},
            rows={f"{config}.jsonl": len(frame) for config, frame in joined.items()},
            configs=sorted(joined),
        )


FORMAT = Jsonl()
