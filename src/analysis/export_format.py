"""What every `probes export` format is: the protocol a writer implements, the files it returns, `--round`'s range.

`jsonl` (`analysis.export`) is the project's own format, for any probe's results; a probe adds the
formats of its paper's tools from its analysis (`ProbeAnalysis.export_formats`: the attribution probe's
`talent-or-luck-csv`, `analysis.attribution.release_export`). `analysis.export_files` checks the
request, reads the results, asks the format for its files and writes them atomically. This module
sits below the probes' analysis packages, so a probe's writer can implement it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from promptgen.core.errors import ProbeError

from .probe_part import export_formats

if TYPE_CHECKING:  # the command line reads the formats' names and help from here, without pandas
    import pandas as pd

#: `--round`: the most decimals of the written probabilities
MAX_DECIMALS = 6
#: the project's own format (`analysis.export`) and its `--format` help
JSONL = "jsonl"
JSONL_HELP = "every result row joined to its prompt, one JSON object a line, one file per config (any probe's results)"


def format_helps() -> dict[str, str]:
    """Every `--format` name and its help (`jsonl`, then the probes' formats), without importing a writer."""
    return {JSONL: JSONL_HELP, **{name: fmt.help for name, fmt in export_formats().items()}}


def check_decimals(decimals: int | None) -> None:
    """`--round` must be 0..MAX_DECIMALS (or absent: full precision)."""
    if decimals is not None and not 0 <= decimals <= MAX_DECIMALS:
        raise ProbeError(f"--round must be between 0 and {MAX_DECIMALS} decimals, got {decimals}")


@dataclass(frozen=True)
class ExportRows:
    """What a format is given: the joined prompt + result rows, and what the request says of them."""

    #: `probe` value -> config -> joined rows (`analysis.pipeline.collect`)
    by_probe: Mapping[str, Mapping[str, pd.DataFrame]]
    #: `--round` (None: full precision), checked against the format's `rounds` already
    decimals: int | None = None
    #: the user named the configs (`--config`): one the format cannot write is an error, not skipped
    configs_given: bool = False
    #: the results' name, for messages
    results: str = ""


@dataclass(frozen=True)
class ExportFiles:
    """What a format writes: each file's text and rows (by path relative to the export folder), and which configs."""

    texts: dict[str, str]
    rows: dict[str, int]
    #: the configs written
    configs: list[str]
    #: configs of the results the format cannot hold, left out (with why)
    skipped: list[str] = field(default_factory=list)


class ExportFormat(Protocol):
    """One `probes export --format`: the files it writes from joined prompt + result rows."""

    name: str
    #: whether it takes `--round` (it writes probabilities as text)
    rounds: bool
    #: what it writes, as `promptgen.core.outputs.Layout` patterns: what `--overwrite` may replace
    files: tuple[str, ...]
    folders: tuple[str, ...]

    def export(self, rows: ExportRows) -> ExportFiles:
        """The files of the joined rows; what the format cannot write is one `ProbeError`."""
        ...
