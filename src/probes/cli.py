"""The `probes` command line. Thin: each command parses flags and calls one function.

Errors caused by input (`ProbeError`) are printed as one clear message with exit code 1;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from promptgen.errors import ProbeError

app = typer.Typer(
    name="probes",
    help="Build, run, analyse and publish the social-bias probe datasets (see README.md).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err = Console(stderr=True)
out = Console()

SourcesOpt = Annotated[
    Path | None,
    typer.Option(
        "--sources",
        envvar="PROBES_SOURCES",
        help="Folder with the source files laid out as in the recipe's `path` fields "
        "(e.g. ../shared/sources). Nothing is downloaded when it is given.",
        file_okay=False,
    ),
]
CacheOpt = Annotated[
    Path | None,
    typer.Option(
        "--cache-dir",
        envvar="PROBES_CACHE",
        help="Download cache for sources (default ~/.cache/social-bias-probes/sources).",
        file_okay=False,
    ),
]
OfflineOpt = Annotated[
    bool,
    typer.Option("--offline", envvar="PROBES_OFFLINE", help="Never download; use --sources or the cache only."),
]
RecipeArg = Annotated[
    str,
    typer.Argument(help="Dataset name (a recipe in builders/, e.g. talent-or-luck) or a path to a recipe YAML."),
]


def _fail(exc: Exception) -> None:
    err.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(code=1)


@app.callback()
def main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log debug messages.")] = False,
) -> None:
    """Social-bias probes: build prompt datasets, score models, recompute the papers' metrics."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


@app.command()
def build(
    name: RecipeArg,
    out_dir: Annotated[
        Path, typer.Option("--out", help="Parent folder; the dataset is written to OUT/<name>/.", file_okay=False)
    ] = Path("datasets"),
    sources: SourcesOpt = None,
    cache_dir: CacheOpt = None,
    offline: OfflineOpt = False,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="Build the full cross product of every setting (OUT/<name>-full); "
            "the default recipe samples to the paper's scale.",
        ),
    ] = False,
    max_events: Annotated[
        int | None,
        typer.Option(
            "--max-events",
            min=1,
            help="Event-based datasets (intergroup-empathy): build from N source events drawn evenly across "
            "emotions (seeded), same structure; written to OUT/<name>-eventsN.",
        ),
    ] = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an existing OUT/<name> (swapped in only when complete).")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
) -> None:
    """Build a Hub-ready prompt dataset folder from its recipe and sources.

    Deterministic: the same recipe and sources give byte-identical parquet files and the
    same fingerprint. Atomic: OUT/<name> appears complete or not at all.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from promptgen.build import build as run_build

    started = time.perf_counter()
    progress = Progress(
        TextColumn("[bold]{task.description:<16}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=quiet,
        transient=False,
    )
    tasks: dict[str, int] = {}

    def on_plan(plan) -> None:
        for config in plan.configs:
            tasks[config.name] = progress.add_task(config.name, total=config.expected_rows)

    def on_rows(config: str, n: int) -> None:
        progress.advance(tasks[config], n)

    try:
        with progress:
            result = run_build(
                name,
                out_dir=out_dir,
                sources_dir=sources,
                cache_dir=cache_dir,
                offline=offline,
                full=full,
                max_events=max_events,
                overwrite=overwrite,
                on_rows=on_rows,
                on_plan=on_plan,
            )
    except ProbeError as exc:
        _fail(exc)
    if not quiet:
        m = result.manifest
        table = Table(title=f"{m['name']} {m['version']} -> {result.path}")
        table.add_column("config")
        table.add_column("rows", justify="right")
        table.add_column("shards", justify="right")
        for config, info in m["configs"].items():
            table.add_row(config, f"{info['rows']:,}", str(len(info["files"])))
        out.print(table)
        out.print(f"fingerprint {m['fingerprint']}  ({time.perf_counter() - started:.1f} s)")


def _progress_hooks(progress: Any, label: str) -> tuple[Any, Any]:
    """(on_start, on_advance) callbacks of a run that drive `progress`, with items/s over this run's items."""
    state = {"task": 0, "started": 0.0, "scored": 0}

    def on_start(total: int, done: int) -> None:
        state["task"] = progress.add_task(label, total=total, completed=done, rate="")
        state["started"] = time.perf_counter()

    def on_advance(n: int) -> None:
        state["scored"] += n
        elapsed = time.perf_counter() - state["started"]
        progress.update(state["task"], advance=n, rate=f"{state['scored'] / elapsed:.2f} items/s" if elapsed else "")

    return on_start, on_advance


@app.command()
def run(
    dataset: Annotated[str, typer.Argument(help="Prompt dataset: a local Hub-ready folder or a Hub repo id.")],
    config: Annotated[str, typer.Option("--config", "-c", help="Config of the prompt dataset to score.")],
    model: Annotated[str, typer.Option("--model", "-m", help="Model: a local transformers folder or a Hub id.")],
    results: Annotated[
        Path, typer.Option("--out", help="Result dataset folder (created; shared by shards and reruns).")
    ],
    backend_name: Annotated[
        str, typer.Option("--backend", help="Scoring backend: hf (transformers) or vllm (vLLM offline engine).")
    ] = "hf",
    scoring: Annotated[
        str,
        typer.Option(
            "--scoring",
            help="sentence (choice: option texts' log-probabilities), letter (choice: the label token), or "
            "generate (generate text and parse the answer). Number items are read exactly in the first two.",
        ),
    ] = "sentence",
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="Only the first N items (of the shard).")] = None,
    shard: Annotated[
        str | None, typer.Option("--shard", help="i/n: score the i-th of n shards (split by a hash of the item id).")
    ] = None,
    chat: Annotated[
        bool | None,
        typer.Option("--chat/--no-chat", help="Use the chat template (default: when the tokenizer has one)."),
    ] = None,
    batch_size: Annotated[int, typer.Option("--batch-size", min=1, help="Items per backend call.")] = 16,
    flush_every: Annotated[
        int, typer.Option("--flush-every", min=1, help="Write a result part every N items (resume granularity).")
    ] = 64,
    dtype: Annotated[str, typer.Option("--dtype", help="Model weights dtype: float32, bfloat16, float16.")] = (
        "float32"
    ),
    device: Annotated[str, typer.Option("--device", help="torch device, e.g. cpu or cuda.")] = "cpu",
    revision: Annotated[str | None, typer.Option("--revision", help="Prompt dataset revision (Hub).")] = None,
    model_revision: Annotated[str | None, typer.Option("--model-revision", help="Model revision (Hub).")] = None,
    gguf_file: Annotated[
        str | None, typer.Option("--gguf-file", help="hf backend: load this GGUF file of the model folder / repo.")
    ] = None,
    prefix_caching: Annotated[
        bool, typer.Option("--prefix-caching/--no-prefix-caching", help="vllm backend: reuse shared prompt prefixes.")
    ] = True,
    enforce_eager: Annotated[
        bool, typer.Option("--enforce-eager", help="vllm backend: no graph capture/compilation (faster start).")
    ] = False,
    gpu_memory_utilization: Annotated[
        float, typer.Option("--gpu-memory-utilization", min=0.01, max=1.0, help="vllm backend: memory fraction.")
    ] = 0.3,
    max_model_len: Annotated[
        int, typer.Option("--max-model-len", min=16, help="vllm backend: longest prompt + answer in tokens.")
    ] = 4096,
    block_size: Annotated[
        int | None,
        typer.Option("--block-size", min=16, help="vllm backend: KV-cache block (prefix-cache unit) in tokens."),
    ] = None,
    temperature: Annotated[
        float, typer.Option("--temperature", min=0.0, help="generate: 0 is greedy; above 0 samples.")
    ] = 0.0,
    top_p: Annotated[float, typer.Option("--top-p", min=0.0, max=1.0, help="generate: nucleus sampling mass.")] = 1.0,
    max_new_tokens: Annotated[
        int, typer.Option("--max-new-tokens", min=1, help="generate: most tokens generated per item.")
    ] = 16,
    seed: Annotated[int, typer.Option("--seed", help="generate: base seed (each item's is derived from its id).")] = 0,
    use_ray: Annotated[
        bool, typer.Option("--ray", help="Score on a Ray Data actor pool (RAY_ADDRESS, else a local Ray); same OUT.")
    ] = False,
    ray_workers: Annotated[
        int, typer.Option("--ray-workers", min=1, help="--ray: model replicas (one GPU each with --device cuda).")
    ] = 1,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Score one config of a prompt dataset with a model into a Hub-ready result folder.

    Resumable: rerunning the same command skips the items already scored with the same model
    revision and scoring settings. `--shard i/n` workers can fill one OUT folder together.
    """
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from runners import loop
    from runners.results import parse_shard
    from runners.run import ScoringSettings

    progress = Progress(
        TextColumn("[bold]{task.description:<16}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=quiet,
    )
    try:
        if backend_name not in loop.BACKENDS:
            raise ProbeError(f"--backend must be one of {', '.join(loop.BACKENDS)}, got {backend_name!r}")
        if scoring not in ("sentence", "letter", "generate"):
            raise ProbeError(f"--scoring must be sentence, letter or generate, got {scoring!r}")
        shard_ix = parse_shard(shard)
        if scoring == "generate":
            settings = ScoringSettings(
                mode="generate", temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed
            )
        else:
            settings = ScoringSettings(choice_mode=scoring)
        if results.exists() and not results.is_dir():
            raise ProbeError(f"--out {results} exists and is not a folder")
        prompts = loop.load_prompt_config(dataset, config, revision=revision)
        if use_ray:  # one model replica per Ray actor (runners.ray_run); this process loads no model
            from runners.ray_run import run_config_ray

            on_start, on_advance = _progress_hooks(progress, config)
            load_options = {"gguf_file": gguf_file, "prefix_caching": prefix_caching, "enforce_eager": enforce_eager}
            load_options.update(
                gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len, block_size=block_size
            )
            with progress:
                summary = run_config_ray(
                    prompts,
                    model,
                    results,
                    model_revision=model_revision,
                    settings=settings,
                    chat=chat,
                    backend=backend_name,
                    dtype=dtype,
                    device=device,
                    num_workers=ray_workers,
                    shard=shard_ix,
                    limit=limit,
                    batch_size=batch_size,
                    flush_every=flush_every,
                    load_options=load_options,
                    on_start=on_start,
                    on_advance=on_advance,
                )
            err.print(summary.line(), highlight=False)
            out.print(f"results: {summary.key_dir}", highlight=False)
            return
        backend, tokenizer, key_revision = loop.load_backend(
            model,
            backend=backend_name,
            revision=model_revision,
            dtype=dtype,
            device=device,
            gguf_file=gguf_file,
            prefix_caching=prefix_caching,
            enforce_eager=enforce_eager,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            block_size=block_size,
        )
        state = {"task": 0, "started": 0.0, "scored": 0}

        def on_start(total: int, done: int) -> None:
            state["task"] = progress.add_task(config, total=total, completed=done, rate="")
            state["started"] = time.perf_counter()

        def on_advance(n: int) -> None:
            # items/s over the items scored by this run (resumed items are not counted)
            state["scored"] += n
            elapsed = time.perf_counter() - state["started"]
            rate = f"{state['scored'] / elapsed:.2f} items/s" if elapsed > 0 else ""
            progress.update(state["task"], advance=n, rate=rate)

        try:
            with progress:
                summary = loop.run_config(
                    prompts,
                    backend,
                    tokenizer,
                    results,
                    model_revision=key_revision,
                    settings=settings,
                    chat=chat,
                    shard=shard_ix,
                    limit=limit,
                    batch_size=batch_size,
                    flush_every=flush_every,
                    dtype=dtype,
                    on_start=on_start,
                    on_advance=on_advance,
                )
        finally:
            if callable(getattr(backend, "close", None)):
                backend.close()
    except ProbeError as exc:
        _fail(exc)
    err.print(summary.line(), highlight=False)
    out.print(f"results: {summary.key_dir}", highlight=False)


@app.command()
def lint(
    name: RecipeArg,
    sources: SourcesOpt = None,
    cache_dir: CacheOpt = None,
    offline: OfflineOpt = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON instead of tables.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Exit with code 2 when there is any warning.")] = False,
) -> None:
    """Lint a recipe's sources (labels, pronouns, option balance, applied corrections)."""
    from promptgen.attribution_dataset import lint_report, read_release
    from promptgen.recipe import load_recipe
    from promptgen.sources import resolve_sources

    try:
        recipe = load_recipe(name)
        if recipe.builder != "attribution":
            raise ProbeError(f"no lint is defined for builder {recipe.builder!r}")
        resolved = resolve_sources(recipe.sources, sources_dir=sources, cache_dir=cache_dir, offline=offline)
        report = lint_report(*read_release(recipe, resolved))
    except ProbeError as exc:
        _fail(exc)
    if as_json:
        out.print_json(json.dumps(report))
    else:
        table = Table(title=f"lint: {recipe.name} ({len(report['findings'])} findings)")
        for col in ("check", "severity", "where", "finding"):
            table.add_column(col, overflow="fold")
        for f in report["findings"]:
            table.add_row(f["check"], f["severity"], f["where"], f["message"])
        out.print(table)
        bal = Table(title="option length balance (longest / shortest option)")
        for col in ("setting", "templates", "mean ratio", "max ratio", "share > 2"):
            bal.add_column(col)
        for setting, b in report["option_length_balance"].items():
            bal.add_row(
                setting,
                str(b["templates"]),
                str(b["mean_length_ratio"]),
                str(b["max_length_ratio"]),
                str(b["share_over_2"]),
            )
        out.print(bal)
        for a in report["text_corrections_applied"]:
            out.print(
                f"corrected: {a['file']}: {a['rule']['find']!r} -> {a['rule']['replace']!r} "
                f"({a['strings_changed']} strings): {a['rule']['reason']}"
            )
        for f in report["label_corrections"]:
            out.print(f"corrected label: {f['dimension']}: {f['original']!r} -> {f['corrected']!r}: {f['reason']}")
    if strict and any(f["severity"] == "warning" for f in report["findings"]):
        raise typer.Exit(code=2)


@app.command("curate-pairs")
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
    out_dir: Annotated[
        Path,
        typer.Option(
            "--out", help="Parent folder; the new dataset version is written to OUT/<name>/.", file_okay=False
        ),
    ],
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
    key: Annotated[
        str | None,
        typer.Option(
            "--key", help="Result key folder (<model>-<hash>) when RESULTS holds race_probe rows of several keys."
        ),
    ] = None,
    recipe: Annotated[
        str,
        typer.Option("--recipe", help="Recipe the dataset is rebuilt from; must be the one --prompts was built from."),
    ] = "trust-game",
    sources: SourcesOpt = None,
    cache_dir: CacheOpt = None,
    offline: OfflineOpt = False,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an existing OUT/<name> (swapped in only when complete).")
    ] = False,
) -> None:
    """Select a model's Trust Game pairs from its race-probe scores (DESIGN section 5, step 7).

    Log-odds log P(True) - log P(False) per title, surname and race; a pair is kept for its seed
    race only when that race has the largest log-odds, the top --per-gender per race and gender
    by the gap to the runner-up (fewer when fewer qualify: recorded, never padded). The dataset is
    rebuilt from its recipe and sources with configs pairs_<S> and games_<S> as a new version
    (<recipe version>+pairs.<hash>). Atomic: on any error nothing is written.
    """
    from promptgen.trust_game_curate import curate_pairs

    try:
        result = curate_pairs(
            results,
            prompts,
            out_dir,
            model_slug=model_slug,
            per_gender=per_gender,
            variant=variant,
            key=key,
            recipe=recipe,
            sources_dir=sources,
            cache_dir=cache_dir,
            offline=offline,
            overwrite=overwrite,
        )
    except ProbeError as exc:
        _fail(exc)
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


@app.command("recipes")
def list_recipes_cmd() -> None:
    """List the dataset recipes found in builders/."""
    from promptgen.recipe import list_recipes, load_recipe

    table = Table()
    for col in ("name", "version", "builder", "recipe"):
        table.add_column(col)
    for name, path in list_recipes().items():
        try:
            r = load_recipe(str(path))
            table.add_row(name, r.version, r.builder, str(path))
        except ProbeError as exc:
            table.add_row(name, "?", "?", f"{path} (invalid: {exc})")
    out.print(table)


@app.command("publish")
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
            help="List every file (add/update/unchanged/delete) and the commit it would make; only reads from "
            "the Hub, and works offline (then every file is an add).",
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
    Remote files under data/ that the folder no longer has are deleted in the same commit (older tags keep them).
    The token comes from `hf auth login` or HF_TOKEN, never from a flag, and is scrubbed from every error.
    """
    from probes.publish import plan_table
    from probes.publish import publish as run_publish

    try:
        result = run_publish(
            folder, repo_id, revision_tag=revision_tag, private=private, dry_run=dry_run, message=message
        )
    except ProbeError as exc:
        _fail(exc)
    for note in result.notes:
        err.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
    out.print(plan_table(result, all_files=dry_run))
    for line in result.lines():
        out.print(line, highlight=False, markup=False, soft_wrap=True)


if __name__ == "__main__":
    app()
