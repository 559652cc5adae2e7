"""The columns every analysis module reads by name, and the one check that a frame has them (pure, no I/O).

The metric modules import their column names from here, not from the I/O module `analysis.load`,
so a metric needs nothing but frames.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, get_args

import pandas as pd

from promptgen.core.errors import ProbeError

#: columns `load_results` adds to the result rows
RESULT_KEY_COLUMN = "result_key"
RESULT_FILE_COLUMN = "results_file"
#: result columns that identify a run; every table is computed per run
RUN_COLUMNS = ("model", "model_revision", "scoring")
#: a number item's answer, as result rows hold it: the distribution's expected value or most likely number
#: (scored), or the number parsed from generated text (generated); `--score` picks one
NumberScore = Literal["expected_value", "argmax_value", "parsed_value"]
NUMBER_SCORES: tuple[NumberScore, ...] = get_args(NumberScore)
#: result columns every part must have; the others of RESULT_SCHEMA are read when present, so
#: parts written before a column was added to the schema still load (the column is null there)
CORE_RESULT_COLUMNS = ("id", *RUN_COLUMNS, "refused")


def results_where(frame: pd.DataFrame, fallback: str = "results") -> str:
    """The result files a frame's rows came from (the first three), for an error to name; `fallback` without any."""
    if RESULT_FILE_COLUMN in frame.columns and not frame.empty:
        files = sorted(set(frame[RESULT_FILE_COLUMN].astype(str)))
        return ", ".join(files[:3]) + (" ..." if len(files) > 3 else "")
    return fallback


def require_columns(frame: pd.DataFrame, columns: Iterable[str], what: str, fallback: str = "results") -> None:
    """One error naming the result files and every column `what` needs that the frame lacks."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ProbeError(f"{results_where(frame, fallback)}: {what} needs column(s) {', '.join(missing)}")


#: columns `analysis.pipeline.collect` adds to the joined rows when a config has a sample unit (DESIGN 9): the
#: distinct units of the prompt config (N), and the sample's seed from the run's manifest entry (NaN: none recorded)
SAMPLE_POPULATION_COLUMN = "sample_population"
SAMPLE_SEED_COLUMN = "sample_seed"
