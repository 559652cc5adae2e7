"""`probes analyze`: a prompt dataset + result folders -> tables, figures and report.html (`probes.api.analyze`)."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.table import Table

from analysis.probe_part import analysis_of
from promptgen.probe_registry import probes

from . import options as opt
from .groups import takes
from .shared import err, out


@takes(opt.ANALYSIS)
def analyze_cmd(
    prompts: Annotated[
        str, typer.Option("--prompts", help="Prompt dataset the results were scored on: local folder or Hub repo id.")
    ],
    results: Annotated[
        list[str],
        typer.Option(
            "--results",
            help="Results folder or Hub repo id (repeat for several models: --results A --results B; "
            "tables and figures then show them side by side).",
        ),
    ],
    out_dir: Annotated[
        str,
        typer.Option(
            "--out",
            help="Report folder: tables/, figures/, report.html (never an input or a folder of other files).",
            metavar="DIR",
        ),
    ],
    configs: opt.ResultConfigs = None,
    revision: opt.Revision = None,
    results_revision: opt.ResultsRevision = None,
    no_figures: Annotated[bool, typer.Option("--no-figures", help="Tables and report only (faster).")] = False,
    overwrite: opt.OverwriteOutput = False,
    allow_fingerprint_mismatch: Annotated[
        bool,
        typer.Option(
            "--allow-fingerprint-mismatch",
            help="Analyse results whose manifest records other prompts (another fingerprint) than --prompts, "
            "with a warning; refused by default. Rows whose own prompt_sha256 differs from their prompt here "
            "are refused even so: they were scored on another text, options or range.",
        ),
    ] = False,
    options: Any = None,
) -> None:
    """Recompute every paper metric from released prompt and result datasets into tables, figures and report.html.

    Joins results to prompts by id; the probe of each config comes from the prompts' probe
    column. METRICS Refusal rates for all.

    Refused, naming the file, row id and column: probabilities outside [0, 1], distributions not
    summing to 1, NaN in the distribution of an item not refused, null ids, answers outside their
    item's range or options, rows scored on another prompt (prompt_sha256). Results whose manifest records
    other prompts (fingerprint) than --prompts are refused unless --allow-fingerprint-mismatch.
    """
    from probes import api

    started = time.perf_counter()
    request = api.AnalysisRequest(
        prompts,
        results,
        out_dir,
        options=options,
        configs=configs,
        revision=revision,
        results_revision=results_revision,
        figures=not no_figures,
        allow_fingerprint_mismatch=allow_fingerprint_mismatch,
        overwrite=overwrite,
    )
    with err.status("analysing ..."):
        result, path = api.analyze(request)
    table = Table(title=f"analysis -> {path}")
    table.add_column("table")
    table.add_column("rows", justify="right")
    for name, frame in result.tables.items():
        table.add_row(name, f"{len(frame):,}")
    out.print(table)
    for warning in result.warnings:
        err.print(f"warning: {warning}", highlight=False, markup=False, soft_wrap=True)
    for p in result.problems:
        err.print(f"warning: not analysed: {p.get('probe') or p.get('config')}: {p['reason']}", highlight=False)
    out.print(
        f"{len(result.tables)} tables, {len(result.figures)} figures, report {path / 'report.html'} "
        f"({time.perf_counter() - started:.1f} s)",
        highlight=False,
    )


def probe_metrics() -> str:
    """Each registered probe's metrics in a sentence (`ProbeAnalysis.metrics`), in report order, for `--help`."""
    found = [analysis_of(spec) for spec in probes().values()]
    return " ".join(f"{a.section}: {a.metrics}" for a in found if a.metrics)


# the help lists what each registered probe computes, a plugin probe's too, so this module names none
analyze_cmd.__doc__ = (analyze_cmd.__doc__ or "").replace("METRICS", probe_metrics())
