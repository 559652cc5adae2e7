"""`probes run`: one config of a prompt dataset + a model -> a result folder (`probes.api.run`)."""

from __future__ import annotations

from typing import Annotated

import typer

from promptgen.core.errors import ProbeError

from . import options as opt
from .shared import _ENGINE_THREADS, _fail, _progress, _progress_hooks, _warn, err, out


def run(
    dataset: Annotated[str, typer.Argument(help="Prompt dataset: a local Hub-ready folder or a Hub repo id.")],
    config: Annotated[str, typer.Option("--config", "-c", help="Config of the prompt dataset to score.")],
    model: opt.Model,
    results: Annotated[
        str,
        typer.Option(
            "--out",
            help="Result dataset folder (created; shared by shards and reruns; never a prompt dataset, "
            "an input or a folder of other files).",
            metavar="DIR",
        ),
    ],
    model_name: opt.ModelName = None,
    backend_name: opt.Backend = "hf",
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
    limit: opt.Limit = None,
    shard: Annotated[
        str | None, typer.Option("--shard", help="i/n: score the i-th of n shards (split by a hash of the item id).")
    ] = None,
    chat: opt.Chat = None,
    batch_size: opt.BatchSize = None,
    flush_every: opt.FlushEvery = 64,
    dtype: opt.Dtype = "auto",
    device: opt.Device = "auto",
    device_map: opt.DeviceMap = None,
    tensor_parallel_size: opt.TensorParallel = 1,
    revision: opt.Revision = None,
    model_revision: opt.ModelRevision = None,
    gguf_file: opt.GgufFile = None,
    prefix_caching: opt.PrefixCaching = True,
    enforce_eager: opt.EnforceEager = False,
    gpu_memory_utilization: opt.GpuMemory = None,
    max_model_len: opt.MaxModelLen = None,
    block_size: opt.BlockSize = None,
    max_logit_rows: opt.MaxLogitRows = None,
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
    max_new_tokens: opt.MaxNewTokens = 16,
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
    quiet: opt.QuietRun = False,
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
        request = api.RunRequest(
            dataset,
            config,
            model,
            results,
            revision=revision,
            model_name=model_name,
            settings=api.scoring_settings(
                scoring,
                length_normalize=length_normalize,
                temperature=temperature,
                top_p=top_p,
                max_new_tokens=max_new_tokens,
                seed=seed,
                number_mode=number_mode,
            ),
            load=api.LoadOptions(
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
            ),
            chat=chat,
            shard=shard,
            limit=limit,
            batch_size=batch_size,
            flush_every=flush_every,
            ray=use_ray,
            ray_workers=ray_workers,
        )
        with progress:
            summary = api.run(request, on_start=on_start, on_advance=on_advance, on_warning=_warn)
    except ProbeError as exc:
        _fail(exc)
    err.print(summary.line(), highlight=False)
    out.print(f"results: {summary.key_dir}", highlight=False)
