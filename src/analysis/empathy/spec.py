"""The intergroup empathy gap's analysis as its spec names it (`ProbeSpec.analysis`): section, metrics, options.

Light: `--help` reads it without pandas. Its tables (`probe.TABLES`) are imported when an analysis runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..probe_part import ProbeAnalysis
from .options import EmpathyOptions

if TYPE_CHECKING:  # pandas: not for `--help`
    from ..probe_analysis import ProbeTables


def tables() -> ProbeTables:
    """Its tables, figures and headline (`probe`), with pandas and matplotlib."""
    from .probe import TABLES

    return TABLES


ANALYSIS = ProbeAnalysis(
    section="Empathy",
    tables=tables,
    metrics="M0, M, δ with the structured permutation test, per-cell tests, summaries.",
    options=EmpathyOptions,
)
