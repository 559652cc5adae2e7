"""`probes import`: another team's released model outputs -> a results folder (`probes.api.import_results`)."""

from __future__ import annotations

from typing import Annotated

import typer

from probes.probe_part import probe_extras

from . import options as opt
from .shared import err, out


def import_cmd(
    source: Annotated[
        str,
        typer.Argument(help="Folder of released outputs, in the layout of its --format.", metavar="DIR"),
    ],
    import_format: Annotated[
        str,
        typer.Option(
            "--format",
            help="; ".join(f"{name}: {fmt.help}" for name, fmt in probe_extras("import_formats").items()) + ".",
        ),
    ],
    prompts: Annotated[
        str,
        typer.Option(
            "--prompts",
            help="Prompt dataset the outputs answer (local folder or Hub repo id): every row is joined to its "
            "item and checked against it.",
            metavar="DATASET",
        ),
    ],
    model_name: Annotated[
        str,
        typer.Option(
            "--model-name",
            help="Portable name of the model that wrote the outputs (e.g. ORG/MODEL), in every row, manifest and "
            "report; the key's revision is imported-<sha256 of the files>.",
            metavar="NAME",
        ),
    ],
    results: Annotated[
        str,
        typer.Option(
            "--out",
            help="Results folder to write (new, or one written by probes run or import; never an input).",
            metavar="RESULTS",
        ),
    ],
    configs: Annotated[
        list[str] | None,
        typer.Option("--config", help="Only these configs (repeatable). Default: every config DIR has files for."),
    ] = None,
    source_model: Annotated[
        str | None,
        typer.Option(
            "--source-model",
            help="The <model> folder to import, where the layout has one and DIR holds several models' outputs.",
            metavar="SLUG",
        ),
    ] = None,
    revision: opt.Revision = None,
) -> None:
    """Turn released model outputs into a results folder that probes analyze and probes publish read like a run.

    Every file is checked against --prompts before anything is written; a bad cell, a row that does
    not match its prompt or a file outside the layout is one line naming the file, the row (counted
    from 1 after the header, or the row's own index where the format has one) and the column, and nothing is written.
    The rows are keyed by the files' content: importing the same files again adds nothing.
    """
    from probes import api

    request = api.ImportRequest(
        source,
        import_format,
        prompts,
        model_name,
        results,
        configs=configs,
        source_model=source_model,
        revision=revision,
    )
    with err.status("importing ...") as status:
        result = api.import_results(request, progress=lambda text: status.update(text))
    out.print(f"import -> {result.path}", highlight=False, markup=False, soft_wrap=True)
    for config in result.configs:
        out.print(config.line(), highlight=False, markup=False, soft_wrap=True)
        out.print(f"  {config.key_dir}", highlight=False, markup=False, soft_wrap=True)
    for warning in result.warnings:
        err.print(f"warning: {warning}", highlight=False, markup=False, soft_wrap=True)
