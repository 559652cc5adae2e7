"""A fourth probe that exists only in the tests: registered from here, nothing in src/ touched.

Its files, all of them:

- `tests/fake_probe.py` (this module): its `ProbeSpec`, its drafter, its analysis (`ProbeAnalysis`, `ProbeTables`)
  and its own command, API name and reader (`ProbeCommands`);
- `tests/fake_probe_files/builders/fake_probe.yaml`: its recipe (found through its spec's `assets`);
- `tests/fake_probe_files/cards/fake_probe.md.j2`: its dataset card (the same);
- `tests/fake_probe_files/sources/fake-statements/statements.csv`: its source (`--sources`).

Named in `PROBES_PLUGINS`, or installed with a `social_bias_probes` entry point naming it, it is
part of every `probes` command; imported, it is registered. Its
metric: the probability the model gives the choice it agrees with, per group of the statement.
It has a command of its own, `probes fake-groups DATASET` (`probes.api.fake_groups`), as the
Trust Game has `curate-pairs`; a release format, `probes import --format fake-release`
(another team's `answers.csv`), as the Talent-or-Luck release has its scorer files; and an export
format, `probes export --format fake-agreement-csv`, its default for its results; and an analysis
option of its own, `probes analyze --fake-round N` (`FakeOptions`), as Talent-or-Luck has
`--release-rounding`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import pandas as pd
import typer
from datasets import Value
from matplotlib.figure import Figure

from analysis.columns import RUN_COLUMNS
from analysis.export_format import ExportFiles, ExportRows
from analysis.headlines import with_run_label
from analysis.probe_analysis import AnalysisOptions, AnalysisStep, ProbeTables
from analysis.probe_part import ProbeAnalysis
from probes.importer.common import ParsedFile, SourceFile, empty_row, row_error
from probes.probe_part import ProbeCommands
from promptgen.core.build_options import BuildOptions
from promptgen.core.contract import contract_row, item_features, user_messages
from promptgen.core.errors import ProbeError
from promptgen.core.flags import option_flag
from promptgen.core.probe_spec import ProbeSpec
from promptgen.core.release_format import ReleaseFormat
from promptgen.hub.draft import DatasetDraft
from promptgen.hub.folder import ConfigData, row_batches
from promptgen.probe_registry import register_probe
from runners.scoring.settings import ScoringSettings, scoring_settings

NAME, SECTION, PREFIX, ROWS = "fake-probe", "Fake probe", "fake_probe_", "fake"
FILES = Path(__file__).resolve().parent / "fake_probe_files"
SCORES = f"{PREFIX}scores"
#: its metrics as `probes analyze --help` lists them
METRICS = f"the probability the model gives the choice it agrees with, per group ({SCORES})."
CHOICES, TYPES = ["yes", "no"], ["agree", "disagree"]


# ----------------------------------------------------------------------------- the dataset


def prompt_of(statement: str, question: str) -> str:
    return f"Statement: {statement}\n{question}\nA. yes\nB. no\nAnswer:"


def draft(recipe: Any, sources: Mapping[str, Any], options: BuildOptions) -> DatasetDraft:
    """One config, `items`: a choice item per statement, with the statement's group."""
    with open(sources["statements"].path, encoding="utf-8", newline="") as f:
        statements = list(csv.DictReader(f))
    question = recipe.parameters["question"]
    features = item_features({"group": Value("string")})

    def rows() -> Iterator[dict[str, Any]]:
        for s in statements:
            prompt = prompt_of(s["statement"], question)
            row = contract_row(
                f"fake.{s['id']}", ROWS, "choice", prompt, user_messages(prompt), choices=CHOICES, choice_types=TYPES
            )
            yield {**row, "group": s["group"]}

    items = ConfigData(
        "items", features, lambda: row_batches(rows(), features), "One row per statement.", len(statements)
    )
    return DatasetDraft(options.dataset_name(recipe.name), [items], dict(recipe.parameters))


# ----------------------------------------------------------------------------- its analysis


def agreement(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean probability of the `agree` choice (found by its type, not its place) per run and group."""
    p_agree = [
        list(p)[list(t).index("agree")] for t, p in zip(frame["choice_types"], frame["choice_probs"], strict=True)
    ]
    keys = [*RUN_COLUMNS, "group"]
    out = frame[keys].assign(p_agree=p_agree).groupby(keys, sort=True)["p_agree"].agg(["mean", "count"])
    return out.rename(columns={"mean": "p_agree", "count": "n"}).reset_index()


@dataclass(frozen=True)
class FakeOptions:
    """Its own analysis option: `probes analyze` gains `--fake-round` from it (`ProbeAnalysis.options`)."""

    round_to: int | None = option_flag(
        "decimals fake_probe_scores rounds p_agree to (default: full precision).", flag="--fake-round", min=0
    )


def steps(rows: Mapping[str, dict[str, pd.DataFrame]], options: AnalysisOptions) -> list[AnalysisStep]:
    by_config = rows[ROWS]
    joined = pd.concat(list(by_config.values()), ignore_index=True)
    decimals = options.probe(FakeOptions).round_to

    def scores() -> dict[str, pd.DataFrame]:
        table = agreement(joined)
        return {SCORES: table if decimals is None else table.assign(p_agree=table["p_agree"].round(decimals))}

    return [AnalysisStep("fake", by_config, scores)]


def figures(tables: dict[str, pd.DataFrame], options: AnalysisOptions) -> list[tuple[str, Figure]]:
    table = tables.get(SCORES)
    if table is None or table.empty:
        return []
    figure = Figure(figsize=(4, 3))
    ax = figure.subplots()
    ax.bar(table["group"], table["p_agree"])
    ax.set_ylabel("p(agree)")
    return [(f"{PREFIX}agreement", figure)]


def headline(tables: Mapping[str, pd.DataFrame], labels: Mapping) -> pd.DataFrame | None:
    """The mean agreement per run: what the fake probe's report section opens with."""
    table = tables.get(SCORES)
    if table is None or table.empty:
        return None
    shown = with_run_label(table, labels)
    return shown.groupby("run", sort=True)["p_agree"].mean().rename("mean p(agree)").reset_index()


DESCRIPTIONS = {SCORES: "Mean probability of agreeing with the statements, per group."}
HEADLINE_TABLES = (SCORES,)


# ----------------------------------------------------------------------------- its own command


def fake_groups(dataset: Path) -> dict[str, int]:
    """Statements per group of a built fake-probe folder: the probe's own step (`probes.api.fake_groups`)."""
    files = sorted((Path(dataset) / "data" / "items").glob("*.parquet"))
    return pd.concat([pd.read_parquet(f) for f in files])["group"].value_counts().sort_index().to_dict()


def fake_groups_cmd(
    dataset: Annotated[Path, typer.Argument(help="A fake-probe folder from probes build.", file_okay=False)],
) -> None:
    """Count the fake probe's statements per group (a probe's own command, from its spec)."""
    for group, n in fake_groups(dataset).items():
        print(f"{group}\t{n}")


# ----------------------------------------------------------------------------- another team's released answers


class FakeRelease:
    """`answers.csv` (id, p_yes, p_no): another team's probabilities for the items (`probes import`)."""

    name = "fake-release"
    backend = f"import:{name}"
    layout = "answers.csv with columns id, p_yes, p_no"

    def scoring(self) -> tuple[ScoringSettings, bool]:
        return scoring_settings("sentence"), False

    def configs(self) -> Collection[str]:
        return ("items",)

    def discover(self, folder: Path, source_model: str | None) -> list[SourceFile]:
        if source_model is not None:
            raise ProbeError(f"--format {self.name} has no model folders")
        path = folder / "answers.csv"
        if not path.is_file():
            raise ProbeError(f"{folder}: no answers.csv (--format {self.name} reads {self.layout})")
        return [SourceFile(path, "answers.csv", "items")]

    def prepare(self, prompts: Any) -> dict[str, int]:
        return {item: k for k, item in enumerate(prompts.dataset["id"])}

    def parse(self, source: SourceFile, data: bytes, prompts: Any, index: dict[str, int]) -> ParsedFile:
        frame = pd.read_csv(io.BytesIO(data), dtype={"id": str})
        for row, item in enumerate(frame["id"]):
            if item not in index:
                raise row_error(source, row, "id", f"{item!r} is no item of {prompts.path}")
        for row, (yes, no) in enumerate(zip(frame["p_yes"], frame["p_no"], strict=True)):
            if not (0 <= yes <= 1 and 0 <= no <= 1 and abs(yes + no - 1) < 1e-9):
                raise row_error(source, row, "p_yes", f"{yes!r} and p_no {no!r} are not a distribution")

        def rows() -> list[dict[str, Any]]:
            out = []
            for item, yes, no in zip(frame["id"], frame["p_yes"], frame["p_no"], strict=True):
                row = empty_row(item, self.backend)
                row.update(choice_probs=[float(yes), float(no)], chosen_index=int(no > yes))
                out.append(row)
            return out

        return ParsedFile(np.array([index[item] for item in frame["id"]], dtype=np.int64), rows)


FORMAT = FakeRelease()


class FakeAgreementCsv:
    """`agreement.csv`: the agreement table of the exported results, for another tool (`probes export`)."""

    name = "fake-agreement-csv"
    rounds = False
    files = ("agreement.csv",)
    folders: tuple[str, ...] = ()

    def export(self, rows: ExportRows) -> ExportFiles:
        others = sorted(set(rows.by_probe) - {ROWS})
        if others:
            raise ProbeError(f"results {rows.results}: {others[0]} rows are not the fake probe's")
        table = agreement(pd.concat(list(rows.by_probe[ROWS].values()), ignore_index=True))
        return ExportFiles({"agreement.csv": table.to_csv(index=False)}, {"agreement.csv": len(table)}, ["items"])


EXPORT = FakeAgreementCsv()


#: its analysis, as its spec names it (`ProbeSpec.analysis`): this module is its tables' module too
ANALYSIS = ProbeAnalysis(
    section=SECTION,
    tables=lambda: TABLES,
    metrics=METRICS,
    options=FakeOptions,
    export_formats={"fake-agreement-csv": ReleaseFormat(f"{__name__}:EXPORT", "the agreement table as CSV")},
)
TABLES = ProbeTables(
    steps=steps, figures=figures, headline=headline, descriptions=DESCRIPTIONS, headline_tables=HEADLINE_TABLES
)
#: its own command, API name and release reader (`ProbeSpec.commands`)
COMMANDS = ProbeCommands(
    commands={"fake-groups": f"{__name__}:fake_groups_cmd"},
    api={"fake_groups": f"{__name__}:fake_groups"},
    import_formats={"fake-release": ReleaseFormat(f"{__name__}:FORMAT", "another team's answers.csv")},
)

SPEC = register_probe(
    ProbeSpec(
        name=NAME,
        aliases=("fake",),
        builder="fake",
        draft=f"{__name__}:draft",
        analysis=f"{__name__}:ANALYSIS",
        commands=f"{__name__}:COMMANDS",
        table_prefix=PREFIX,
        row_probes=(ROWS,),
        assets=str(FILES),
    )
)
