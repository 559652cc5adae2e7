"""Runs as short labels, for the report's tables and each probe's headline (pure).

The full tables lead with the run's provenance (model path, revision, scoring JSON), which
pushed δ, F, p and mean d off-screen to the right. In the report each run is one short label
(`run_label`, i.e. `runners.results.ResultKey.label`: the model's folder or Hub name and the
first 8 characters of its result key, as the key folder is named). Each probe's headline table
(its analysis module's `headline`, e.g. `analysis.attribution.probe.headline`) keeps only the
columns a reader opens the report for, with refused items left out as in the papers.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from runners.results import ResultKey

from .columns import RUN_COLUMNS

RUN_LABEL = "run"
#: a run as its three run columns (model, model_revision, scoring)
Run = tuple[str, str, str]


def run_label(model: str, model_revision: str, scoring: str) -> str:
    """The label of the run with these run columns: its key's `ResultKey.label`, the one definition.

    `<model folder or Hub name>·<first 8 of the key digest>`: short, and unique per key.
    """
    return ResultKey(str(model), str(model_revision), str(scoring)).label


def run_labels(tables: Mapping[str, pd.DataFrame]) -> dict[Run, str]:
    """Every run found in the tables -> its label (sorted by label)."""
    runs: set[Run] = set()
    for table in tables.values():
        if all(c in table.columns for c in RUN_COLUMNS):
            rows = table[list(RUN_COLUMNS)].drop_duplicates().itertuples(index=False)
            runs.update((str(model), str(revision), str(scoring)) for model, revision, scoring in rows)
    return dict(sorted(((run, run_label(*run)) for run in runs), key=lambda item: item[1]))


def with_run_label(table: pd.DataFrame, labels: Mapping[Run, str]) -> pd.DataFrame:
    """`table` with its run columns replaced by one `run` label column in front (for display)."""
    if not all(c in table.columns for c in RUN_COLUMNS):
        return table
    runs = zip(*(table[c].astype(str) for c in RUN_COLUMNS), strict=True)
    label = [labels.get(run) or run_label(*run) for run in runs]
    rest = table.drop(columns=list(RUN_COLUMNS))
    return pd.concat([pd.DataFrame({RUN_LABEL: label}, index=table.index), rest], axis=1)
