"""`probes rewrite`: the empathy probe's own command, a model's third-person rewrites -> the dataset's T2.

Registered by the probe's spec (`promptgen.empathy.spec`, `commands`), so the command line names
no probe; it parses flags, calls `probes.api.rewrite` (`t2_rewrites.rewrite`) and prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from probes.cli import options as opt
from probes.cli.groups import takes
from probes.cli.shared import _ENGINE_THREADS, _progress, _progress_hooks, _warn, err, out
from runners.backends import backend_spec


@takes(opt.SOURCES, opt.LOAD)
def rewrite_cmd(
    dataset: Annotated[
        Path,
        typer.Argument(
            help="An intergroup-empathy folder from probes build; its rewrite_t2 prompts are generated, "
            "its events get the model's T2.",
            file_okay=False,
        ),
    ],
    out_dir: opt.VersionOut,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="Model that rewrites (local folder or Hub id). Left out: use the generations already in --results.",
        ),
    ] = None,
    model_name: opt.ModelName = None,
    results: Annotated[
        Path | None,
        typer.Option(
            "--results",
            help="Results folder of the rewrite generations (resumable, publishable; "
            "default OUT/<dataset name>-rewrites).",
            file_okay=False,
        ),
    ] = None,
    key: opt.ResultKey = None,
    limit: opt.Limit = None,
    chat: Annotated[
        bool,
        typer.Option(
            "--chat/--no-chat",
            help="Send the rewrite prompt as a chat user turn. Default off: the prompt ends inside `Rewrite: {` "
            "and is continued as plain text, as the 1-shot form intends.",
        ),
    ] = False,
    max_new_tokens: Annotated[
        int,
        typer.Option("--max-new-tokens", min=1, help="Most tokens per rewrite; a rewrite not closed by } is unused."),
    ] = 96,
    batch_size: opt.BatchSize = None,
    flush_every: opt.FlushEvery = 64,
    load: Any = None,
    recipe: opt.BuiltFrom = "intergroup-empathy",
    sources: Any = None,
    overwrite: opt.OverwriteDataset = False,
    quiet: opt.QuietRun = False,
) -> None:
    """Rewrite the T1 narratives in the third person with a model (docs/DESIGN.md section 4) into a new dataset version.

    With --model, first generates DATASET's rewrite_t2 prompts greedily (generation stops at `}`)
    into --results, exactly as `probes run DATASET --config rewrite_t2 --scoring generate`:
    resumable, a rerun skips the events already rewritten. Then rebuilds the dataset from its
    recipe and sources at the same --max-events, with each event's narrative_t2 replaced by the
    model's rewrite and t2_method set to the model id; generations not closed by `}` within
    --max-new-tokens, or empty, keep the rule-based T2 (counted in the manifest and card). The
    version is <recipe version>+t2.<hash>. Atomic: on any error the new version is not written.
    """
    from probes import api  # pandas and the build are imported by the command, not its --help

    _ENGINE_THREADS["started"] |= model is not None and backend_spec(load.backend).starts_engine
    progress = _progress(quiet)
    on_start, on_advance = _progress_hooks(progress, "rewrite_t2")
    with progress:
        done = api.rewrite(
            dataset,
            out_dir,
            model=model,
            results=results,
            key=key,
            load=load,
            model_name=model_name,
            chat=chat,
            limit=limit,
            batch_size=batch_size,
            flush_every=flush_every,
            max_new_tokens=max_new_tokens,
            recipe=recipe,
            sources=sources,
            overwrite=overwrite,
            on_start=on_start,
            on_advance=on_advance,
            on_warning=_warn,
        )
    if done.generation is not None:
        err.print(done.generation.line(), highlight=False)
    result = done.result
    record = result.rewrites.record
    statuses = ", ".join(f"{k} {v}" for k, v in record["statuses"].items())
    out.print(
        f"{record['rewritten']} of {record['events']} events rewritten by {record['model']} ({statuses}); "
        f"{record['kept_rules']} keep the rule-based T2",
        highlight=False,
    )
    m = result.manifest
    out.print(f"{m['name']} {m['version']} -> {result.path}  fingerprint {m['fingerprint']}", highlight=False)
