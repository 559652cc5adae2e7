"""`probes sweep`: a model's whole evaluation in one command: a priced plan, one model load, every config, reports.

1. Datasets: the three prompt datasets from `--datasets DIR` (folders `probes build` wrote), or
   built from `--sources` (into a staging folder first, so a refused plan leaves nothing).
2. Configs: every config a dataset declares its paper's protocol for (the item configs: see
   `promptgen.protocols`), narrowed by `probes` (dataset names) and `configs` (glob patterns).
   Each is resolved as `probes run` resolves it (protocol with the flags given laid over it).
3. Plan: the model loads once; each config is priced (`runners.plan.quote`) on the GPU it runs
   on at `mfu`, or at the CPU's measured rate. A plan over `max_hours` is refused, and the
   caller's `confirm(plan)` decides whether to go on.
4. Run: each config in turn on the loaded model (`runners.run.run_loaded`). Each is a resumable
   `probes run` into `OUT/results/<dataset>`: killed at any moment, the same command goes on
   where it stopped, and finished configs are skipped.
5. Analyse: each dataset into `OUT/report/<dataset>/report.html`; the per-config summary goes
   to `OUT/sweep.json` (no local paths).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from analysis.pipeline import analyze
from analysis.report import write_report
from promptgen.build import build
from promptgen.core.errors import ProbeError
from promptgen.core.files import atomic_write_text
from promptgen.core.outputs import Output, Reference, check_output, holds_only
from promptgen.core.plugins import resolve_reference
from promptgen.hub.read import built_folders, read_build_manifest
from promptgen.probe_registry import probe_names, probes
from promptgen.recipe import load_recipe
from promptgen.sources import SourceOptions
from runners.backends import backend_spec, load
from runners.backends.load import LoadOptions
from runners.local_run import default_batch_size
from runners.plan.pricing import GPUS, count_params, load_model_config
from runners.plan.quote import Quote, cpu_decode_tokens_per_s, cpu_tokens_per_s, quote_config
from runners.request import RunRequest
from runners.run import resolve_protocol, run_on, warnings_to
from runners.scoring.settings import ScoringSettings
from runners.summary import RunSummary

SWEEP_JSON = "sweep.json"

#: a sweep folder: added to (resumed) only when it holds nothing but what a sweep writes
SWEEP_OUTPUT = Output(
    "sweep folder",
    owns=holds_only(required=[], allowed=["datasets", "results", "report", SWEEP_JSON]),
    replaces=False,
)


@dataclass(frozen=True)
class SweepRequest:
    """Everything `probes sweep` asks; `settings`, `chat` and `where` left as None are each dataset's protocol."""

    model: str
    out: str | Path
    #: a folder of built datasets; None builds them from `sources` (a folder, else downloads)
    datasets: str | Path | None = None
    sources: SourceOptions = field(default_factory=SourceOptions)
    probes: tuple[str, ...] = ()
    configs: tuple[str, ...] = ()
    limit_per_config: int | None = None
    model_name: str | None = None
    load: LoadOptions = field(default_factory=LoadOptions)
    settings: ScoringSettings | Mapping[str, Any] | None = None
    chat: bool | None = None
    shard: str | None = None
    batch_size: int | None = None
    flush_every: int = 64
    #: the results may hold another build of a config's prompts: rescore the changed items (`RunRequest`)
    rescore_changed: bool = False
    mfu: float = 0.5
    max_hours: float | None = None

    def __post_init__(self) -> None:
        # `probes` and `configs` may come as lists (repeated flags) or None (none given): tuples either way
        object.__setattr__(self, "probes", tuple(self.probes or ()))
        object.__setattr__(self, "configs", tuple(self.configs or ()))


@dataclass
class SweepPlan:
    """What a sweep is about to do: a quote per (dataset, config), priced on `device`."""

    device: str
    rate: str
    quotes: list[tuple[str, Quote, float | None]]

    @property
    def items(self) -> int:
        return sum(q.items for _, q, _ in self.quotes)

    @property
    def hours(self) -> float | None:
        prices = [h for _, _, h in self.quotes]
        return None if any(h is None for h in prices) else sum(prices)  # type: ignore[misc]


@dataclass
class SweepResult:
    out: Path
    plan: SweepPlan
    summaries: list[tuple[str, RunSummary]]
    reports: dict[str, Path]
    wall_s: float
    #: datasets built from a synthetic stand-in for a missing source (their results test the pipeline only)
    synthetic_sources: list[str] = field(default_factory=list)


def find_datasets(folder: Path, names: Sequence[str]) -> dict[str, Path]:
    """The built folder of each recipe in `names` under `folder` (`probes build --out folder`)."""
    if not folder.is_dir():
        raise ProbeError(f"--datasets {folder} is not a folder of built datasets")
    found: dict[str, list[Path]] = {}
    for built in built_folders(folder):
        recipe_file = read_build_manifest(built).get("recipe", {}).get("file")
        found.setdefault(str(recipe_file), []).append(built)
    out = {}
    for name in names:
        file = load_recipe(name).path.name  # type: ignore[union-attr]
        hits = found.get(file, [])
        if not hits:
            raise ProbeError(
                f"--datasets {folder} has no {name} dataset (build it: probes build {name} --out {folder})"
            )
        if len(hits) > 1:
            listed = ", ".join(p.name for p in hits)
            raise ProbeError(f"--datasets {folder} has several {name} datasets ({listed}); keep one")
        out[name] = hits[0]
    return out


def sweep_configs(dataset: Path, patterns: Sequence[str]) -> list[str]:
    """The configs of `dataset` its build manifest declares a protocol for, narrowed by `patterns` (globs)."""
    declared = sorted(read_build_manifest(dataset).get("protocols") or {})
    return [c for c in declared if not patterns or any(fnmatchcase(c, p) for p in patterns)]


def _build_datasets(
    names: Sequence[str], sources: SourceOptions, into: Path, warn: Callable[[str], None]
) -> tuple[dict[str, Path], list[str]]:
    """Build `names` into `into`; the empathy corpus, when `sources` lacks it, is a labelled synthetic one.

    The crowd-enVent corpus cannot be downloaded on machines without internet and is not
    redistributed with the other sources; as in `probes demo`, its stand-in tests the pipeline
    only, and the sweep says so (a warning, and `synthetic_sources` in sweep.json).
    """
    built, synthetic = {}, []
    for name in names:
        options, spec = sources, probes()[name]
        private = spec.private_source
        if (
            private
            and spec.synthetic_sources
            and sources.folder is not None
            and not (sources.folder / private).exists()
        ):
            warn(
                f"--sources {sources.folder} has no {private} corpus: {name} is built from a small "
                "synthetic corpus in its format, whose results test the pipeline only"
            )
            options = replace(sources, folder=resolve_reference(spec.synthetic_sources)(into / ".synthetic-sources"))
            synthetic.append(name)
        # a synthetic folder may hold the recipe its stand-in files build with (their sources unpinned)
        recipe = options.folder / "recipe.yaml" if name in synthetic and options.folder is not None else None
        built[name] = build(str(recipe) if recipe and recipe.is_file() else name, out_dir=into, sources=options).path
    return built, synthetic


def _device(backend: Any) -> tuple[str | None, str]:
    """(a `pricing.GPUS` name or None, the device in words) of a loaded backend."""
    if str(getattr(backend, "device", "cpu")).startswith("cuda"):
        import torch

        name = torch.cuda.get_device_name()
        gpu = next((key for key in GPUS if key in name.lower().replace(" ", "")), None)
        return gpu, name
    return None, "cpu"


def make_plan(
    resolved: Sequence[tuple[str, Any, RunRequest]], backend: Any, tokenizer: Any, model: str, mfu: float
) -> SweepPlan:
    """Price each resolved config on the device the model loaded on (see the module docstring)."""
    per_call = default_batch_size(backend) if getattr(backend, "device", None) else None
    budget = getattr(backend, "max_batch_tokens", None)  # the hf backend's: it batches generation too
    quotes = [
        (name, quote_config(prompts, request, tokenizer, items_per_call=per_call, max_batch_tokens=budget))
        for name, prompts, request in resolved
    ]
    if backend_spec(backend.name).served:  # no weights here to count: the time is the server's
        rate = "the tokens and prompts it is sent, not in hours (a served model's time is its server's)"
        return SweepPlan(f"a server (--backend {backend.name})", rate, [(name, q, None) for name, q in quotes])
    shape = count_params(load_model_config(model))
    gpu, device = _device(backend)
    tokens_per_s = decode_tokens_per_s = None
    if gpu is not None:
        rate = f"{gpu} at MFU {mfu} (decode steps at their own cost: memory bandwidth or FLOPs)"
    elif getattr(backend, "model", None) is not None and not str(getattr(backend, "device", "cpu")).startswith("cuda"):
        length = max((q.context_tokens_per_item for _, q in quotes), default=64)
        tokens_per_s = cpu_tokens_per_s(backend.model, round(length))
        rate = f"the CPU's measured {tokens_per_s:,.0f} computed tokens/s (a plain forward pass of this model)"
        if any(q.decoded_tokens for _, q in quotes):
            decode_tokens_per_s = cpu_decode_tokens_per_s(backend.model, round(length))
            rate += f" and {decode_tokens_per_s:,.0f} decoded tokens/s (a short greedy generate)"
    else:
        rate = f"not priced: {device} is not a GPU `probes plan` knows"
    priced = [
        (name, q, q.hours(shape, gpu=gpu, mfu=mfu, tokens_per_s=tokens_per_s, decode_tokens_per_s=decode_tokens_per_s))
        for name, q in quotes
    ]
    return SweepPlan(device, rate, priced)


def sweep(
    request: SweepRequest,
    *,
    confirm: Callable[[SweepPlan], bool] = lambda _plan: True,
    on_config: Callable[[RunRequest], tuple[Callable | None, Callable | None]] | None = None,
    on_warning: Callable[[str], None] | None = None,
    progress: Callable[[str], None] = lambda _line: None,
) -> SweepResult | None:
    """Run a sweep (module docstring); None when `confirm` declines the plan (nothing written)."""
    started = time.perf_counter()
    names = probe_names(request.probes)
    if request.limit_per_config is not None and request.limit_per_config < 1:
        raise ProbeError(f"--limit-per-config must be positive, got {request.limit_per_config}")
    if request.max_hours is not None and not request.max_hours > 0:
        raise ProbeError(f"--max-hours must be positive, got {request.max_hours}")
    inputs = [Reference("--model", request.model)]
    if request.datasets is not None:
        inputs.append(("--datasets", request.datasets))
    inputs.extend(request.sources.references())
    out = check_output(request.out, SWEEP_OUTPUT, inputs=inputs)
    staging: Path | None = None
    synthetic: list[str] = []
    if request.datasets is not None:
        folders = find_datasets(Path(request.datasets), names)
    else:
        existing = out / "datasets"
        try:
            folders = find_datasets(existing, names) if existing.is_dir() else {}
        except ProbeError:
            folders = {}
        missing = [n for n in names if n not in folders]
        if missing:
            out.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".sweep-datasets-", dir=out.parent))
            progress(f"building {', '.join(missing)} from the sources")
            built, synthetic = _build_datasets(missing, request.sources, staging, on_warning or progress)
            folders.update(built)
    try:
        configs = {name: sweep_configs(folders[name], request.configs) for name in names}
        if request.configs and not any(configs.values()):
            raise ProbeError(f"--config {', '.join(request.configs)} matches no scoreable config of {', '.join(names)}")
        resolved = []
        for name in names:
            template = RunRequest(
                folders[name],
                "",
                request.model,
                out / "results" / name,
                model_name=request.model_name,
                load=request.load,
                settings=request.settings,
                chat=request.chat,
                shard=request.shard,
                limit=request.limit_per_config,
                batch_size=request.batch_size,
                flush_every=request.flush_every,
                rescore_changed=request.rescore_changed,
            )
            template = replace(template, shard=template.shard_range)
            for config in configs[name]:
                prompts, run_request, label = resolve_protocol(replace(template, config=config))
                resolved.append((name, prompts, run_request, label))
        progress(f"loading {request.model}")
        with warnings_to(on_warning):
            backend, tokenizer, revision = load.load_backend(request.model, request.load)
        try:
            plan = make_plan([(n, p, r) for n, p, r, _ in resolved], backend, tokenizer, request.model, request.mfu)
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
                resolved = [
                    (n, replace(p, path=str(folders[n])), replace(r, dataset=folders[n]), label)
                    for n, p, r, label in resolved
                ]
            runs = run_on(
                backend, tokenizer, revision, [p for _, p, _, _ in resolved], [r for _, _, r, _ in resolved],
                on_config=on_config,
            )  # fmt: skip
            summaries = [
                (name, replace(summary, protocol=label))
                for (name, _, _, label), summary in zip(resolved, runs, strict=True)
            ]
        finally:
            backend.close()
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    reports = {}
    for name in names:
        if not configs[name]:
            continue
        progress(f"analysing {name}")
        analysis = analyze(folders[name], [out / "results" / name])
        reports[name] = write_report(analysis, out / "report" / name, overwrite=True) / "report.html"
    result = SweepResult(out, plan, summaries, reports, time.perf_counter() - started, synthetic)
    atomic_write_text(out / SWEEP_JSON, json.dumps(sweep_record(request, result), indent=2) + "\n")
    return result


def sweep_record(request: SweepRequest, result: SweepResult) -> dict[str, Any]:
    """`sweep.json`: the plan and each config's summary, with paths relative to the sweep folder (none local)."""
    return {
        "model": result.summaries[0][1].key.model if result.summaries else request.model_name,
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
        "synthetic_sources": result.synthetic_sources,
    }
