"""The probes by name: the one registry that the build, the analysis, the report and the sweep loop over.

Each built-in probe is a package of `promptgen` with a `spec.py` that holds its `SPEC`
(`promptgen.core.probe_spec.ProbeSpec`); they are found here by looking, so a new in-tree probe
adds its package and names no other module. A third-party probe calls `register_probe` from a
plugin module (an installed package's entry point, or a module named in `PROBES_PLUGINS`),
loaded by `promptgen.core.plugins.load_extensions`, never by importing this registry. The order
of `probes()` (by rank) is the order a sweep runs the probes and the report shows them.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .assets import add_assets
from .core.errors import ProbeError, RecipeError
from .core.plugins import PluginCode, is_plugin_module, plugin_call, resolve_reference
from .core.probe_spec import ProbeSpec

_REGISTERED: dict[str, ProbeSpec] = {}
#: what a probe adds to the project's shared commands, by name: no two probes may take the same name
EXTRAS = ("commands", "api", "import_formats", "export_formats")
#: the formats the project has of its own, outside every probe's spec: kind -> name -> the module that holds it
#: (`analysis.export_format.JSONL`). No probe may take one's name: `--help` would show its text while ours runs.
BUILTIN_FORMATS: dict[str, dict[str, str]] = {"import_formats": {}, "export_formats": {"jsonl": "analysis.export"}}


def register_probe(spec: ProbeSpec) -> ProbeSpec:
    """Add a probe; a name, alias or builder registered twice must be the same spec, and no two probes
    may add the same command, `probes.api` name, import or export format, nor a format the project has of
    its own (`BUILTIN_FORMATS`); a refusal names the name and the module that holds it."""
    taken = {alias: name for name, known in _REGISTERED.items() for alias in (name, *known.aliases)}
    for alias in (spec.name, *spec.aliases):
        if alias in taken and _REGISTERED[taken[alias]] != spec:
            raise ValueError(f"probe name {alias!r} is registered already, by {taken[alias]!r}")
    builders = {known.builder: name for name, known in _REGISTERED.items()}
    if spec.builder in builders and _REGISTERED[builders[spec.builder]] != spec:
        raise ValueError(f"builder {spec.builder!r} is registered already, by probe {builders[spec.builder]!r}")
    for kind in EXTRAS:
        owners = {name: f"the project's own, in {module}" for name, module in BUILTIN_FORMATS.get(kind, {}).items()}
        for known in _REGISTERED.values():
            if known.name != spec.name:
                owners.update({name: f"{known.name!r}, in {_module_of(v)}" for name, v in getattr(known, kind).items()})
        for name in getattr(spec, kind):
            if name in owners:
                raise ValueError(f"probe {spec.name!r}: {kind} name {name!r} is registered already, by {owners[name]}")
    _REGISTERED[spec.name] = spec
    if spec.assets is not None:
        add_assets(spec.assets)
    return spec


def _module_of(extra: Any) -> str:
    """The module that holds a probe's command, API name or format (its "module:attribute" reference)."""
    return str(getattr(extra, "format", extra)).partition(":")[0]


def probe_extras(kind: str) -> dict[str, Any]:
    """Every probe's `commands`, `api`, `import_formats` or `export_formats` in one mapping, in registry order."""
    return {name: target for spec in probes().values() for name, target in getattr(spec, kind).items()}


def probe_format(kind: str, name: str) -> Any:
    """The format object of `--format NAME` (`kind`: "import_formats" or "export_formats"), from the probe that
    declares it, imported on first use; one whose object names another format is refused (its rows or files
    would be recorded under the wrong format). A plugin's format comes guarded (`promptgen.core.plugins.PluginCode`):
    an exception its code raises is one line naming the format and the plugin's module, not a traceback."""
    target = probe_extras(kind)[name].format
    module = target.partition(":")[0]
    if not is_plugin_module(module):
        fmt = resolve_reference(target)
    else:  # a plugin's: whatever its code raises, on import or on use, is one line naming it (`PluginCode`)
        label = f"--format {name} (plugin {module})"
        fmt = PluginCode(label, plugin_call(label, f"importing {target}", resolve_reference, target))
    if fmt.name != name:
        raise ProbeError(f"--format {name}: {target} is format {fmt.name!r}")
    return fmt


def probes() -> dict[str, ProbeSpec]:
    """name -> spec, in sweep and report order (rank, then registration)."""
    return dict(sorted(_REGISTERED.items(), key=lambda item: item[1].rank))


def probe_names(given: Sequence[str]) -> list[str]:
    """`--probe` values (names or aliases) as dataset names, in registry order; all when none is given."""
    known = probes()
    if not given:
        return list(known)
    aliases = {alias: name for name, spec in known.items() for alias in spec.aliases}
    names = [aliases.get(p, p) for p in given]
    unknown = [p for p, n in zip(given, names, strict=True) if n not in known]
    if unknown:
        listed = ", ".join(sorted({*known, *aliases}))
        raise ProbeError(f"--probe {unknown[0]!r} is not a probe (known: {listed})")
    return [p for p in known if p in names]


def probe_choices() -> str:
    """The `--probe` values for `--help`: each name, with its aliases in brackets."""
    return ", ".join(f"{n} ({', '.join(s.aliases)})" if s.aliases else n for n, s in probes().items())


def spec_of_builder(builder: str, recipe: Path | str | None = None) -> ProbeSpec:
    """The probe whose drafter answers a recipe's `builder:` value."""
    for spec in probes().values():
        if spec.builder == builder:
            return spec
    known = sorted(spec.builder for spec in probes().values())
    raise RecipeError(f"{recipe}: unknown builder {builder!r}; known: {known}")


def _discover() -> None:
    """Register the `SPEC` of every package of `promptgen` that has a `spec.py` (the built-in probes)."""
    here = Path(__file__).parent
    for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda i: i.name):
        if info.ispkg and (here / info.name / "spec.py").is_file():
            register_probe(importlib.import_module(f"{__package__}.{info.name}.spec").SPEC)


_discover()
