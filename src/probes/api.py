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
| `probes sweep` | `sweep(SweepRequest(...), confirm=...)` (`runs=`: `SweepRun`s) | `SweepResult` |
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

A probe's own commands and their functions are declared by its spec (`ProbeSpec.commands`, `.api`) and
resolved here by name, so a plugin probe's functions are attributes of `probes.api` too.

Errors in the input raise `ProbeError` (the CLI prints its message as one line); a missing
optional dependency raises `MissingExtraError`, a `ProbeError` naming the extra to install.
Heavy libraries (torch, vLLM, Ray) are imported only by the calls that need them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.export_files import ExportRequest, ExportResult, export
from analysis.pipeline import AnalysisOptions, AnalysisRequest
from analysis.report import analyze
from promptgen.build import BuildResult, LintResult, build, lint
from promptgen.core.errors import ProbeError
from promptgen.core.plugins import resolve_reference
from promptgen.probe_registry import probe_extras
from promptgen.recipe import Recipe, list_recipes, load_recipe
from promptgen.sources import SourceOptions
from runners.extras import MissingExtraError
from runners.plan import PlanRequest, make_plan, plan_rows, write_json
from runners.plan.run_budget import BudgetSample, BudgetTerms, budget_sample
from runners.plan.run_budget import check_local as check_budget_dataset
from runners.request import LoadOptions, RunRequest
from runners.run import expand_configs, run, run_many
from runners.scoring.settings import ScoringSettings, scoring_settings
from runners.summary import RunSummary

from .demo import demo
from .importer import ImportRequest, ImportResult, import_results
from .precision_plan import PrecisionSample, sample_for_precision
from .publish import plan_table, publish
from .sweep import SweepPlan, SweepRequest, SweepResult, SweepRun, sweep

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
    """A probe's own API (`ProbeSpec.api`: `curate_pairs`, `rewrite`, ...), imported on first use (PEP 562)."""
    target = probe_extras("api").get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return resolve_reference(target)


def plan(request: PlanRequest, *, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """`probes plan`: price a sweep (`runners.plan.make_plan`), and write it to `request.json_out` when given."""
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
    entries = []
    for name, path in list_recipes().items():
        try:
            entries.append(RecipeEntry(name, path, load_recipe(str(path))))
        except ProbeError as exc:
            entries.append(RecipeEntry(name, path, None, exc))
    return entries
