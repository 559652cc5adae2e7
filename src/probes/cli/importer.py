"""`probes import`: another team's released model outputs -> a results folder (`probes.api.import_results`)."""

from __future__ import annotations

from typing import Annotated

import typer

from . import options as opt
from .shared import err, out


def import_cmd(
    source: Annotated[
        str,
        typer.Argument(
            help="Folder of released outputs. talent-or-luck-csv: the release's outputs/ folder "
            "(closed_ended/<setting>/<dimension>/<model>/closed_ended_<mode>_<model>_<dimension>_all_<n>_runs.csv, as "
            "probes export writes it); empathy-authors: the authors' generation folder "
            "(<group>_<variation>_batch-<k>.tsv).",
            metavar="DIR",
        ),
    ],
    import_format: Annotated[
        str,
        typer.Option(
            "--format",
            help="talent-or-luck-csv: the Talent-or-Luck release's scorer CSV files, into the *_release configs "
            "(the inverse of probes export); empathy-authors: the intergroup-empathy authors' batch_pred_emotion.py "
            "TSV files (idx, system_prompt, user_input, response), joined on the prompts' authors_index and parsed "
            "by their first-integer rule.",
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
            help="talent-or-luck-csv: the <model> folder to import where DIR holds several models' outputs.",
            metavar="SLUG",
        ),
    ] = None,
    revision: opt.Revision = None,
) -> None:
    """Turn released model outputs into a results folder that probes analyze and probes publish read like a run.

    Every file is checked against --prompts before anything is written; a bad cell, a row that does
    not match its prompt or a file outside the layout is one line naming the file, the row (counted
    from 1 after the header; the idx for empathy-authors) and the column, and nothing is written.
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
