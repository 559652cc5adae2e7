"""What the project knows of one probe, in one record: how its dataset is built and how its results are read.

A probe is a `ProbeSpec`. The built-in probes each declare theirs in their own package
(`promptgen/<package>/spec.py`, a module-level `SPEC`), found there by `promptgen.probe_registry`;
a third-party probe registers its spec from a plugin (`promptgen.core.plugins`). Nothing else in
the project names a probe: the build, the analysis, its report and the sweep loop over the
registry. Functions and modules are named as strings ("module:function", "module") and imported
on first use, so listing the probes in `--help` imports neither pandas nor `datasets`, and a spec
in `promptgen` can name its analysis module without importing upwards.
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
    #: the module of its analysis (`analysis.<probe>`): `steps(rows, options)`, `figures(tables, options)`,
    #: `headline(tables, run labels)`, `DESCRIPTIONS`, `HEADLINE_TABLES`, optional `SECTION_NOTES`
    #: and `table_note(name, options)` (docs/EXTENDING.md)
    analysis: str
    #: the report section its tables go to
    section: str
    #: its analysis tables' names start with this
    table_prefix: str
    #: the `probe` values of the rows its analysis reads (rows with other values are reported as refusals only)
    row_probes: tuple[str, ...]
    #: what its analysis computes, a sentence for `probes analyze --help` (the help lists every probe's)
    metrics: str = ""
    #: "module:Class" of its own `probes analyze` options: a frozen dataclass of `promptgen.core.flags.option_flag`
    #: fields, in a module without pandas (the command line builds their flags for `--help`); its analysis reads
    #: the values as `options.probe(Class)`, and the report records them. None: it takes none
    analysis_options: str | None = None
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
    #: steps only this probe has (a model's results -> a new version of its dataset, say), as commands of
    #: `probes`: command name -> "module:function", a typer command, listed after `probes lint`
    commands: Mapping[str, str] = field(default_factory=dict)
    #: what `probes.api` offers of it, the functions its commands call and what they return:
    #: attribute name -> "module:attribute"
    api: Mapping[str, str] = field(default_factory=dict)
    #: released model outputs of its paper that `probes import --format NAME` turns into results: NAME -> format
    import_formats: Mapping[str, ReleaseFormat] = field(default_factory=dict)
    #: files of another tool that `probes export --format NAME` writes from its results: NAME -> format; the
    #: first is `probes export`'s default for its results
    export_formats: Mapping[str, ReleaseFormat] = field(default_factory=dict)
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
        recipe's `builder:` is `<leaf>`, and its analysis is the package of the same name,
        `analysis/<leaf>/` (`probe` the module): one name in both stages, which is all the import
        contracts need of it (pyproject.toml, `probe-layers`). `package` is the spec module's `__package__`.
        """
        leaf = package.rpartition(".")[2]
        laid_out = {
            "builder": leaf,
            "draft": f"{package}.dataset:draft",
            "analysis": f"analysis.{leaf}.probe",
            "demo": f"{package}.demo:DEMO",
        }
        return cls(**{**laid_out, **fields})

    @property
    def default_export(self) -> str | None:
        """`probes export`'s format for its results when none is named: its first export format (None: jsonl)."""
        return next(iter(self.export_formats), None)

    def __post_init__(self) -> None:
        if bad := [option for option in self.build_options if not option.isidentifier()]:
            raise ValueError(f"probe {self.name!r}: build options are names (BuildOptions.derived keys), got {bad}")


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


@dataclass(frozen=True)
class ReleaseFormat:
    """Another tool's files for a probe's results: `probes import --format NAME` reads them into its configs,
    `probes export --format NAME` writes them from its results."""

    #: "module:attribute" of the format, imported on first use: a reader (`probes.importer.common.ImportFormat`)
    #: or a writer (`analysis.export_format.ExportFormat`)
    format: str
    #: what it reads or writes, for `--help` (one sentence)
    help: str
