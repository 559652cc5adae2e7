"""The probes by name: one registry that the sweep, the headlines and the report loop over.

A probe is a `ProbeSpec`: the dataset its recipe builds (`builders/<name>.yaml`, whose builder
is registered in `promptgen.build.BUILDERS`), the other names `--probe` accepts, the report
section its tables go to (by their name prefix) and the headline table that opens it. The
order of registration is the order a sweep runs the probes and the report shows them.

A new probe is a builder (promptgen), a recipe, its analysis tables, and one
`register_probe(ProbeSpec(...))` here or in a plugin module named in `PROBES_PLUGINS`
(docs/ARCHITECTURE.md, "Extending").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from promptgen.core.errors import ProbeError
from promptgen.core.plugins import load_plugins
from promptgen.empathy.synthetic import write_synthetic_corpus

from .headlines import Run, attribution_headline, empathy_headline, run_labels, trust_game_headline

#: the report section of tables no probe claims (refusals, provenance)
OVERVIEW = "Overview"

Headline = Callable[[Mapping[str, pd.DataFrame], Mapping[Run, str]], "pd.DataFrame | None"]


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
    #: the compact table that opens its report section: (tables, run labels) -> table or None
    headline: Headline | None = None
    #: the source folder its recipe reads that is not redistributed; when `--sources` lacks it,
    #: a sweep builds from `synthetic_sources(folder)` instead and says its results test the pipeline only
    private_source: str | None = None
    synthetic_sources: Callable[[Path], Path] | None = None


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


def section_headlines(tables: Mapping[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Section name -> its headline table (sections without the source table are left out)."""
    labels = run_labels(tables)
    out = {}
    for spec in PROBES.values():
        if spec.headline is None:
            continue
        frame = spec.headline(tables, labels)
        if frame is not None and not frame.empty:
            out[spec.section] = frame.replace([np.inf, -np.inf], np.nan)
    return out


register_probe(ProbeSpec("talent-or-luck", "Attribution", "attribution_", headline=attribution_headline))
register_probe(
    ProbeSpec("trust-game-names", "Trust Game", "trust_game_", aliases=("trust-game",), headline=trust_game_headline)
)
register_probe(
    ProbeSpec(
        "intergroup-empathy",
        "Empathy",
        "empathy_",
        headline=empathy_headline,
        private_source="crowd-envent",
        synthetic_sources=write_synthetic_corpus,
    )
)

load_plugins()  # PROBES_PLUGINS: third-party modules that register their own probes (or backends)
