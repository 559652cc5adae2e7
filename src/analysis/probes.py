"""The registered probes as the analysis sees them: each one's `ProbeAnalysis`, report section and headline.

The registry is `promptgen.probe_registry` (one `ProbeSpec` per probe, from its own package or a
plugin, `promptgen.core.plugins`); each spec names its analysis (`ProbeSpec.analysis`), an
`analysis.probe_part.ProbeAnalysis`, whose tables (`analysis.probe_analysis.ProbeTables`) are
imported here once and checked. The pipeline, the report and
the sweep loop over these and name no probe.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np

from promptgen.core.errors import ProbeError
from promptgen.core.probe_spec import ProbeSpec
from promptgen.probe_registry import probes

from .headlines import run_labels
from .probe_analysis import ProbeTables
from .probe_part import ProbeAnalysis, analysis_of

#: the report section of tables no probe claims (refusals, provenance)
OVERVIEW = "Overview"


@functools.cache
def tables_of(analysis: ProbeAnalysis) -> ProbeTables:
    """A probe's `ProbeTables`, imported and checked once per `ProbeAnalysis` (pandas and its figures come with
    them); anything else is one line."""
    found = analysis.tables()
    if not isinstance(found, ProbeTables):
        raise ProbeError(f"the {analysis.section} analysis' tables are a {type(found).__name__}, not ProbeTables")
    return found


def probe_tables() -> list[tuple[ProbeSpec, ProbeAnalysis, ProbeTables]]:
    """(spec, analysis, tables) of every registered probe, in report order: what the pipeline and report loop over."""
    return [(spec, found, tables_of(found)) for spec in probes().values() for found in (analysis_of(spec),)]


def section_of(table: str) -> str:
    """The report section of an analysis table: its probe's, by name prefix, else the overview."""
    for spec in probes().values():
        if table.startswith(spec.table_prefix):
            return analysis_of(spec).section
    return OVERVIEW


def sections() -> list[str]:
    """The report's sections in order: the overview, then each probe's."""
    return [OVERVIEW, *(analysis_of(spec).section for spec in probes().values())]


def section_headlines(tables: Mapping[str, Any]) -> dict[str, Any]:
    """Section name -> its headline table (sections without the source table are left out)."""
    labels = run_labels(tables)
    out = {}
    for _, found, computed in probe_tables():
        frame = computed.headline(tables, labels)
        if frame is not None and not frame.empty:
            out[found.section] = frame.replace([np.inf, -np.inf], np.nan)
    return out
