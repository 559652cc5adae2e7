"""`probes export`: results + their prompts -> another tool's files, or JSONL (`probes.api.export`)."""

from __future__ import annotations

from typing import Annotated

import typer

from analysis.export_format import format_helps
from analysis.probe_part import default_exports

from . import options as opt
from .shared import err, out


def export_cmd(
    results: Annotated[str, typer.Argument(help="Results folder (or Hub repo id, with --config) to export.")],
    prompts: Annotated[
        str, typer.Option("--prompts", help="Prompt dataset the results were scored on: local folder or Hub repo id.")
    ],
    out_dir: Annotated[
        str,
        typer.Option(
            "--out",
            help="Export folder (a new one; with --overwrite, an empty one or an earlier export), in the format's "
            "layout.",
            metavar="DIR",
        ),
    ],
    output_format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="; ".join(f"{name}: {text}" for name, text in format_helps().items())
            + ". Default: the results' probe's own format where it has one ("
            + ", ".join(f"{fmt} for {name}" for name, fmt in default_exports().items())
            + "), else jsonl.",
        ),
    ] = None,
    decimals: Annotated[
        int | None,
        typer.Option(
            "--round",
            help="Round the written probabilities to N decimals, 0 to 6, where the format takes it (see --format). "
            "Default: full precision.",
            metavar="N",
        ),
    ] = None,
    configs: opt.ResultConfigs = None,
    revision: opt.Revision = None,
    results_revision: opt.ResultsRevision = None,
    overwrite: opt.OverwriteOutput = False,
) -> None:
    """Write a model's results in another tool's layout (a probe's paper's files, see --format), or JSONL.

    The results are checked against --prompts first (their manifest's prompt fingerprint and each
    row's prompt hash), so the files hold the answers to exactly these prompts. Refused, as one line
    and with nothing written: results the format cannot hold (another probe's, or no config its layout
    has), prompts other than the ones scored, --round outside 0-6 or with a format that keeps
    every value.
    """
    from probes import api

    request = api.ExportRequest(
        results,
        prompts,
        out_dir,
        format=output_format,
        decimals=decimals,
        configs=configs,
        revision=revision,
        results_revision=results_revision,
        overwrite=overwrite,
    )
    with err.status("exporting ..."):
        result = api.export(request)
    # one plain line per file: paths are copied from here, so they are never folded
    out.print(f"export -> {result.path}", highlight=False, markup=False, soft_wrap=True)
    for name, rows in result.files.items():
        out.print(f"{rows:>10,} rows  {name}", highlight=False, markup=False, soft_wrap=True)
    for note in result.skipped:
        err.print(f"warning: not exported: {note}", highlight=False, markup=False, soft_wrap=True)
