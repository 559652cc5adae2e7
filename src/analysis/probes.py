"""The probes by name: one registry that the sweep, the headlines and the report loop over.

A probe is a `ProbeSpec`: the dataset its recipe builds (`builders/<name>.yaml`, whose builder
is registered in `promptgen.build.BUILDERS`), the other names `--probe` accepts, the report
section its tables go to (by their name prefix) and the headline table that opens it. The
order of registration is the order a sweep runs the probes and the report shows them.

A new probe is a builder (promptgen), a recipe, its analysis tables, and one
`register_probe(ProbeSpec(...))` here or in a plugin module named in `PROBES_PLUGINS`
(docs/ARCHITECTURE.md, "Extending"). Functions are named as "module:function" and imported on
first use, so the CLI can list the probes in `--help` without importing pandas or `datasets`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from promptgen.core.errors import ProbeError
from promptgen.core.plugins import load_plugins, resolve_reference

#: the report section of tables no probe claims (refusals, provenance)
OVERVIEW = "Overview"


@dataclass(frozen=True)
class ProbeSpec:
    """What the pipeline's orchestration and report need to know of one probe."""

    #: the dataset's name: its recipe in builders/ and its folder under `probes build --out`
    name: str
    #: the report section its tables go to
    section: str
    #: its analysis tables' names start with this
    table_prefix: str
    #: other names `--probe` accepts (a recipe's short name)
    aliases: tuple[str, ...] = ()
    #: "module:function" of the compact table that opens its report section: (tables, run labels) -> table or None
    headline: str | None = None
    #: the source folder its recipe reads that is not redistributed; when `--sources` lacks it, a sweep
    #: builds from the folder "module:function" `synthetic_sources(folder)` writes, and says its results
    #: test the pipeline only
    private_source: str | None = None
    synthetic_sources: str | None = None


#: name -> spec, in sweep and report order
PROBES: dict[str, ProbeSpec] = {}


def register_probe(spec: ProbeSpec) -> ProbeSpec:
    """Add a probe; a name or alias registered twice must be the same spec."""
    taken = {alias: name for name, known in PROBES.items() for alias in (name, *known.aliases)}
    for alias in (spec.name, *spec.aliases):
        if alias in taken and PROBES[taken[alias]] != spec:
            raise ValueError(f"probe name {alias!r} is registered already, by {taken[alias]!r}")
    PROBES[spec.name] = spec
    return spec


def probe_names(given: Sequence[str]) -> list[str]:
    """`--probe` values (names or aliases) as dataset names, in registry order; all when none is given."""
    if not given:
        return list(PROBES)
    aliases = {alias: name for name, spec in PROBES.items() for alias in spec.aliases}
    names = [aliases.get(p, p) for p in given]
    unknown = [p for p, n in zip(given, names, strict=True) if n not in PROBES]
    if unknown:
        known = ", ".join(sorted({*PROBES, *aliases}))
        raise ProbeError(f"--probe {unknown[0]!r} is not a probe (known: {known})")
    return [p for p in PROBES if p in names]


def probe_choices() -> str:
    """The `--probe` values for `--help`: each name, with its aliases in brackets."""
    return ", ".join(f"{n} ({', '.join(s.aliases)})" if s.aliases else n for n, s in PROBES.items())


def section_of(table: str) -> str:
    """The report section of an analysis table: its probe's, by name prefix, else the overview."""
    for spec in PROBES.values():
        if table.startswith(spec.table_prefix):
            return spec.section
    return OVERVIEW


def sections() -> list[str]:
    """The report's sections in order: the overview, then each probe's."""
    return [OVERVIEW, *(spec.section for spec in PROBES.values())]


def section_headlines(tables: Mapping[str, Any]) -> dict[str, Any]:
    """Section name -> its headline table (sections without the source table are left out)."""
    import numpy as np

    from .headlines import run_labels

    labels = run_labels(tables)
    out = {}
    for spec in PROBES.values():
        if spec.headline is None:
            continue
        frame = resolve_reference(spec.headline)(tables, labels)
        if frame is not None and not frame.empty:
            out[spec.section] = frame.replace([np.inf, -np.inf], np.nan)
    return out


register_probe(
    ProbeSpec("talent-or-luck", "Attribution", "attribution_", headline=f"{__package__}.headlines:attribution_headline")
)
register_probe(
    ProbeSpec(
        "trust-game-names",
        "Trust Game",
        "trust_game_",
        aliases=("trust-game",),
        headline=f"{__package__}.headlines:trust_game_headline",
    )
)
register_probe(
    ProbeSpec(
        "intergroup-empathy",
        "Empathy",
        "empathy_",
        headline=f"{__package__}.headlines:empathy_headline",
        private_source="intergroup-empathy-release",
        synthetic_sources="promptgen.empathy.synthetic:write_synthetic_corpus",
    )
)

load_plugins()  # PROBES_PLUGINS: third-party modules that register their own probes (or backends)
