"""The intergroup empathy gap's analysis as its spec names it (`ProbeSpec.analysis`): section, metrics, options.

Light: `--help` reads it without pandas. Its tables (`probe.TABLES`) are imported when an analysis runs.
"""

from __future__ import annotations

from functools import partial

from promptgen.core.plugins import resolve_reference

from ..probe_part import ProbeAnalysis
from .options import EmpathyOptions

ANALYSIS = ProbeAnalysis(
    section="Empathy",
    tables=partial(resolve_reference, "analysis.empathy.probe:TABLES"),  # imported when an analysis runs
    metrics="M0, M, δ with the structured permutation test, per-cell tests, summaries.",
    options=EmpathyOptions,
)
