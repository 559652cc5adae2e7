"""The Trust Game's analysis as its spec names it (`ProbeSpec.analysis`): its section and metrics.

Light: `--help` reads it without pandas. Its tables (`probe.TABLES`) are imported when an analysis runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..probe_part import ProbeAnalysis

if TYPE_CHECKING:  # pandas: not for `--help`
    from ..probe_analysis import ProbeTables


def tables() -> ProbeTables:
    """Its tables, figures and headline (`probe`), with pandas and matplotlib."""
    from .probe import TABLES

    return TABLES


ANALYSIS = ProbeAnalysis(
    section="Trust Game",
    tables=tables,
    metrics="type III ANOVA, post hoc gender t-tests with Cohen's d, probing accuracy.",
)
