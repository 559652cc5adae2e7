"""`probes run` as one call: a prompt config + a model -> a result folder, on this process or on Ray.

The two drivers (`local_run.run_config` here, `ray_run.run_config_ray` on a Ray actor pool) share
one `session.Session`; this module is what chooses between them and loads the model, so a
notebook gets exactly what the command line does::

    from runners.score import LoadOptions, score
    from runners.scoring_settings import scoring_settings

    summary = score("datasets/talent-or-luck", "single_actor", "HuggingFaceTB/SmolLM2-135M-Instruct",
                    "results/smollm2", settings=scoring_settings("sentence"), limit=40)

`LoadOptions` is the one home of the backend options (dtype, device, vLLM memory, ...): both
`probes run` and `probes rewrite` build it, and both drivers read it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from promptgen.core.errors import ProbeError
from promptgen.core.outputs import Reference

from . import backend, local_run, models
from .device import AUTO, RunnerWarning
from .extras import require_for_scoring
from .prompts import PromptConfig, check_scoring_mode, load_prompt_config
from .results import parse_shard
from .scoring_settings import ScoringSettings
from .session import RunSummary, check_out_folder


@dataclass(frozen=True)
class LoadOptions:
    """How the model is loaded (the `probes run` options of the same names); `models.load_backend`'s keywords."""

    backend: str = "hf"
    revision: str | None = None
    dtype: str = AUTO
    device: str = AUTO
    device_map: str | None = None
    gguf_file: str | None = None
    prefix_caching: bool = True
    enforce_eager: bool = False
    gpu_memory_utilization: float | None = None
    max_model_len: int | None = None
    block_size: int | None = None
    max_batch_tokens: int | None = None
    max_logit_rows: int | None = None
    tensor_parallel_size: int = 1

    def __post_init__(self) -> None:
        if self.backend not in backend.BACKENDS:
            raise ProbeError(f"--backend must be one of {', '.join(backend.BACKENDS)}, got {self.backend!r}")

    def load_kwargs(self) -> dict[str, Any]:
        """Keywords of `models.load_backend` (all of them but `needed_tokens`)."""
        return asdict(self)

    def replica_kwargs(self) -> dict[str, Any]:
        """What every Ray replica passes to `models.load_backend` beyond the model, backend, dtype and device."""
        kwargs = asdict(self)
        for name in ("backend", "revision", "dtype", "device"):
            kwargs.pop(name)
        return kwargs


@contextmanager
def warnings_to(on_warning: Callable[[str], None] | None) -> Iterator[None]:
    """Hand each `RunnerWarning` raised inside the block to `on_warning`; other warnings pass through."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RunnerWarning)
        yield
    for warning in caught:
        if issubclass(warning.category, RunnerWarning) and on_warning is not None:
            on_warning(str(warning.message))
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)


def run_loaded(
    prompts: PromptConfig,
    model: str,
    results: Path,
    *,
    settings: ScoringSettings,
    load: LoadOptions,
    model_name: str | None = None,
    chat: bool | None = None,
    shard: tuple[int, int] = (0, 1),
    limit: int | None = None,
    batch_size: int | None = None,
    flush_every: int = 64,
    on_start: Callable[[int, int], None] | None = None,
    on_advance: Callable[[int], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> RunSummary:
    """Load the model in this process, run one prompt config into `results`, always close the engine.

    vLLM's `max_model_len` left out follows the items (`runners.context_length`). Warnings of
    the loading (`RunnerWarning`: a GPU-sized model on the CPU) go to `on_warning`.
    """
    kwargs = load.load_kwargs()
    if load.backend == "vllm":
        kwargs["needed_tokens"] = models.needs_of(prompts, settings, chat, shard=shard, limit=limit)
    with warnings_to(on_warning):
        backend, tokenizer, key_revision = models.load_backend(model, **kwargs)
    try:
        return local_run.run_config(
            prompts,
            backend,
            tokenizer,
            results,
            model_revision=key_revision,
            model_name=model_name,
            settings=settings,
            chat=chat,
            shard=shard,
            limit=limit,
            batch_size=batch_size,
            flush_every=flush_every,
            dtype=load.dtype,
            on_start=on_start,
            on_advance=on_advance,
        )
    finally:
        if callable(getattr(backend, "close", None)):
            backend.close()  # vLLM aborts the process at exit when its engine is left running


def score(
    dataset: str | Path,
    config: str,
    model: str,
    results: str | Path,
    *,
    settings: ScoringSettings | None = None,
    load: LoadOptions | None = None,
    model_name: str | None = None,
    chat: bool | None = None,
    shard: str | tuple[int, int] | None = None,
    limit: int | None = None,
    batch_size: int | None = None,
    flush_every: int = 64,
    revision: str | None = None,
    ray: bool = False,
    ray_workers: int = 1,
    on_start: Callable[[int, int], None] | None = None,
    on_advance: Callable[[int], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> RunSummary:
    """Score one config of a prompt dataset with a model into a resumable result folder (`probes run`).

    Everything that can be checked without a model is checked first (extras, options, the
    output folder, the prompt config and the scoring mode), so a mistake costs no model load.
    `ray=True` scores on `ray_workers` replicas (`runners.ray_run`); this process loads none.
    """
    settings = settings or ScoringSettings()
    load = load or LoadOptions()
    require_for_scoring(backend=load.backend, ray=ray, what="probes run")
    shard_ix = shard if isinstance(shard, tuple) else parse_shard(shard)
    # empty, a file, a prompt dataset, an input or unwritable: one line before a model loads
    results = check_out_folder(results, inputs=[("DATASET", dataset), Reference("--model", model)])
    prompts = load_prompt_config(str(dataset), config, revision=revision, chat=chat)
    check_scoring_mode(prompts, settings)
    common = dict(
        model_name=model_name,
        settings=settings,
        chat=chat,
        shard=shard_ix,
        limit=limit,
        batch_size=batch_size,
        flush_every=flush_every,
        on_start=on_start,
        on_advance=on_advance,
    )
    if ray:
        from .ray_run import run_config_ray

        return run_config_ray(
            prompts,
            model,
            results,
            model_revision=load.revision,
            backend=load.backend,
            dtype=load.dtype,
            device=load.device,
            num_workers=ray_workers,
            load_options=load.replica_kwargs(),
            **common,
        )
    return run_loaded(prompts, model, results, load=load, on_warning=on_warning, **common)
