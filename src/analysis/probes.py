"""The registered probes as the analysis sees them: each one's analysis module, report section and headline.

The registry is `promptgen.probe_registry` (one `ProbeSpec` per probe, from its own package or a
plugin, `promptgen.core.plugins`); each spec names its analysis module (`ProbeSpec.analysis`), whose
contract is `analysis.probe_analysis`. The pipeline, the report and the sweep loop over these and
name no probe.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import numpy as np

from promptgen.core.probe_spec import ProbeSpec
from promptgen.probe_registry import probes

from .headlines import run_labels

#: the report section of tables no probe claims (refusals, provenance)
OVERVIEW = "Overview"


def analysis_module(spec: ProbeSpec) -> ModuleType:
    """The probe's analysis module, imported on first use (`--help` imports no pandas)."""
    return importlib.import_module(spec.analysis)


def analysis_modules() -> list[tuple[ProbeSpec, ModuleType]]:
    """(spec, analysis module) of every registered probe, in report order."""
    return [(spec, analysis_module(spec)) for spec in probes().values()]


def section_of(table: str) -> str:
    """The report section of an analysis table: its probe's, by name prefix, else the overview."""
    for spec in probes().values():
        if table.startswith(spec.table_prefix):
            return spec.section
    return OVERVIEW


def sections() -> list[str]:
    """The report's sections in order: the overview, then each probe's."""
    return [OVERVIEW, *(spec.section for spec in probes().values())]


def section_headlines(tables: Mapping[str, Any]) -> dict[str, Any]:
    """Section name -> its headline table (sections without the source table are left out)."""
    labels = run_labels(tables)
    out = {}
    for spec, module in analysis_modules():
        headline = getattr(module, "headline", None)
        frame = None if headline is None else headline(tables, labels)
        if frame is not None and not frame.empty:
            out[spec.section] = frame.replace([np.inf, -np.inf], np.nan)
    return out
