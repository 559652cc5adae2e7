"""The Python API: one function per `probes` command, the same calls the command line makes.

For notebooks and scripts that want what the CLI does without a subprocess::

    from probes import api

    built = api.build("talent-or-luck", out_dir="datasets", sources="../shared/sources")
    summary = api.run(built.path, "single_actor", "HuggingFaceTB/SmolLM2-135M-Instruct", "results/smollm2",
                      settings=api.scoring_settings("sentence"), limit=40)
    analysis, report = api.analyze(built.path, ["results/smollm2"], "report")

| command | function | returns |
|---|---|---|
| `probes build` | `build` (`sources=`: a folder or `SourceOptions`) | `BuildResult` (folder, manifest) |
| `probes lint` | `lint` | `LintResult` (recipe, report) |
| `probes run` | `run` (a `RunRequest`, or its fields); `run_many` (requests, or configs) | `RunSummary`; a list |
| `probes run --budget-hours` | `budget_sample`, then `run_many(..., sample=N)` | `BudgetSample` (N, hours) |
| `probes sweep` | `sweep(SweepRequest(RunRequest.each_config(model), out))` (`runs=`: `SweepRun`s) | `SweepResult` |
| `probes curate-pairs` | `curate_pairs` (the Trust Game's, from its spec) | `CurateResult` |
| `probes rewrite` | `rewrite` (the empathy probe's, from its spec) | `RewriteRun` |
| `probes analyze` | `analyze` (`AnalysisRequest(...)`, or its fields) | (`Analysis`, report folder) |
| `probes export` | `export(ExportRequest(...))` | `ExportResult` (folder, files and their rows) |
| `probes import` | `import_results(ImportRequest(...))` | `ImportResult` (folder, key, rows per config) |
| `probes plan` | `plan(PlanRequest(...))` | the plan (tokens, FLOPs, GPU hours per config); `plan_rows` tabulates it |
| `probes plan --precision` | `sample_for_precision`, then `PlanRequest(sample=N)` | `PrecisionSample` (N, the rows) |
| `probes publish` | `publish` | `PublishResult`; `plan_table` shows its file plan |
| `probes demo` | `demo` | `DemoResult` |
| `probes recipes` | `recipes` | a `RecipeEntry` per recipe in builders/ |

A probe's own commands and their functions are declared by its parts (`ProbeCommands.commands`, `.api`) and
resolved here by name, so a plugin probe's functions are attributes of `probes.api` too.

Errors in the input raise `ProbeError` (the CLI prints its message as one line); a missing
optional dependency raises `MissingExtraError`, a `ProbeError` naming the extra to install.
Heavy libraries (torch, vLLM, Ray) are imported only by the calls that need them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from probes.probe_part import probe_extras, resolve_parts
from promptgen.core.errors import ProbeError
from promptgen.core.plugins import load_extensions, resolve_reference

if TYPE_CHECKING:  # what each name below is, for readers and type checkers; imported on first use
    from analysis.export_files import ExportRequest, ExportResult, export
    from analysis.pipeline import AnalysisOptions, AnalysisRequest
    from analysis.report import analyze
    from promptgen.build import BuildResult, LintResult, build, lint
    from promptgen.recipe import Recipe
    from promptgen.sources import SourceOptions
    from runners.extras import MissingExtraError
    from runners.plan import PlanRequest, plan_rows
    from runners.plan.run_budget import BudgetSample, BudgetTerms, budget_sample
    from runners.plan.run_budget import check_local as check_budget_dataset
    from runners.results.summary import RunSummary
    from runners.run.request import LoadOptions, RunRequest
    from runners.run.runner import expand_configs, run, run_many
    from runners.scoring.settings import ScoringSettings, scoring_settings

    from .demo import demo
    from .importer import ImportRequest, ImportResult, import_results
    from .precision_plan import PrecisionSample, sample_for_precision
    from .publish import plan_table, publish
    from .sweep import SweepPlan, SweepRequest, SweepResult, SweepRun, sweep

#: where each name of the API is defined, as "module" or "module:attribute" (its name there). Imported when first
#: used (PEP 562), so a command imports what it calls: `probes import` of a 154 MB file peaked 59 MB higher when
#: every command's libraries (scipy among them) were loaded with this module (benchmarks/import_memory.py).
_HOMES = {
    **dict.fromkeys(["ExportRequest", "ExportResult", "export"], "analysis.export_files"),
    **dict.fromkeys(["AnalysisOptions", "AnalysisRequest"], "analysis.pipeline"),
    "analyze": "analysis.report",
    **dict.fromkeys(["BuildResult", "LintResult", "build", "lint"], "promptgen.build"),
    "SourceOptions": "promptgen.sources",
    "MissingExtraError": "runners.extras",
    **dict.fromkeys(["PlanRequest", "plan_rows"], "runners.plan"),
    **dict.fromkeys(["BudgetSample", "BudgetTerms", "budget_sample"], "runners.plan.run_budget"),
    "check_budget_dataset": "runners.plan.run_budget:check_local",
    **dict.fromkeys(["LoadOptions", "RunRequest"], "runners.run.request"),
    **dict.fromkeys(["expand_configs", "run", "run_many"], "runners.run.runner"),
    **dict.fromkeys(["ScoringSettings", "scoring_settings"], "runners.scoring.settings"),
    "RunSummary": "runners.results.summary",
    "demo": "probes.demo",
    **dict.fromkeys(["ImportRequest", "ImportResult", "import_results"], "probes.importer"),
    **dict.fromkeys(["PrecisionSample", "sample_for_precision"], "probes.precision_plan"),
    **dict.fromkeys(["plan_table", "publish"], "probes.publish"),
    **dict.fromkeys(["SweepPlan", "SweepRequest", "SweepResult", "SweepRun", "sweep"], "probes.sweep"),
}

load_extensions()  # the plugins' probes and backends, as the command line has them (their API names below)
resolve_parts()  # their parts, checked as the command line checks them

__all__ = [
    "AnalysisOptions",
    "AnalysisRequest",
    "BudgetSample",
    "BudgetTerms",
    "BuildResult",
    "ExportRequest",
    "ExportResult",
    "ImportRequest",
    "ImportResult",
    "LintResult",
    "LoadOptions",
    "MissingExtraError",
    "PlanRequest",
    "PrecisionSample",
    "ProbeError",
    "RecipeEntry",
    "RunRequest",
    "RunSummary",
    "ScoringSettings",
    "SourceOptions",
    "SweepPlan",
    "SweepRequest",
    "SweepResult",
    "SweepRun",
    "analyze",
    "budget_sample",
    "check_budget_dataset",
    "build",
    "demo",
    "expand_configs",
    "export",
    "import_results",
    "lint",
    "plan",
    "plan_rows",
    "plan_table",
    "publish",
    "recipes",
    "run",
    "run_many",
    "sample_for_precision",
    "scoring_settings",
    "sweep",
    *probe_extras("api"),
]


def __getattr__(name: str) -> Any:
    """A name of the API, imported from its home on first use (`_HOMES`), or a probe's own (`ProbeCommands.api`:
    `curate_pairs`, `rewrite`, ...); PEP 562."""
    home = _HOMES.get(name)
    if home is not None:
        module, _, attribute = home.partition(":")
        value = getattr(importlib.import_module(module), attribute or name)
        globals()[name] = value  # found once: the next use is a plain attribute
        return value
    target = probe_extras("api").get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return resolve_reference(target)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def plan(request: PlanRequest, *, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """`probes plan`: price a sweep (`runners.plan.make_plan`), and write it to `request.json_out` when given."""
    from runners.plan import make_plan, write_json

    priced = make_plan(request, progress=progress)
    if request.json_out is not None:
        write_json(priced, request.json_out)
    return priced


@dataclass(frozen=True)
class RecipeEntry:
    """One recipe of builders/: its name and file, and the recipe, or why it does not load."""

    name: str
    path: Path
    recipe: Recipe | None
    error: ProbeError | None = None


def recipes() -> list[RecipeEntry]:
    """`probes recipes`: every recipe in builders/, loaded (an invalid one is listed with its error, not raised)."""
    from promptgen.recipe import list_recipes, load_recipe

    entries = []
    for name, path in list_recipes().items():
        try:
            entries.append(RecipeEntry(name, path, load_recipe(str(path))))
        except ProbeError as exc:
            entries.append(RecipeEntry(name, path, None, exc))
    return entries
