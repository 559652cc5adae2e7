"""`probes curate-pairs`: the Trust Game's own command, a model's race-probe results -> the dataset's pairs.

Registered by the probe's spec (`promptgen.trust_game.spec`, `commands`), so the command line names
no probe; it parses flags, calls `probes.api.curate_pairs` (`pair_curation.curate_pairs`) and prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from probes.cli import options as opt
from probes.cli.groups import takes
from probes.cli.shared import err, out


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
    from probes import api  # pandas and the build are imported by the command, not its --help

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
