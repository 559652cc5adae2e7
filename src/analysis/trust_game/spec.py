"""The Trust Game's analysis as its spec names it (`ProbeSpec.analysis`): its section and metrics.

Light: `--help` reads it without pandas. Its tables (`probe.TABLES`) are imported when an analysis runs.
"""

from __future__ import annotations

from functools import partial

from promptgen.core.plugins import resolve_reference

from ..probe_part import ProbeAnalysis

ANALYSIS = ProbeAnalysis(
    section="Trust Game",
    tables=partial(resolve_reference, "analysis.trust_game.probe:TABLES"),  # imported when an analysis runs
    metrics="type III ANOVA, post hoc gender t-tests with Cohen's d, probing accuracy.",
)
