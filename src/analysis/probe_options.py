"""Each probe's own analysis options (`ProbeAnalysis.options`), as classes, flags and recorded values.

A light module (no pandas): `probes analyze` builds its flags from `analysis_flags` for `--help`,
`analysis.probe_analysis.AnalysisOptions.from_flags` hands each probe its values, and the report
records them (`probe_option_values`). A probe's module reads its own with `options.probe(Class)`.
"""

from __future__ import annotations

from typing import Any

from promptgen.core.flags import DeclaredFlag, declared_flags, flags_by_name
from promptgen.core.probe_spec import ProbeSpec
from promptgen.probe_registry import probes

from .probe_part import analysis_of


def option_classes() -> list[tuple[ProbeSpec, type]]:
    """(spec, its options class) of each probe that declares its own analysis options, in report order."""
    return [(spec, cls) for spec in probes().values() if (cls := analysis_of(spec).options) is not None]


def analysis_flags() -> dict[str, list[DeclaredFlag]]:
    """Every probe's own analysis options, by name, in report order (two probes may share a name).

    The command line makes one `probes analyze` flag of each name (`probes.cli.options`); a flag's
    owner is the probe's name.
    """
    return flags_by_name(flag for spec, cls in option_classes() for flag in declared_flags(spec.name, cls))


def probe_option_values(options: Any) -> list[tuple[str, list[tuple[str, Any]]]]:
    """(section, [(flag, value)]) of each probe that declares its own analysis options, in report order: what
    the report records of them (`options` is an `AnalysisOptions`; a switch's value is on or off, None
    is `default`)."""
    out = []
    for spec, cls in option_classes():
        chosen = options.probe(cls)
        values = []
        for flag in declared_flags(spec.name, cls):
            value = getattr(chosen, flag.name)
            shown = ("on" if value else "off") if flag.kind is bool and value is not None else value
            values.append((flag.declaration.split("/")[0], "default" if shown is None else shown))
        out.append((analysis_of(spec).section, values))
    return out
