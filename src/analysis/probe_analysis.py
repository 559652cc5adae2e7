"""What a probe's analysis is given and what it returns (`ProbeTables`), and the helpers its tables share.

A probe's `ProbeSpec.analysis` names its `analysis.probe_part.ProbeAnalysis` (light: section,
metrics, options, export formats), whose `tables()` returns its `ProbeTables`. The pipeline
(`analysis.pipeline.compute` and `draw`) and the report call, for each registered probe:

- `steps(rows, options) -> list[AnalysisStep]`: `rows` is `probe` value -> config -> joined rows,
  for the values the spec's `row_probes` lists and the results hold; each step computes some of
  the probe's tables, and one that fails (`ProbeError`, `ValueError`, `KeyError`) is a `problems`
  row of the report, named by the step, not a crash;
- `figures(tables, options) -> list[(file stem, Figure)]`, shown in the probe's report section;
- `headline(tables, run labels) -> DataFrame | None`: the compact table that opens the section;
- `descriptions` (table -> what it is), `headline_tables` (opened in the report), and optionally
  `section_notes` (table-name prefix -> a note above the section's tables) and
  `table_note(name, options) -> HTML | None`.

`options` is an `AnalysisOptions`: the options every probe shares (seed, number score, α) and each
probe's own (`ProbeAnalysis.options`, read as `options.probe(Class)`; `analysis.probe_options`).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from promptgen.core.errors import ProbeError
from promptgen.core.flags import flag_name

from .columns import NUMBER_SCORES, RUN_COLUMNS, NumberScore
from .headlines import Run, with_run_label
from .probe_options import analysis_flags, option_classes

T = TypeVar("T")

#: score used for number items: the expected value of the distribution when the run read one,
#: else the number parsed from generated text
AUTO_SCORE = "auto"


@dataclass(frozen=True)
class AnalysisOptions:
    """What the analysis computes with; recorded in the report.

    `seed`, `score` and `alpha` are every probe's; `probes` holds the probes' own options, one object of
    each class a probe's analysis declares (`ProbeAnalysis.options`), which a probe's module reads with
    `probe(Class)`. `from_flags` makes one from flag values, as `probes analyze` does.
    """

    #: the permutation tests' and the t-SNE layout's seed
    seed: int = 0
    #: number items: auto | expected_value | argmax_value | parsed_value
    score: str = AUTO_SCORE
    alpha: float = 0.05
    #: the probes' own options (one object per options class; a probe without one here gets its defaults)
    probes: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        if self.score not in (AUTO_SCORE, *NUMBER_SCORES):
            raise ProbeError(f"--score must be one of {', '.join((AUTO_SCORE, *NUMBER_SCORES))}, got {self.score!r}")
        object.__setattr__(self, "probes", tuple(self.probes))

    def probe(self, options: type[T]) -> T:
        """A probe's own options: the object of that class given here, else the class's defaults."""
        given = next((o for o in self.probes if isinstance(o, options)), None)
        return options() if given is None else given

    @classmethod
    def from_flags(
        cls, *, seed: int = 0, score: str = AUTO_SCORE, alpha: float = 0.05, **flags: Any
    ) -> AnalysisOptions:
        """The options of `probes analyze`'s flags: each of `flags` goes to every probe declaring it (None: its
        default); a name no probe declares is one line listing the ones they do."""
        declared = analysis_flags()
        if unknown := sorted(set(flags) - set(declared)):
            owners = [spec.name for spec, _ in option_classes()]
            own = "; ".join(
                f"{owner}: {', '.join(f.declaration for g in declared.values() for f in g if f.owner == owner)}"
                for owner in owners
            )
            raise ProbeError(
                f"{', '.join(flag_name(n) for n in unknown)}: no probe takes this analysis option "
                f"(theirs: {own or 'none'})"
            )
        chosen = [
            options(**{f.name: flags[f.name] for f in fields(options) if flags.get(f.name) is not None})
            for _, options in option_classes()
        ]
        return cls(seed=seed, score=score, alpha=alpha, probes=tuple(chosen))


@dataclass(frozen=True)
class AnalysisStep:
    """Some of a probe's tables: `run()` computes them; `name` and `configs` name a failure in the report."""

    name: str
    configs: Iterable[str]
    run: Callable[[], dict[str, pd.DataFrame]]


def number_score(frame: pd.DataFrame, score: str) -> NumberScore:
    """The column that holds a number item's answer for this run: `auto` picks the expected
    value where the run read distributions, else the parsed generated number."""
    if score in NUMBER_SCORES:
        return score
    if score != AUTO_SCORE:  # `AnalysisOptions` refuses it first, with the flag's line
        raise KeyError(score)
    if "expected_value" in frame.columns and frame["expected_value"].notna().any():
        return "expected_value"
    return "parsed_value"


def per_run(frame: pd.DataFrame, fn: Callable[[pd.DataFrame], pd.DataFrame | None]) -> pd.DataFrame:
    """`fn(run rows)` per run, concatenated: each run may need its own answer column."""
    parts = [fn(g) for _, g in frame.groupby(list(RUN_COLUMNS), sort=False, dropna=False)]
    parts = [p for p in parts if p is not None and not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


#: docs/DESIGN.md section 6: statistics with refused items left out (the papers' numbers) and kept
#: (their renormalised answer used anyway), named as attribution's `refused_items` column
REFUSAL_VARIANTS: tuple[tuple[str, bool], ...] = (("excluded", False), ("included", True))


def variant_tables(build: Callable[[bool], dict[str, pd.DataFrame]]) -> dict[str, pd.DataFrame]:
    """`build(keep_refused)` -> {name: table} for both variants, stacked with `refused_items` first."""
    out: dict[str, list[pd.DataFrame]] = {}
    for label, keep in REFUSAL_VARIANTS:
        for name, table in build(keep).items():
            out.setdefault(name, []).append(table.assign(refused_items=label))
    return {
        name: (lambda t: t[["refused_items", *[c for c in t.columns if c != "refused_items"]]])(
            pd.concat(parts, ignore_index=True)
        )
        for name, parts in out.items()
    }


def figure_variant(
    table: pd.DataFrame, companion: pd.DataFrame | None, value: str, *, keys: list[str], mark: str
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The rows a figure shows: refused items left out (the papers' numbers), except for a matrix
    with no value at all that way (a model that refuses every item), which is drawn from the
    `included` variant with its `mark` column (setting, variant) suffixed `(refused kept)`, so the
    figure says what it shows. `keys` name one figure's rows; `companion` (e.g. the cell tests of
    the same matrices) follows the same choice."""
    if "refused_items" not in table.columns:
        return table, companion
    keys = [k for k in keys if k in table.columns]
    excluded = table[table["refused_items"] == "excluded"]
    answered = excluded.groupby(keys, dropna=False)[value].apply(lambda v: v.notna().any())
    empty = {k if isinstance(k, tuple) else (k,) for k, ok in answered.items() if not ok}

    def choose(frame: pd.DataFrame | None) -> pd.DataFrame | None:
        if frame is None or "refused_items" not in frame.columns:
            return frame
        kept = np.array([k in empty for k in zip(*(frame[c] for c in keys), strict=True)], dtype=bool)
        chosen = frame["refused_items"].to_numpy() == np.where(kept, "included", "excluded")
        rows = frame[chosen].drop(columns="refused_items").reset_index(drop=True)
        marked = kept[chosen]
        rows[mark] = np.where(marked, rows[mark].astype(str) + " (refused kept)", rows[mark])
        return rows

    return choose(table), choose(companion)


def has_rows(tables: dict[str, pd.DataFrame], name: str) -> bool:
    """Whether `tables` holds a non-empty table `name` (a figure is drawn only from one)."""
    table = tables.get(name)
    return table is not None and not table.empty


def headline_rows(tables: Mapping[str, pd.DataFrame], name: str, labels: Mapping[Run, str]) -> pd.DataFrame | None:
    """The rows of table `name` a headline shows: refused items left out (the papers' numbers), each run as
    its short label; None when there are none."""
    table = tables.get(name)
    if table is None or table.empty:
        return None
    if "refused_items" in table.columns:
        table = table[table["refused_items"] == "excluded"].drop(columns="refused_items")
    return with_run_label(table, labels) if not table.empty else None


Figures = list[tuple[str, Any]]


@dataclass(frozen=True, eq=False)
class ProbeTables:
    """What a probe's analysis computes and how the report shows it (this module's docstring says the contract)."""

    steps: Callable[[Mapping[str, dict[str, pd.DataFrame]], AnalysisOptions], list[AnalysisStep]]
    figures: Callable[[dict[str, pd.DataFrame], AnalysisOptions], Figures]
    headline: Callable[[Mapping[str, pd.DataFrame], Mapping[Run, str]], pd.DataFrame | None]
    #: table -> what it is, shown above it
    descriptions: Mapping[str, str]
    #: the tables opened in the report: the paper's headline results
    headline_tables: tuple[str, ...] = ()
    #: table-name prefix -> a note above the section's tables when it has tables of that prefix
    section_notes: Mapping[str, str] = field(default_factory=dict)
    #: HTML above a table (`Markup`), or None
    table_note: Callable[[str, AnalysisOptions], Any] | None = None
