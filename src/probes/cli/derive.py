"""`probes curate-pairs` and `probes rewrite`: a model's results -> a new version of the dataset it scored."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from runners.backends import backend_spec

from . import options as opt
from .groups import takes
from .shared import _ENGINE_THREADS, _progress, _progress_hooks, _warn, err, out


@takes(opt.SOURCES)
def curate_pairs_cmd(
    results: Annotated[
        Path,
        typer.Argument(
            help="Result folder of `probes run DATASET --config race_probe` "
            "(RESULTS/data/race_probe/<key>/part-*.parquet)."
        ),
    ],
    prompts: Annotated[
        Path,
        typer.Option(
            "--prompts",
            help="The trust-game-names folder the race probe was scored on; its race_probe items are joined by id, "
            "and its curated pairs are carried into the new version.",
            file_okay=False,
        ),
    ],
    out_dir: opt.VersionOut,
    model_slug: Annotated[
        str | None,
        typer.Option(
            "--model-slug",
            help="Config names pairs_<S> and games_<S> (lowercase, digits, _). Default: the scored model's folder "
            "or Hub name, e.g. smollm2_135m_instruct.",
        ),
    ] = None,
    per_gender: Annotated[
        int, typer.Option("--per-gender", min=1, help="Pairs kept per race and gender (the paper: 17).")
    ] = 17,
    variant: Annotated[
        str,
        typer.Option(
            "--variant", help="Race-probe prompt variant whose scores are used: base (Llama-2 / Mistral) or phi."
        ),
    ] = "base",
    key: opt.ResultKey = None,
    recipe: opt.BuiltFrom = "trust-game",
    sources: Any = None,
    overwrite: opt.OverwriteDataset = False,
) -> None:
    """Select a model's Trust Game pairs from its race-probe scores (docs/DESIGN.md section 5, step 7).

    Log-odds log P(True) - log P(False) per title, surname and race; a pair is kept for its seed
    race only when that race has the largest log-odds, the top --per-gender per race and gender
    by the gap to the runner-up (fewer when fewer qualify: recorded, never padded). The dataset is
    rebuilt from its recipe and sources with configs pairs_<S> and games_<S> as a new version
    (<recipe version>+pairs.<hash>). Atomic: on any error nothing is written.
    """
    from probes import api

    result = api.curate_pairs(
        results,
        prompts,
        out_dir,
        model_slug=model_slug,
        per_gender=per_gender,
        variant=variant,
        key=key,
        recipe=recipe,
        sources=sources,
        overwrite=overwrite,
    )
    groups = result.curated.record["selection"]["groups"]
    table = Table(title=f"pairs_{result.curated.slug}: {len(result.curated.pairs)} pairs")
    for col in ("race", "gender", "scored", "candidates", "kept", "shortfall"):
        table.add_column(col, justify="left" if col in ("race", "gender") else "right")
    for g in groups:
        table.add_row(g["race"], g["gender"], *(str(g[c]) for c in ("scored", "candidates", "kept", "shortfall")))
    out.print(table)
    short = [g for g in groups if g["shortfall"]]
    if short:
        err.print(
            f"warning: {len(short)} of {len(groups)} groups have fewer than {per_gender} pairs (kept what qualified)",
            highlight=False,
        )
    games = result.manifest["build_report"]["curated_pairs"][result.curated.slug]
    if games["games_config"] is None:
        err.print(f"warning: no games_{result.curated.slug} config: {games['no_games_reason']}", highlight=False)
    m = result.manifest
    out.print(f"{m['name']} {m['version']} -> {result.path}  fingerprint {m['fingerprint']}", highlight=False)


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
    from probes import api

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
