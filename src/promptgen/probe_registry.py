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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from .assets import add_assets
from .core.errors import ProbeError, RecipeError
from .core.probe_spec import ProbeSpec
from .core.release_format import ReleaseFormat

T = TypeVar("T")
_REGISTERED: dict[str, ProbeSpec] = {}
#: the formats the project has of its own, outside every probe's spec: kind -> name -> the module that holds it
#: (`analysis.export_format.JSONL`). No probe may take one's name: `--help` would show its text while ours runs.
BUILTIN_FORMATS: dict[str, dict[str, str]] = {"import_formats": {}, "export_formats": {"jsonl": "analysis.export"}}


def register_probe(spec: ProbeSpec) -> ProbeSpec:
    """Add a probe; a name, alias or builder registered twice must be the same spec. What its parts add to the
    project's shared commands (commands, `probes.api` names, formats) is checked where the parts are resolved
    (`merged_parts`), by the stage that owns them."""
    taken = {alias: name for name, known in _REGISTERED.items() for alias in (name, *known.aliases)}
    for alias in (spec.name, *spec.aliases):
        if alias in taken and _REGISTERED[taken[alias]] != spec:
            raise ValueError(f"probe name {alias!r} is registered already, by {taken[alias]!r}")
    builders = {known.builder: name for name, known in _REGISTERED.items()}
    if spec.builder in builders and _REGISTERED[builders[spec.builder]] != spec:
        raise ValueError(f"builder {spec.builder!r} is registered already, by probe {builders[spec.builder]!r}")
    _REGISTERED[spec.name] = spec
    if spec.assets is not None:
        add_assets(spec.assets)
    return spec


def merged_parts(kind: str, declared: Iterable[tuple[str, str, Mapping[str, T]]]) -> dict[str, T]:
    """Every probe's `kind` (its commands, `probes.api` names, import or export formats) in one mapping, in the
    order given (registry order): `declared` is (probe name, the reference of the part that declares them,
    name -> value). No two probes may take the same name, nor one the project has of its own
    (`BUILTIN_FORMATS`: `--help` would show a probe's text while ours runs); a refusal is one line naming the
    name, the part that takes it and the module that holds it."""
    owners = {name: f"the project's own, in {module}" for name, module in BUILTIN_FORMATS.get(kind, {}).items()}
    out: dict[str, T] = {}
    for probe, part, names in declared:
        for name, value in names.items():
            if name in owners:
                raise ProbeError(
                    f"probe {probe!r} ({part}): {kind} name {name!r} is registered already, by {owners[name]}"
                )
            owners[name] = f"{probe!r}, in {_module_of(value)}"
            out[name] = value
    return out


def _module_of(extra: Any) -> str:
    """The module that holds a probe's command or API name (a reference "module:attribute") or format (its
    `ReleaseFormat.format`, the same)."""
    target = extra.format if isinstance(extra, ReleaseFormat) else str(extra)
    return target.partition(":")[0]


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
