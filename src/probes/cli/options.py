"""The option types several `probes` commands share, declared once so their flags and help texts agree.

Sources (`build`, `lint`, `curate-pairs`, `rewrite`, `demo`): where recipe inputs come from.
Model (`run`, `rewrite`, and `--chat` of `plan`): the flags of `runners.request.LoadOptions`
and the run options around it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from runners.device import ITEMS_PER_CALL, MAX_LOGIT_ROWS

Sources = Annotated[
    Path | None,
    typer.Option(
        "--sources",
        envvar="PROBES_SOURCES",
        help="Folder with the source files laid out as in the recipe's `path` fields "
        "(e.g. ../shared/sources). Nothing is downloaded when it is given.",
        file_okay=False,
    ),
]
Cache = Annotated[
    Path | None,
    typer.Option(
        "--cache-dir",
        envvar="PROBES_CACHE",
        help="Download cache for sources (default ~/.cache/social-bias-probes/sources).",
        file_okay=False,
    ),
]
Offline = Annotated[
    bool,
    typer.Option("--offline", envvar="PROBES_OFFLINE", help="Never download; use --sources or the cache only."),
]
Recipe = Annotated[
    str,
    typer.Argument(help="Dataset name (a recipe in builders/, e.g. talent-or-luck) or a path to a recipe YAML."),
]


# options of the commands that load a model and score or generate through the runners (`run`, `rewrite`)
Model = Annotated[str, typer.Option("--model", "-m", help="Model: a local transformers folder or a Hub id.")]
Backend = Annotated[
    str, typer.Option("--backend", help="Scoring backend: hf (transformers) or vllm (vLLM offline engine).")
]
ModelName = Annotated[
    str | None,
    typer.Option(
        "--model-name",
        help="Portable name of the model in result rows, manifests, cards, reports and folder names "
        "(e.g. ORG/MODEL). Default: the Hub id; for a local folder, the Hub id its config.json records, "
        "else the folder's name. Never part of the result key, which is the model's content.",
    ),
]
Limit = Annotated[int | None, typer.Option("--limit", min=1, help="Only the first N items (of the shard).")]
Chat = Annotated[
    bool | None,
    typer.Option("--chat/--no-chat", help="Use the chat template (default: when the tokenizer has one)."),
]
BatchSize = Annotated[
    int | None,
    typer.Option(
        "--batch-size",
        "--items-per-call",
        min=1,
        help=f"Items per backend call (default {ITEMS_PER_CALL['cuda']} when the model runs on CUDA, "
        f"{ITEMS_PER_CALL['cpu']} on the CPU).",
    ),
]
FlushEvery = Annotated[
    int, typer.Option("--flush-every", min=1, help="Write a result part every N items (resume granularity).")
]
Dtype = Annotated[
    str,
    typer.Option(
        "--dtype",
        help="Weights dtype: auto (the checkpoint's own, e.g. bfloat16; float32 when it states none), "
        "float32, bfloat16, float16. Part of the result key.",
    ),
]
Device = Annotated[
    str,
    typer.Option(
        "--device",
        help="Device: auto (cuda when a GPU is visible, else cpu, with a warning for a GPU-sized model), cpu, "
        "cuda, cuda:1 (hf backend; vllm runs where it is installed for, and takes its memory default from this).",
    ),
]
DeviceMap = Annotated[
    str | None,
    typer.Option(
        "--device-map", help="hf backend: auto spreads the model's layers over all visible GPUs (for large models)."
    ),
]
TensorParallel = Annotated[
    int,
    typer.Option(
        "--tensor-parallel-size", min=1, help="vllm backend: GPUs one model is sharded over (Ray: GPUs per replica)."
    ),
]
MaxLogitRows = Annotated[
    int | None,
    typer.Option(
        "--max-logit-rows",
        min=1,
        help="hf backend: logit rows (rows x positions) per continuation pass "
        f"(default {MAX_LOGIT_ROWS['cuda']} on CUDA, {MAX_LOGIT_ROWS['cpu']} on the CPU).",
    ),
]
ModelRevision = Annotated[
    str | None,
    typer.Option(
        "--model-revision",
        help="Hub model: branch, tag or commit to load (default main). It is resolved to its commit, which keys the "
        "results and is what loads; a full 40-hex commit needs no lookup.",
    ),
]
GgufFile = Annotated[
    str | None, typer.Option("--gguf-file", help="hf backend: load this GGUF file of the model folder / repo.")
]
PrefixCaching = Annotated[
    bool, typer.Option("--prefix-caching/--no-prefix-caching", help="vllm backend: reuse shared prompt prefixes.")
]
EnforceEager = Annotated[
    bool, typer.Option("--enforce-eager", help="vllm backend: no graph capture/compilation (faster start).")
]
GpuMemory = Annotated[
    float | None,
    typer.Option(
        "--gpu-memory-utilization",
        min=0.01,
        max=1.0,
        help="vllm backend: share of GPU memory for weights + KV cache (default 0.9 on CUDA, 0.3 on the CPU).",
    ),
]
MaxModelLen = Annotated[
    int | None,
    typer.Option(
        "--max-model-len",
        min=16,
        help="vllm backend: longest prompt + answer in tokens (default: what the longest items need, rounded up "
        "to 256, capped by the model's position limit; above the limit it is an error before the engine starts).",
    ),
]
BlockSize = Annotated[
    int | None,
    typer.Option("--block-size", min=16, help="vllm backend: KV-cache block (prefix-cache unit) in tokens."),
]
MaxNewTokens = Annotated[int, typer.Option("--max-new-tokens", min=1, help="generate: most tokens generated per item.")]

Revision = Annotated[str | None, typer.Option("--revision", help="Prompt dataset revision (Hub).")]
QuietRun = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
