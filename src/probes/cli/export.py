"""`probes export`: results + their prompts -> the Talent-or-Luck release's CSV files or JSONL (`probes.api.export`)."""

from __future__ import annotations

from typing import Annotated

import typer

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
            help="Export folder (a new one; with --overwrite, an empty one or an earlier export). "
            "talent-or-luck-csv: the release's outputs/ folder (closed_ended/<setting>/<dimension>/<model>/"
            "closed_ended_<mode>_<model>_<dimension>_all_1_runs.csv), so the release's src/viz scripts read it as "
            "../../outputs.",
            metavar="DIR",
        ),
    ],
    output_format: Annotated[
        str,
        typer.Option(
            "--format",
            help="talent-or-luck-csv: the CSV files the Talent-or-Luck release's scorers wrote, from the *_release "
            "configs (one per setting, outcome, dimension and model, in the release's row order and columns); "
            "jsonl: every result row joined to its prompt, one JSON object a line, one file per config.",
        ),
    ] = "talent-or-luck-csv",
    decimals: Annotated[
        int | None,
        typer.Option(
            "--round",
            help="talent-or-luck-csv: round the written probabilities to N decimals, 0 to 6 (the release wrote 2). "
            "Default: full precision.",
            metavar="N",
        ),
    ] = None,
    configs: opt.ResultConfigs = None,
    revision: opt.Revision = None,
    results_revision: opt.ResultsRevision = None,
    overwrite: opt.OverwriteOutput = False,
) -> None:
    """Write a model's results in another tool's layout: the Talent-or-Luck release's CSV files, or JSONL.

    The results are checked against --prompts first (their manifest's prompt fingerprint and each
    row's prompt hash), so the files hold the answers to exactly these prompts. Refused, as one line
    and with nothing written: results of another probe or with no *_release config (talent-or-luck-csv),
    prompts other than the ones scored, --round outside 0-6.
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
