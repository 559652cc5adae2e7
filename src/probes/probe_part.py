"""A probe's own top-stage parts as one typed value, what its `ProbeSpec.commands` names: `ProbeCommands`.

A step only one probe has (the Trust Game's `curate-pairs`), what `probes.api` offers of it, and the
released outputs of its paper that `probes import` reads. Light: `probes --help` lists the formats
from it and `from probes import api` its names, without importing what they name: each entry is a
reference ("module:attribute"), imported on first use (a command when the command line is built,
which the API must not import).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from analysis.probe_part import export_formats
from promptgen.core.errors import ProbeError
from promptgen.core.plugins import resolve_reference
from promptgen.core.probe_spec import ProbeSpec
from promptgen.core.release_format import ReleaseFormat
from promptgen.probe_registry import merged_parts, probes

#: what a probe's commands part adds to the project's shared names
Extra = Literal["commands", "api", "import_formats"]


@dataclass(frozen=True, eq=False)
class ProbeCommands:
    """What a probe adds to `probes` beyond build, run and analyze."""

    #: command name -> "module:function" of a typer command, listed after `probes lint` (its module is imported
    #: when the command line is built: no data library at its top)
    commands: Mapping[str, str] = field(default_factory=dict)
    #: what `probes.api` offers of it, the functions its commands call and what they return:
    #: attribute name -> "module:attribute", imported when first used
    api: Mapping[str, str] = field(default_factory=dict)
    #: released model outputs of its paper that `probes import --format NAME` turns into results: NAME -> format
    import_formats: Mapping[str, ReleaseFormat] = field(default_factory=dict)


#: a probe whose spec names no commands part
NONE = ProbeCommands()


def commands_of(spec: ProbeSpec) -> ProbeCommands:
    """The probe's `ProbeCommands` (none: `NONE`); a reference to anything else is one line naming it."""
    if spec.commands is None:
        return NONE
    found = resolve_reference(spec.commands)
    if not isinstance(found, ProbeCommands):
        raise ProbeError(
            f"probe {spec.name!r}: its commands {spec.commands} are a {type(found).__name__}, not ProbeCommands"
        )
    return found


def probe_extras(kind: Extra) -> dict[str, Any]:
    """Every probe's `commands`, `api` or `import_formats` in one mapping, in registry order; a name two probes
    take is refused (`promptgen.probe_registry.merged_parts`)."""
    declared = [(spec.name, spec.commands or "", getattr(commands_of(spec), kind)) for spec in probes().values()]
    return merged_parts(kind, declared)


def resolve_parts() -> None:
    """Resolve and check every registered probe's parts now: each reference's type, and no name two probes (or
    the project) take. The command line and the API call it once the plugins are loaded, so a plugin whose
    parts are wrong fails there, in one line, before a command lists them."""
    for kind in get_args(Extra):
        probe_extras(kind)
    export_formats()
