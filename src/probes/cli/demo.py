"""`probes demo`: the whole pipeline on small subsets, offline, in minutes (`probes.api.demo`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from . import options as opt
from .shared import err, out


def demo_cmd(
    out_dir: Annotated[
        str,
        typer.Option(
            "--out", help="Demo folder: datasets/, results/, reports/, report.html, sweep.json.", metavar="DIR"
        ),
    ] = "probes-demo",
    sources: opt.Sources = None,
    cache_dir: opt.Cache = None,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="Model to score with (default: SmolLM2-135M-Instruct from PyPI)."),
    ] = None,
    online: Annotated[bool, typer.Option("--online", help="Allow downloading sources not in --sources.")] = False,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace the reports of an earlier demo.")] = False,
) -> None:
    """See it work: build small subsets of each probe's dataset, score them with SmolLM2, analyse, write report.html.

    Offline by default (sources from --sources or $PROBES_SOURCES); about 5 minutes on 2 CPU
    cores. Rerunning resumes: built datasets and scored items are reused.
    """
    from probes import api

    result = api.demo(
        Path(out_dir),
        sources=sources,
        cache_dir=cache_dir,
        offline=not online,
        model=model,
        overwrite=overwrite,
        progress=lambda line: err.print(line, highlight=False, markup=False, soft_wrap=True),
    )
    total = sum(s.seconds for s in result.steps)
    out.print(f"demo finished in {total / 60:.1f} min: open {result.report}", highlight=False)
