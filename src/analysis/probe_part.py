"""A probe's analysis as one typed value, what its `ProbeSpec.analysis` names: `ProbeAnalysis`, and where it is found.

Light (no pandas): `probes analyze --help` lists each probe's metrics and builds its options' flags,
`probes export --help` its formats, and the report orders its sections, all from this value. The
tables themselves are an `analysis.probe_analysis.ProbeTables` (steps, figures, headline, what each
table is), in the probe's analysis module with pandas and its figures, imported when an analysis
first runs (`ProbeAnalysis.tables`, resolved and checked by `analysis.probes.tables_of`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from promptgen.core.errors import ProbeError
from promptgen.core.plugins import resolve_reference
from promptgen.core.probe_spec import ProbeSpec
from promptgen.core.release_format import ReleaseFormat
from promptgen.probe_registry import merged_parts, probes


@dataclass(frozen=True, eq=False)
class ProbeAnalysis:
    """A probe's analysis: its report section, what it computes, its own options and export formats, and
    (imported on first use) its tables."""

    #: the report section its tables go to
    section: str
    #: returns its `analysis.probe_analysis.ProbeTables`, imported when called: the module that holds them
    #: imports pandas and matplotlib, which `--help` must not (checked where it is called)
    tables: Callable[[], Any]
    #: what it computes, a sentence for `probes analyze --help` (the help lists every probe's)
    metrics: str = ""
    #: its own `probes analyze` options: a frozen dataclass of `promptgen.core.flags.option_flag` fields, in a
    #: module without pandas (the command line builds their flags for `--help`); its analysis reads the
    #: values as `options.probe(Class)`, and the report records them. None: it takes none
    options: type[Any] | None = None
    #: files of another tool that `probes export --format NAME` writes from its results: NAME -> format; the
    #: first is `probes export`'s default for its results
    export_formats: Mapping[str, ReleaseFormat] = field(default_factory=dict)

    @property
    def default_export(self) -> str | None:
        """`probes export`'s format for its results when none is named: its first export format (None: jsonl)."""
        return next(iter(self.export_formats), None)


def analysis_of(spec: ProbeSpec) -> ProbeAnalysis:
    """The probe's `ProbeAnalysis` (its module is imported once, by Python); a reference to anything else is one
    line naming it."""
    found = resolve_reference(spec.analysis)
    if not isinstance(found, ProbeAnalysis):
        raise ProbeError(
            f"probe {spec.name!r}: its analysis {spec.analysis} is a {type(found).__name__}, not a ProbeAnalysis"
        )
    return found


def export_formats() -> dict[str, ReleaseFormat]:
    """Every probe's export formats by name, in registry order; a name two probes take, or `jsonl`, is refused."""
    declared = [(spec.name, spec.analysis, analysis_of(spec).export_formats) for spec in probes().values()]
    return merged_parts("export_formats", declared)


def default_exports() -> dict[str, str]:
    """Probe name -> `probes export`'s default format for its results, for the probes that have one."""
    found = {name: analysis_of(spec).default_export for name, spec in probes().items()}
    return {name: fmt for name, fmt in found.items() if fmt is not None}
