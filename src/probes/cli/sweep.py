"""`probes sweep`: a model's whole evaluation in one command (`probes.api.sweep`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from promptgen.probe_registry import probe_choices
from runners.backends import backend_spec

from . import options as opt
from .groups import takes
from .shared import _ENGINE_THREADS, _progress, _warn, err, out


def _plan_table(plan: Any) -> Table:
    table = Table(title=f"sweep plan on {plan.device}, priced at {plan.rate}")
    numbers = ("items", "computed tokens", "decoded tokens", "hours")
    for header in ("dataset", "config", "scoring", *numbers):
        table.add_column(header, justify="right" if header in numbers else "left")

    def price(hours: float | None, prompts: float) -> str:
        # a served model's time is its server's: it is priced by the prompts (and tokens) it is sent
        return f"{prompts:,.0f} prompts" if prompts else ("?" if hours is None else f"{hours:.3g}")

    for name, quote, hours in plan.quotes:
        cells = (name, quote.config, quote.scoring, f"{quote.items:,}", f"{quote.computed_tokens:,.0f}")
        decoded = f"{quote.decoded_tokens:,.0f}" if quote.decoded_tokens else "-"
        table.add_row(*(escape(c) for c in cells), decoded, price(hours, quote.prompts))
    total = price(plan.hours, sum(q.prompts for _, q, _ in plan.quotes))
    computed = sum(q.computed_tokens for _, q, _ in plan.quotes)
    decoded = sum(q.decoded_tokens for _, q, _ in plan.quotes)
    table.add_row("total", "", "", f"{plan.items:,}", f"{computed:,.0f}", f"{decoded:,.0f}" if decoded else "-", total)
    return table


@takes(opt.SOURCES, opt.LOAD, opt.SCORING, opt.RUN)
def sweep_cmd(
    model: opt.Model,
    out_dir: Annotated[
        str,
        typer.Option(
            "--out",
            help="Sweep folder: datasets/ (when built), results/<dataset>/, report/<dataset>/, sweep.json.",
            metavar="DIR",
        ),
    ],
    sources: Any = None,
    load: Any = None,
    scoring: Any = None,
    run_fields: Any = None,
    datasets: Annotated[
        Path | None,
        typer.Option(
            "--datasets",
            help="Folder of built prompt datasets (probes build --out DIR); default: build them from "
            "--sources into OUT/datasets.",
            file_okay=False,
        ),
    ] = None,
    probes: Annotated[
        list[str] | None,
        typer.Option("--probe", help=f"Only this dataset (repeatable): {probe_choices()}."),
    ] = None,
    configs: Annotated[
        list[str] | None,
        typer.Option("--config", "-c", help="Only configs matching this glob (repeatable), e.g. 'race_*'."),
    ] = None,
    limit_per_config: Annotated[
        int | None, typer.Option("--limit-per-config", min=1, help="Only the first N items of each config.")
    ] = None,
    sample: opt.SampleSize = None,
    sample_seed: opt.SampleSeed = 0,
    mfu: Annotated[
        float, typer.Option("--mfu", min=0.01, max=1.0, help="Model FLOPs utilisation the plan prices a GPU at.")
    ] = 0.5,
    max_hours: Annotated[
        float | None, typer.Option("--max-hours", help="Refuse a plan priced above H hours (nothing is run).")
    ] = None,
    budget_hours: Annotated[
        float | None,
        opt.budget_hours(
            "Instead of --sample: share H among the datasets (cheapest whole first, the rest equal shares) and "
            "score each dataset's largest sample within its share, priced as `probes plan --budget-hours` on --gpu "
            "at --mfu on --backend (hf or vllm)."
        ),
    ] = None,
    gpu: opt.BudgetGpu = "h100",
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Go on after the plan without asking.")] = False,
    quiet: opt.QuietRun = False,
) -> None:
    """Evaluate a model on every scoreable config of each probe's dataset, then analyse each, with one model load.

    Prints the plan first (items, computed tokens, hours on the detected GPU at --mfu, or at the
    CPU's measured rate) and goes on with --yes, or when stdin is not a terminal (it says so);
    else it asks. Each config is scored with its paper's protocol unless scoring flags are given.
    Resumable: run the same command again after an interruption; finished configs are skipped.
    """

    from probes import api

    _ENGINE_THREADS["started"] |= backend_spec(load.backend).starts_engine

    def confirm(plan: Any) -> bool:
        out.print(_plan_table(plan))
        if yes:
            err.print("going on: --yes", highlight=False)
            return True
        if not sys.stdin.isatty():
            err.print("going on: stdin is not a terminal", highlight=False)
            return True
        return typer.confirm("Run this sweep?", default=False)

    progress = _progress(quiet)
    overall: dict[str, Any] = {}

    def on_config(request: Any) -> tuple[Any, Any]:
        def on_start(total: int, done: int) -> None:
            if "task" not in overall:
                overall["task"] = progress.add_task(request.config, total=overall.get("total"), rate="")
            progress.update(overall["task"], description=request.config, advance=done)

        def on_advance(n: int) -> None:
            progress.update(overall["task"], advance=n)

        return on_start, on_advance

    def confirm_and_size(plan: Any) -> bool:
        overall["total"] = plan.items
        going = confirm(plan)
        if going:
            progress.start()
        return going

    each = api.RunRequest.each_config(
        model, load=load, settings=scoring, limit=limit_per_config, sample=sample, sample_seed=sample_seed, **run_fields
    )
    request = api.SweepRequest(
        each,
        out_dir,
        datasets=datasets,
        sources=sources,
        probes=tuple(probes or ()),
        configs=tuple(configs or ()),
        mfu=mfu,
        max_hours=max_hours,
        budget_hours=budget_hours,
        gpu=gpu,
    )
    try:
        result = api.sweep(
            request,
            confirm=confirm_and_size,
            on_config=on_config,
            on_warning=_warn,
            progress=lambda line: err.print(f"[sweep] {line}", highlight=False, markup=False),
        )
    finally:
        progress.stop()
    if result is None:
        err.print("sweep not run", highlight=False)
        raise typer.Exit(code=1)
    table = Table(title=f"sweep of {model}: {result.wall_s / 60:.1f} min")
    for header in ("dataset", "config", "items", "scored", "reused", "refusals", "items/s"):
        table.add_column(header, justify="left" if header in ("dataset", "config") else "right")
    for name, s in result.summaries:
        refusals = f"ALL {s.refusals}" if s.all_refused else str(s.refusals)
        table.add_row(
            name, s.config, f"{s.selected:,}", f"{s.items:,}", f"{s.skipped:,}", refusals, f"{s.items_per_s:.2f}"
        )
    out.print(table)
    for name, s in result.summaries:
        if s.all_refused:
            out.print(f"{name} {s.config}: {s.refused_advice()}", highlight=False, markup=False)
    for name, path in result.reports.items():
        out.print(f"report ({name}): {path}", highlight=False)
    out.print(f"summary: {result.out / 'sweep.json'}", highlight=False)
