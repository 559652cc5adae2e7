"""What the project knows of one probe, in one record: how its dataset is built and how its results are read.

A probe is a `ProbeSpec`. The built-in probes each declare theirs in their own package
(`promptgen/<package>/spec.py`, a module-level `SPEC`), found there by `promptgen.probe_registry`;
a third-party probe registers its spec from a plugin (`promptgen.core.plugins`). Nothing else in
the project names a probe: the build, the analysis, its report and the sweep loop over the
registry. The bottom stage's functions are named as references (module and attribute) and imported
on first use, so listing the probes in `--help` imports neither pandas nor `datasets`. The upper
stages' parts are two typed objects a spec points to, as `demo` points to a `DemoPlan`: its
`analysis.probe_part.ProbeAnalysis` and its `probes.probe_part.ProbeCommands`; a spec in
`promptgen` names them without importing upwards, and the stage that uses one resolves it once and
checks its type.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ProbeSpec:
    """One probe: its dataset's recipe and builder, the rows it writes, and its analysis."""

    #: the dataset's name: its recipe's `name` (builders/*.yaml) and its folder under `probes build --out`
    name: str
    #: the recipe's `builder:` value that this probe's drafter answers
    builder: str
    #: "module:function" (recipe, resolved sources, BuildOptions) -> DatasetDraft
    draft: str
    #: its analysis (`analysis.probe_part.ProbeAnalysis`: section, metrics, options, export formats, and the
    #: tables it computes), as a reference "module:attribute" (the stage above resolves and checks it)
    analysis: str
    #: its analysis tables' names start with this
    table_prefix: str
    #: the `probe` values of the rows its analysis reads (rows with other values are reported as refusals only)
    row_probes: tuple[str, ...]
    #: other names `--probe` accepts (a recipe's short name)
    aliases: tuple[str, ...] = ()
    #: the build options its drafter takes beyond `full` and `configs`: `max_events` (a dataset of events) and
    #: the names its own derive steps give what they add (`BuildOptions.derived`); another is refused before any work
    build_options: tuple[str, ...] = ()
    #: "module:function" (recipe, resolved sources) -> report dict, for `probes lint`; None: no lint
    lint: str | None = None
    #: where it comes in a sweep and in the report (lower first; equal ranks keep registration order)
    rank: int = 100
    #: the source folder its recipe reads that is not redistributed; when `--sources` lacks it, a sweep
    #: builds from the folder "module:function" `synthetic_sources(folder)` writes, and says its results
    #: test the pipeline only
    private_source: str | None = None
    synthetic_sources: str | None = None
    #: "module:attribute" of its `DemoPlan` (what `probes demo` builds and scores of it); None: not in the demo
    demo: str | None = None
    #: its own commands, `probes.api` names and release readers (`probes.probe_part.ProbeCommands`), as a
    #: reference "module:attribute"; None: it has none
    commands: str | None = None
    #: what a sample of its configs draws (DESIGN 9): the first unit whose columns a config has is that
    #: config's; a config with none of them is taken whole by a sample (the Trust Game's small sets)
    sample_units: tuple[SampleUnit, ...] = ()
    #: a folder holding its recipe (`builders/*.yaml`) and card template (`cards/`), for a probe whose files are
    #: not in the project's folders (a plugin package's own data): searched after `PROBES_BUILDERS` and
    #: `PROBES_CARDS`, before the project's own (`promptgen.assets`). None: the project's folders hold them
    assets: str | None = None

    def sample_unit(self, columns: Iterable[str]) -> SampleUnit | None:
        """The unit a sample of a config with these columns draws; None: a sample takes all its rows."""
        have = set(columns)
        return next((unit for unit in self.sample_units if set(unit.columns) | set(unit.strata) <= have), None)

    @classmethod
    def in_project(cls, package: str, **fields: Any) -> ProbeSpec:
        """A probe of the project's own, laid out as the project lays them out (`fields` say the rest).

        `promptgen/<leaf>/` holds its drafter (`dataset:draft`) and demo plan (`demo:DEMO`), its
        recipe's `builder:` is `<leaf>`, and its parts are the packages of the same name above:
        `analysis/<leaf>/spec.py` (`ANALYSIS`) and `probes/<leaf>/spec.py` (`COMMANDS`): one name in every
        stage, which is all the import contracts need of it (pyproject.toml, `probe-layers`). `package`
        is the spec module's `__package__`.
        """
        leaf = package.rpartition(".")[2]
        laid_out = {
            "builder": leaf,
            "draft": f"{package}.dataset:draft",
            "analysis": f"analysis.{leaf}.spec:ANALYSIS",
            "commands": f"probes.{leaf}.spec:COMMANDS",
            "demo": f"{package}.demo:DEMO",
        }
        return cls(**{**laid_out, **fields})

    def __post_init__(self) -> None:
        if bad := [option for option in self.build_options if not option.isidentifier()]:
            raise ValueError(f"probe {self.name!r}: build options are names (BuildOptions.derived keys), got {bad}")
        for part, reference in (("analysis", self.analysis), ("commands", self.commands)):
            if reference is not None and not _is_reference(reference):
                raise ValueError(f"probe {self.name!r}: {part} is a reference module:attribute, got {reference!r}")


def _is_reference(reference: str) -> bool:
    """A reference: a dotted module name, a colon and an attribute name."""
    module, colon, attribute = reference.partition(":")
    return bool(colon) and all(p.isidentifier() for p in (*module.split("."), attribute))


@dataclass(frozen=True)
class SampleUnit:
    """What one draw of a sample takes whole: the thing a probe's metrics average over (DESIGN 9).

    A sample keeps everything a metric compares across: every row whose `columns` hold a drawn
    unit's values is in it (every identity, name and option order of a template; every cell of
    every matrix of an event). `strata` are kept in their population shares by every prefix of the
    seeded order, so a nested sample stays balanced (events by emotion).
    """

    #: the unit's name as a sample is reported: "600 of 6,050 events"
    name: str
    #: the columns whose values name one unit
    columns: tuple[str, ...]
    #: the columns whose values the draw stratifies by
    strata: tuple[str, ...] = ()

    @property
    def plural(self) -> str:
        return f"{self.name}s"

    def __post_init__(self) -> None:
        if not self.columns:
            raise ValueError(f"sample unit {self.name!r}: a unit is named by at least one column")


@dataclass(frozen=True)
class DemoRun:
    """One config `probes demo` scores of a probe, on a subset of its rows."""

    config: str
    #: "module:function" (the config's rows as a `datasets.Dataset`, the plan's sizes) -> row positions; None: all
    rows: str | None = None
    #: None: the config's protocol (the paper's method). Else complete settings: the `scoring` preset
    #: (`runners.scoring.settings.scoring_settings`) with these `ScoringSettings` fields replaced
    settings: Mapping[str, Any] | None = None
    #: score only the first `limit` rows the protocol selects
    limit: int | None = None
    #: its results folder is `results/<probe name><results_suffix>`; one with a suffix is scored but not analysed
    results_suffix: str = ""


@dataclass(frozen=True)
class DemoPlan:
    """What `probes demo` does with one probe: how its dataset is built, and which subsets it scores.

    `note`, when given, is printed, shown on the index page and added to the probe's report; it is
    formatted with `{items}`, `{refused}` and `{results}` of the run whose results have a suffix
    (a side run on the paper's protocol, say), when there is one.
    """

    runs: tuple[DemoRun, ...]
    #: the demo's sizes (rows per cell, events, ...): the row selectors read them; a test may shrink them
    sizes: Mapping[str, int] = field(default_factory=dict)
    #: build options (its `build_options` and `configs`) the demo builds with
    build: Mapping[str, Any] = field(default_factory=dict)
    #: sizes also passed to the build under their own names (`max_events`, say)
    sized_build: tuple[str, ...] = ()
    note: str | None = None
