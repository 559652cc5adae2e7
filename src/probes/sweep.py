"""`probes sweep`: a model's whole evaluation in one command: a priced plan, one model load, every config, reports.

1. Datasets: each probe's dataset from `--datasets DIR` (folders `probes build` wrote), or
   found or built from `--sources` by `probes.datasets` (builds go to a staging folder first, so
   a refused plan leaves nothing); through the API, each probe's folder by name.
2. Configs: every config a dataset declares its paper's protocol for (the item configs: see
   `promptgen.protocols`), narrowed by `probes` (dataset names) and `configs` (glob patterns);
   or the request's own `runs`, each a config with a row selector, settings, a limit and a
   results folder of its own (`probes demo` is such a sweep). Each is resolved as `probes run`
   resolves it (protocol with the flags given laid over it). With `budget_hours`, each dataset's
   `--sample` is what its share of the hours buys, priced as `probes plan` prices it, before the
   model loads (`runners.plan.run_budget.sweep_samples`).
3. Plan: the model loads once; each config is priced on the device it loaded on
   (`runners.plan.loaded`). A plan over `max_hours` is refused, and the caller's
   `confirm(plan)` decides whether to go on.
4. Run: each config in turn on the loaded model (`runners.run.runner.Runner`). Each is a resumable
   `probes run` into `OUT/results/<dataset>`: killed at any moment, the same command goes on
   where it stopped, and finished configs are skipped.
5. Analyse: each dataset into `OUT/report/<dataset>/report.html`; the per-config summary goes
   to `OUT/sweep.json` (no local paths).
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from functools import partial
from pathlib import Path
from typing import Any

from analysis.pipeline import analyze
from analysis.probes import section_headlines
from analysis.report import write_report
from promptgen.core.errors import ProbeError
from promptgen.core.files import atomic_write_text
from promptgen.core.outputs import Input, Output, Reference, check_output, holds_only
from promptgen.core.secrets import scrub_value
from promptgen.hub.read import read_build_manifest
from promptgen.probe_registry import probe_names
from promptgen.sources import SourceOptions
from runners.plan.loaded import SweepPlan, price_loaded
from runners.plan.run_budget import BudgetSample, BudgetTerms, sweep_samples
from runners.results.summary import RunSummary
from runners.run.request import ResolvedRun, RunRequest
from runners.run.runner import Runner, resolve_protocol, warnings_to
from runners.scoring.settings import ScoringSettings

from .datasets import find_datasets, find_or_build

SWEEP_JSON = "sweep.json"

#: a sweep folder: added to (resumed) only when it holds nothing but what a sweep writes
SWEEP_OUTPUT = Output(
    "sweep folder",
    owns=holds_only(required=[], allowed=["datasets", "results", "report", SWEEP_JSON]),
    replaces=False,
)


@dataclass(frozen=True)
class SweepRun:
    """One config a sweep scores, where the request names them (`SweepRequest.runs`, as `probes demo` does)."""

    config: str
    #: the config's rows (a `datasets.Dataset`, after its protocol's selection) -> the positions to score; None: all
    rows: Callable[[Any], Sequence[int]] | None = None
    #: complete settings for this config; None: the request's (else the config's protocol)
    settings: ScoringSettings | None = None
    #: score only the first `limit` rows (None: the request's `limit_per_config`)
    limit: int | None = None
    #: its results folder under OUT/results (None: the dataset's own, the one analysed)
    results: str | None = None


@dataclass(frozen=True)
class SweepRequest:
    """Everything `probes sweep` asks: how each config is scored (`run`), and which datasets and configs."""

    #: how every config is scored, as `probes run` scores one (`RunRequest.each_config(model, ...)`): the model and
    #: its load, the scoring flags, chat and `where` (None: each dataset's protocol), the rows (`limit`: the first N
    #: of each config, `sample`, `shard`) and the counts. Its dataset, config and results are each config's
    run: RunRequest
    out: str | Path
    #: a folder of built datasets, or each probe's built folder by name (found or built by the caller);
    #: None builds them from `sources` (a folder, else downloads)
    datasets: str | Path | Mapping[str, Path] | None = None
    sources: SourceOptions = field(default_factory=SourceOptions)
    probes: tuple[str, ...] = ()
    configs: tuple[str, ...] = ()
    mfu: float = 0.5
    max_hours: float | None = None
    #: instead of `run.sample`: each dataset's largest sample within its share of these hours (priced as `probes plan`
    #: on `gpu` at `mfu`: `runners.plan.run_budget.sweep_samples`)
    budget_hours: float | None = None
    gpu: str = "h100"
    #: each probe's configs to score (None: every config its dataset declares a protocol for, narrowed by `configs`)
    runs: Mapping[str, Sequence[SweepRun]] | None = None
    #: analyse each dataset into OUT/report/<dataset>/report.html
    reports: bool = True
    #: price the plan in hours (False: its items and tokens only, no rate measured; `max_hours` then refuses it)
    price: bool = True

    def __post_init__(self) -> None:
        # `probes` and `configs` may come as lists (repeated flags) or None (none given): tuples either way
        object.__setattr__(self, "probes", tuple(self.probes or ()))
        object.__setattr__(self, "configs", tuple(self.configs or ()))


@dataclass
class SweepResult:
    out: Path
    plan: SweepPlan
    summaries: list[tuple[str, RunSummary]]
    reports: dict[str, Path]
    wall_s: float
    #: datasets built from a synthetic stand-in for a missing source (their results test the pipeline only)
    synthetic_sources: list[str] = field(default_factory=list)
    #: dataset -> report section -> its headline rows (`analysis.probes.section_headlines`), each number with
    #: its sampling precision where the probe gives one (docs/DESIGN.md section 9)
    headlines: dict[str, dict[str, list[dict[str, Any]]]] = field(default_factory=dict)
    #: with `budget_hours`: per dataset, the sample it bought (`BudgetSample`; None: taken whole)
    budget: dict[str, BudgetSample | None] | None = None


def sweep_configs(dataset: Path, patterns: Sequence[str]) -> list[str]:
    """The configs of `dataset` its build manifest declares a protocol for, narrowed by `patterns` (globs)."""
    declared = sorted(read_build_manifest(dataset).get("protocols") or {})
    return [c for c in declared if not patterns or any(fnmatchcase(c, p) for p in patterns)]


def sweep_runs(request: SweepRequest, name: str, dataset: Path) -> list[SweepRun]:
    """The configs a sweep scores of one dataset: the request's runs, else every declared config its patterns match."""
    if request.runs is not None:
        return list(request.runs.get(name, ()))
    return [SweepRun(config) for config in sweep_configs(dataset, request.configs)]


def sweep(
    request: SweepRequest,
    *,
    confirm: Callable[[SweepPlan], bool] = lambda _plan: True,
    on_config: Callable[[RunRequest], tuple[Callable | None, Callable | None]] | None = None,
    on_warning: Callable[[str], None] | None = None,
    progress: Callable[[str], None] = lambda _line: None,
    stage: Callable[[str, Callable[[], Any]], Any] = lambda _label, make: make(),
    output: Output = SWEEP_OUTPUT,
) -> SweepResult | None:
    """Run a sweep (module docstring); None when `confirm` declines the plan (nothing written).

    `stage(label, make)` runs each step that takes time (the load, the pricing, each config's
    scoring) and returns what `make()` returns: the demo times them so. `output`: what OUT may
    hold (the demo's folder holds its reports and page too).
    """
    started = time.perf_counter()
    names = probe_names(request.probes)
    _check_each_config(request.run)
    if request.max_hours is not None and not request.max_hours > 0:
        raise ProbeError(f"--max-hours must be positive, got {request.max_hours}")
    if request.budget_hours is not None:
        hours = request.budget_hours
        if not (isinstance(hours, int | float) and math.isfinite(hours) and hours > 0):
            raise ProbeError(f"--budget-hours must be a positive number of hours, got {hours}")
        if request.run.sample is not None:
            raise ProbeError("give --sample N or --budget-hours H (which picks N per dataset), not both")
        if request.run.where is not None:
            raise ProbeError("budget_hours prices whole configs' samples, not a where= selection: give --sample N")
        if request.runs is not None or isinstance(request.run.settings, ScoringSettings):
            raise ProbeError(
                "budget_hours prices each dataset's declared configs under the scoring flags given: not with runs= "
                "or a complete ScoringSettings (give --sample N)"
            )
    inputs: list[Input] = [Reference("--model", request.run.model)]
    if isinstance(request.datasets, (str, Path)):
        inputs.append(("--datasets", request.datasets))
    inputs.extend(request.sources.references())
    out = check_output(request.out, output, inputs=inputs)
    staging: Path | None = None
    synthetic: list[str]

    def building(name: str, make: Callable[[], Path]) -> Path:
        progress(f"finding or building {name}")
        return make()

    try:
        if isinstance(request.datasets, Mapping):
            folders, synthetic = {name: Path(request.datasets[name]) for name in names}, []
        elif request.datasets is not None:
            folders, synthetic = find_datasets(Path(request.datasets), names), []
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".sweep-datasets-", dir=out.parent))
            built = find_or_build(
                names, request.sources, reuse=out / "datasets", build_into=staging,
                synthetic_dir=staging / ".synthetic-sources", warn=on_warning or progress,
                progress=building,
            )  # fmt: skip
            folders, synthetic = built.folders, built.synthetic
        configs = {name: sweep_runs(request, name, folders[name]) for name in names}
        if request.configs and not any(configs.values()):
            raise ProbeError(f"--config {', '.join(request.configs)} matches no scoreable config of {', '.join(names)}")
        budget = None if request.budget_hours is None else _budget(request, names, folders, configs, progress)
        samples = {n: request.run.sample if budget is None else getattr(budget.get(n), "size", None) for n in names}
        with warnings_to(on_warning):
            resolved = _resolve(request, names, folders, configs, out, samples)
        progress(f"loading {request.run.model}")
        runs = [run for _, run in resolved]
        each = request.run
        runner = stage("load model", lambda: Runner.load(each.model, each.load, sized_for=runs, on_warning=on_warning))
        try:
            plan = stage(
                "plan",
                lambda: price_loaded(
                    resolved, runner.backend, runner.tokenizer, runner.config, request.mfu, hours=request.price
                ),
            )
            if request.max_hours is not None and (plan.hours is None or plan.hours > request.max_hours):
                priced = "cannot be priced here" if plan.hours is None else f"is priced at {plan.hours:.3g} h"
                raise ProbeError(f"the sweep {priced}, above --max-hours {request.max_hours:g}; nothing was run")
            if not confirm(plan):
                return None
            if staging is not None:
                (out / "datasets").mkdir(parents=True, exist_ok=True)
                for name in list(folders):
                    if folders[name].parent == staging:
                        target = out / "datasets" / folders[name].name
                        folders[name].rename(target)
                        folders[name] = target
                resolved = [(n, run.moved_to(folders[n])) for n, run in resolved]
            scored = []
            for _, run in resolved:
                start, advance = on_config(run.request) if on_config is not None else (None, None)
                what = f"{Path(run.request.results).name} {run.request.config}"
                label = f"score {what} ({len(run.prompts.dataset)} items)"
                scored.append(
                    stage(
                        label, partial(lambda one, s, a: runner.run(one, on_start=s, on_advance=a), run, start, advance)
                    )
                )
            summaries = [
                (name, replace(summary, protocol=run.protocol))
                for (name, run), summary in zip(resolved, scored, strict=True)
            ]
        finally:
            runner.close()
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    reports, headlines = {}, {}
    for name in names if request.reports else ():
        if not configs[name]:
            continue
        progress(f"analysing {name}")
        analysis = analyze(folders[name], [out / "results" / name])
        reports[name] = write_report(analysis, out / "report" / name, overwrite=True) / "report.html"
        headlines[name] = headline_records(analysis.tables)
    result = SweepResult(out, plan, summaries, reports, time.perf_counter() - started, synthetic, headlines, budget)
    atomic_write_text(out / SWEEP_JSON, json.dumps(scrub_value(sweep_record(request, result)), indent=2) + "\n")
    return result


def _check_each_config(run: RunRequest) -> None:
    """`SweepRequest.run` says how each config is scored; the sweep decides where (one line for what it cannot take)."""
    if (run.dataset, run.config, run.results) != ("", "", ""):
        raise ProbeError(
            "SweepRequest.run says how each config is scored; the sweep sets its dataset, config and results folder: "
            "make it with RunRequest.each_config(model, ...)"
        )
    if run.ray:
        raise ProbeError("a sweep loads its model once, here: score on Ray with probes run --ray, one dataset each")
    if run.revision is not None:
        raise ProbeError("a sweep scores local dataset folders: a dataset revision is probes run's (--revision)")


def _budget(
    request: SweepRequest,
    names: Sequence[str],
    folders: Mapping[str, Path],
    configs: Mapping[str, list[SweepRun]],
    progress: Callable[[str], None],
) -> dict[str, BudgetSample | None]:
    """`--budget-hours`: each dataset's sample within its share of the hours, priced before the model loads."""
    hours = float(request.budget_hours or 0)
    progress(f"pricing the datasets within --budget-hours {hours:g}")
    each = request.run
    terms = BudgetTerms(
        request.gpu,
        request.mfu,
        each.load.backend,
        each.chat,
        each.settings if isinstance(each.settings, Mapping) else None,  # a complete one is refused
        limit=each.limit,
        sample_seed=each.sample_seed,
        model_revision=each.load.revision,
    )
    datasets = {n: (folders[n], [run.config for run in configs[n]]) for n in names if configs[n]}
    fitted = sweep_samples(datasets, each.model, hours, terms)
    for name, bought in fitted.items():
        progress(f"{name}: {'all of it (its whole price fits its share)' if bought is None else bought.line()}")
    return fitted


def _resolve(
    request: SweepRequest,
    names: Sequence[str],
    folders: Mapping[str, Path],
    configs: Mapping[str, list[SweepRun]],
    out: Path,
    samples: Mapping[str, int | None],
) -> list[tuple[str, ResolvedRun]]:
    """(dataset name, its resolved run) of every run, in order, each checked before the load.
    `samples`: each dataset's `--sample` size (None: every row)."""
    resolved: list[tuple[str, ResolvedRun]] = []
    for name in names:
        template = replace(
            request.run,
            dataset=folders[name],
            results=out / "results" / name,
            shard=request.run.shard_range,
            sample=samples.get(name),
        )
        for run in configs[name]:
            one = resolve_protocol(
                replace(
                    template,
                    config=run.config,
                    results=out / "results" / (run.results or name),
                    settings=template.settings if run.settings is None else run.settings,
                    limit=template.limit if run.limit is None else run.limit,
                ),
                # the user's --limit-per-config warns on an event-crossed config; a run's own (the demo's) does not
                limit_flag="--limit-per-config" if run.limit is None else None,
            )
            if run.rows is not None:  # the results record the full config
                prompts = one.prompts
                one = replace(one, prompts=replace(prompts, dataset=prompts.dataset.select(run.rows(prompts.dataset))))
            resolved.append((name, one))
    return resolved


def headline_records(tables: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Each report section's headline table as JSON records (NaN as null), as the report opens with them."""
    return {
        section: json.loads(frame.to_json(orient="records", force_ascii=False))
        for section, frame in section_headlines(tables).items()
    }


def sweep_record(request: SweepRequest, result: SweepResult) -> dict[str, Any]:
    """`sweep.json`: the plan and each config's summary, with paths relative to the sweep folder (none local)."""
    return {
        "model": result.summaries[0][1].key.model if result.summaries else request.run.model_name,
        "device": result.plan.device,
        "priced_at": result.plan.rate,
        "planned_hours": result.plan.hours,
        "wall_s": result.wall_s,
        "configs": [
            {
                "dataset": name,
                "config": s.config,
                "items": s.selected,
                "scored": s.items,
                "reused": s.skipped,
                "refusals": s.refusals,
                "all_refused": s.all_refused,
                "items_per_s": s.items_per_s,
                "wall_s": s.wall_s,
                "protocol": s.protocol,
                "results": str(s.key_dir.relative_to(result.out)),
            }
            for name, s in result.summaries
        ],
        "reports": {name: str(path.relative_to(result.out)) for name, path in result.reports.items()},
        "headlines": result.headlines,
        "synthetic_sources": result.synthetic_sources,
        "budget": None
        if result.budget is None
        else {
            "hours": request.budget_hours,
            "gpu": request.gpu,
            "mfu": request.mfu,
            "backend": request.run.load.backend,
            "samples": {
                name: None if bought is None else {"size": bought.size, "hours": bought.hours}
                for name, bought in result.budget.items()
            },
        },
    }
