"""`probes run` as one call: a `RunRequest` -> a result folder, on this process or on Ray.

The two drivers (`local_run.run_config` here, `ray_run.run_config_ray` on a Ray actor pool) share
one `session.Session`; this module is what checks a request, chooses between them and loads the
model, so a notebook gets exactly what the command line does::

    from runners.request import RunRequest
    from runners.run import run
    from runners.scoring_settings import scoring_settings

    summary = run(RunRequest("datasets/talent-or-luck", "single_actor", "HuggingFaceTB/SmolLM2-135M-Instruct",
                             "results/smollm2", settings=scoring_settings("sentence"), limit=40))

`run(dataset, config, model, results, limit=40, ...)` builds that request itself.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from promptgen.core.outputs import Reference

from . import local_run, models
from .device import RunnerWarning
from .extras import require_for_scoring
from .prompts import PromptConfig, check_chat_form, check_scoring_mode, load_prompt_config, select_rows
from .request import LoadOptions, RunRequest
from .scoring_settings import resolve_scoring
from .session import RunSummary, check_out_folder

__all__ = ["LoadOptions", "RunRequest", "RunSummary", "run", "run_loaded", "warnings_to"]


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
    request: RunRequest,
    *,
    on_start: Callable[[int, int], None] | None = None,
    on_advance: Callable[[int], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> RunSummary:
    """Load `request.model` in this process, run `prompts` (its config) into `request.results`, always close the engine.

    vLLM's `max_model_len` left out follows the items (`runners.context_length`). Warnings of
    the loading (`RunnerWarning`: a GPU-sized model on the CPU) go to `on_warning`.
    """
    needed = None
    if request.load.backend == "vllm":
        needed = models.needs_of(
            prompts, request.settings, request.chat, shard=request.shard_range, limit=request.limit
        )
    with warnings_to(on_warning):
        backend, tokenizer, key_revision = models.load_backend(request.model, request.load, needed_tokens=needed)
    try:
        return local_run.run_config(
            prompts,
            backend,
            tokenizer,
            request,
            model_revision=key_revision,
            on_start=on_start,
            on_advance=on_advance,
        )
    finally:
        backend.close()  # vLLM aborts the process at exit when its engine is left running


def run(
    request: RunRequest | str | Path,
    config: str | None = None,
    model: str | None = None,
    results: str | Path | None = None,
    *,
    on_start: Callable[[int, int], None] | None = None,
    on_advance: Callable[[int], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
    **options: Any,
) -> RunSummary:
    """Score one config of a prompt dataset with a model into a resumable result folder (`probes run`).

    Takes a `RunRequest`, or its fields: `run(dataset, config, model, results, settings=...,
    limit=...)` is `run(RunRequest(dataset, config, model, results, settings=..., limit=...))`.
    Everything that can be checked without a model is checked first (extras, options, the
    output folder, the prompt config and the scoring mode), so a mistake costs no model load.
    `ray=True` scores on `ray_workers` replicas (`runners.ray_run`); this process loads none.
    `on_start(total, done)` and `on_advance(n)` report progress, `on_warning(text)` a warning.
    """
    if not isinstance(request, RunRequest):
        request = RunRequest(request, config, model, results, **options)  # type: ignore[arg-type]
    elif config is not None or model is not None or results is not None or options:
        raise TypeError("run() takes a RunRequest or its fields, not both")
    require_for_scoring(backend=request.load.backend, ray=request.ray, what="probes run")
    shard = request.shard_range
    # empty, a file, a prompt dataset, an input or unwritable: one line before a model loads
    inputs = [("DATASET", request.dataset), Reference("--model", request.model)]
    request = replace(request, shard=shard, results=check_out_folder(request.results, inputs=inputs))
    prompts, request, label = resolve_protocol(request)
    if request.ray:
        from .ray_run import run_config_ray

        summary = run_config_ray(prompts, request, on_start=on_start, on_advance=on_advance)
    else:
        summary = run_loaded(prompts, request, on_start=on_start, on_advance=on_advance, on_warning=on_warning)
    return replace(summary, protocol=label)


def resolve_protocol(request: RunRequest) -> tuple[PromptConfig, RunRequest, str]:
    """Load the request's config and decide how it is scored: its protocol with the request's settings over it.

    Returns the config restricted to the rows scored (the protocol's or the request's `where`),
    the request with a `ScoringSettings`, the prompt form and the selection decided, and the
    run summary's protocol line. Every check here runs before a model loads.
    """
    prompts = load_prompt_config(str(request.dataset), request.config, revision=request.revision)
    scoring = resolve_scoring(prompts.protocol, request.settings, request.chat, request.where)
    prompts = select_rows(prompts, scoring.where)
    if scoring.chat is not None:
        check_chat_form(prompts, scoring.chat)
    check_scoring_mode(prompts, scoring.settings)
    request = replace(request, settings=scoring.settings, chat=scoring.chat, where=scoring.where)
    return prompts, request, scoring.label
