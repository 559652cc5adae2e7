"""The Python API: one function per `probes` command, the same calls the command line makes.

For notebooks and scripts that want what the CLI does without a subprocess::

    from probes import api

    built = api.build("talent-or-luck", out_dir="datasets", sources_dir="../shared/sources")
    summary = api.run(built.path, "single_actor", "HuggingFaceTB/SmolLM2-135M-Instruct", "results/smollm2",
                      settings=api.scoring_settings("sentence"), limit=40)
    analysis, report = api.analyze(built.path, ["results/smollm2"], "report")

| command | function | returns |
|---|---|---|
| `probes build` | `build` | `BuildResult` (folder, manifest) |
| `probes lint` | `lint` | `LintResult` (recipe, report) |
| `probes run` | `run` (`settings=scoring_settings(...)`, `load=LoadOptions(...)`) | `RunSummary` |
| `probes curate-pairs` | `curate_pairs` | `CurateResult` |
| `probes rewrite` | `rewrite` | `RewriteRun` |
| `probes analyze` | `analyze` | (`Analysis`, report folder) |
| `probes plan` | `plan(PlanRequest(...))` | the plan (tokens, FLOPs, GPU hours per config) |
| `probes publish` | `publish` | `PublishResult` |
| `probes demo` | `demo` | `DemoResult` |

Errors in the input raise `ProbeError` (the CLI prints its message as one line); a missing
optional dependency raises `MissingExtraError`, a `ProbeError` naming the extra to install.
Heavy libraries (torch, vLLM, Ray) are imported only by the calls that need them.
"""

from __future__ import annotations

from analysis.pipeline import Options as AnalysisOptions
from analysis.report import analyze_to as analyze
from promptgen.build import BuildResult, LintResult, build, lint
from promptgen.core.errors import ProbeError
from runners.extras import MissingExtraError
from runners.plan import PlanRequest
from runners.plan import make_plan as plan
from runners.score import LoadOptions
from runners.score import score as run
from runners.scoring_settings import ScoringSettings, scoring_settings
from runners.session import RunSummary

from .demo import run_demo as demo
from .derive import CurateResult, RewriteRun, curate_pairs, rewrite
from .publish import publish

__all__ = [
    "AnalysisOptions",
    "BuildResult",
    "CurateResult",
    "LintResult",
    "LoadOptions",
    "MissingExtraError",
    "PlanRequest",
    "ProbeError",
    "RewriteRun",
    "RunSummary",
    "ScoringSettings",
    "analyze",
    "build",
    "curate_pairs",
    "demo",
    "lint",
    "plan",
    "publish",
    "rewrite",
    "run",
    "scoring_settings",
]
