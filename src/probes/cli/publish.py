"""`probes publish`: a Hub-ready folder -> one commit (and tag) on a Hugging Face dataset repo (`api.publish`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .shared import err, out


def publish_cmd(
    folder: Annotated[
        Path,
        typer.Argument(
            help="Hub-ready folder: a prompt dataset (has build_manifest.json) or a result folder "
            "(has results_manifest.json)."
        ),
    ],
    repo_id: Annotated[
        str, typer.Option("--repo-id", help="Target Hugging Face dataset repo, ORG/NAME (created when missing).")
    ],
    revision_tag: Annotated[
        str | None,
        typer.Option(
            "--revision-tag",
            help="Tag to create. Prompt datasets are always tagged v<version> from build_manifest.json (this may "
            "only repeat it); result folders get no tag unless one is given. Existing tags are never moved.",
        ),
    ] = None,
    private: Annotated[
        bool, typer.Option("--private", help="Create the repo as private (no effect on an existing repo).")
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Show the folder's validation and list every file (add/update/unchanged/delete) and the commit "
            "it would make; only reads from the Hub, and works offline (then every file is an add).",
        ),
    ] = False,
    message: Annotated[
        str | None,
        typer.Option(
            "--message",
            help="Commit title (default: 'Publish NAME VERSION'); the fingerprints are always added below it.",
        ),
    ] = None,
) -> None:
    """Upload a Hub-ready folder to a Hugging Face dataset repo: one commit, one tag per version.

    Re-publishing identical content makes no commit.
    The folder is validated first and refused, naming each problem, when it holds a symlink or a file its format
    does not define, a Hugging Face token or a home-folder path in any file (card, JSON value, parquet string),
    or (result folders) an unreadable part, a part not of the result schema, two rows for one key and id, or a
    stale manifest.
    Remote files under data/ that the folder no longer has are deleted in the same commit (older tags keep them).
    The token comes from `hf auth login` or HF_TOKEN, never from a flag, and is scrubbed from every error.
    """
    from probes import api

    result = api.publish(folder, repo_id, revision_tag=revision_tag, private=private, dry_run=dry_run, message=message)
    for note in result.notes:
        err.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
    out.print(api.plan_table(result, all_files=dry_run))
    for line in result.lines():
        out.print(line, highlight=False, markup=False, soft_wrap=True)
