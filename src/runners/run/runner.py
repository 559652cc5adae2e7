"""`probes run` as one call: a `RunRequest` -> a result folder, on this process or on Ray.

The two drivers (`local_driver.run_config` here, `ray_driver.run_config_ray` on a Ray actor pool) share
one `session.Session`; this module is what checks a request, chooses between them and loads the
model, so a notebook gets exactly what the command line does::

    from runners.run.request import RunRequest
    from runners.run.runner import run
    from runners.scoring.settings import scoring_settings

    summary = run(RunRequest("datasets/talent-or-luck", "single_actor", "HuggingFaceTB/SmolLM2-135M-Instruct",
                             "results/smollm2", settings=scoring_settings("sentence"), limit=40))

`run(dataset, config, model, results, limit=40, ...)` builds that request itself.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from promptgen.core.errors import ProbeError
from promptgen.core.outputs import Reference
from promptgen.hub import remote
from promptgen.hub.remote import HubRef
from runners.backends import backend_spec, load, require_for_scoring
from runners.model.device import RunnerWarning
from runners.prompts import (
    check_chat_form,
    check_scoring_mode,
    hub_ref,
    limit_warning,
    load_prompt_config,
    select_prompts,
)
from runners.results.check import check_same_prompts
from runners.results.out_folder import check_out_folder
from runners.results.summary import RunSummary
from runners.run import local_driver
from runners.run.request import LoadOptions, ResolvedRun, RunRequest
from runners.run.sizing import needs_of
from runners.scoring.settings import resolve_scoring

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from runners.backends.protocol import Backend

__all__ = [
    "LoadOptions",
    "ResolvedRun",
    "RunRequest",
    "RunSummary",
    "Runner",
    "expand_configs",
    "run",
    "run_many",
    "warnings_to",
]


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


class Runner:
    """A model loaded once in this process, scoring config after config on it, closed at the end.

    The one way every caller scores on a loaded model: `run_many`, the sweep, the demo and
    `probes rewrite --model` each open a `Runner` and hand it resolved configs (`resolve_protocol`),
    so the load, its warnings, vLLM's context size and the close are written once::

        with Runner.load(model, load, sized_for=[resolved]) as runner:
            summary = runner.run(resolved)

    `sized_for`: the resolved runs it will score, which size vLLM's `max_model_len` when
    left out (`runners.model.context_length`: the longest items of them all). Warnings of the
    loading (`RunnerWarning`: a GPU-sized model on the CPU) go to `on_warning`.
    """

    def __init__(
        self,
        model: str,
        load_options: LoadOptions,
        backend: Backend,
        tokenizer: PreTrainedTokenizerBase,
        revision: str,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.model, self.load_options = model, load_options
        self.backend, self.tokenizer, self.revision = backend, tokenizer, revision
        #: the model's config as it loaded (`load.LoadedModel.config`): what a sweep prices it by
        self.config = config

    @classmethod
    def load(
        cls,
        model: str,
        load_options: LoadOptions,
        *,
        sized_for: Sequence[ResolvedRun] = (),
        on_warning: Callable[[str], None] | None = None,
    ) -> Runner:
        needed = None
        if sized_for and backend_spec(load_options.backend).sizes_context:
            sizes = [needs_of(run.prompts, run.settings, run.chat, rows=run.request.selection) for run in sized_for]

            def needed(tokenizer: Any) -> int:
                return max(size(tokenizer) for size in sizes)

        with warnings_to(on_warning):
            loaded = load.load_backend(model, load_options, needed_tokens=needed)
        return cls(model, load_options, *loaded)

    def run(
        self,
        resolved: ResolvedRun,
        *,
        on_start: Callable[[int, int], None] | None = None,
        on_advance: Callable[[int], None] | None = None,
    ) -> RunSummary:
        """Score one resolved config (`resolve_protocol`) into its request's folder; its summary."""
        request = resolved.request
        if (request.model, request.load) != (self.model, self.load_options):
            raise ValueError(
                f"a Runner of {self.model!r} cannot score a request for {request.model!r} loaded otherwise"
            )
        return local_driver.run_config(
            resolved.prompts, self.backend, self.tokenizer, request, model_revision=self.revision,
            on_start=on_start, on_advance=on_advance,
        )  # fmt: skip

    def close(self) -> None:
        self.backend.close()  # vLLM aborts the process at exit when its engine is left running

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def expand_configs(
    dataset: str | Path, patterns: Sequence[str], *, ref: HubRef | None = None, revision: str | None = None
) -> list[str]:
    """The config names `patterns` name (exact names or shell globs such as `race_*`), each once, in order.

    A local folder's configs are its `data/<config>/` folders; a Hub dataset's are its card's
    configs at the commit (`ref`, else `revision` resolved: `promptgen.hub.remote.config_names`).
    A pattern that matches no config is one `ProbeError` naming the configs there are, before a
    model loads.
    """
    from fnmatch import fnmatchcase

    from promptgen.hub.read import config_names, local_folder

    if not any(set(p) & set("*?[") for p in patterns):
        return list(dict.fromkeys(patterns))
    folder = local_folder(str(dataset), "prompt dataset")
    if folder is not None:
        names = config_names(folder)
    else:
        names = remote.config_names(ref or remote.resolve(str(dataset), revision))
    out: list[str] = []
    for pattern in patterns:
        hits = [n for n in names if fnmatchcase(n, pattern)]
        if not hits:
            raise ProbeError(f"--config {pattern!r} matches no config of {dataset} (configs: {', '.join(names)})")
        out.extend(h for h in hits if h not in out)
    return out


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
    limit=...)` is `run(RunRequest(dataset, config, model, results, settings=..., limit=...))`
    and returns its `RunSummary`. Several configs, or glob patterns, are `run_many`.
    Everything that can be checked without a model is checked first (extras, options, the
    output folder, the prompt config and the scoring mode), so a mistake costs no model load.
    `ray=True` scores on `ray_workers` replicas (`runners.run.ray_driver`); this process loads none.
    `on_start(total, done)` and `on_advance(n)` report progress, `on_warning(text)` a warning.
    """
    if isinstance(request, RunRequest):
        if config is not None or model is not None or results is not None or options:
            raise TypeError("run() takes a RunRequest or its fields, not both")
    elif not isinstance(config, str) or is_pattern(config):
        raise TypeError(f"run() scores one config, got {config!r}; run_many() takes a list or glob patterns")
    elif model is None or results is None:
        raise TypeError("run() takes a RunRequest, or a dataset, config, model and results folder")
    else:
        request = RunRequest(request, config, model, results, **options)
    if is_pattern(request.config):
        raise TypeError(f"run() scores one config, got {request.config!r}; run_many() takes glob patterns")
    (summary,) = run_many([request], on_config=lambda _r: (on_start, on_advance), on_warning=on_warning)
    return summary


def is_pattern(config: str) -> bool:
    """Whether a `--config` value is a glob pattern (`race_*`) rather than a config name."""
    return bool(set(config) & set("*?["))


def run_many(
    template: RunRequest | Sequence[RunRequest] | str | Path,
    configs: str | Sequence[str] | None = None,
    model: str | None = None,
    results: str | Path | None = None,
    *,
    on_config: Callable[[RunRequest], tuple[Callable | None, Callable | None]] | None = None,
    on_warning: Callable[[str], None] | None = None,
    **options: Any,
) -> list[RunSummary]:
    """Several configs scored with the model loaded once; a summary per config, in order.

    `run_many(requests)` scores a list of `RunRequest`s (any datasets, configs, settings and
    results folders) that name one model, load and driver. Or `template` (its `config` aside) for
    each config `configs` names: names or glob patterns (`["race_*", "religion_P0S0T0"]`, or one
    pattern), each config once, in order; `template` is a `RunRequest`, or a dataset with the
    request's other fields (`run_many(dataset, ["race_*"], model, results, limit=...)`). Every
    config is loaded and checked (`resolve_protocol`) before the model loads, so a mistake in the
    last costs no scoring of the first. `on_config(request)` gives a config's (on_start,
    on_advance) progress hooks.
    """
    if isinstance(template, Sequence) and not isinstance(template, str):
        if configs is not None or model is not None or results is not None or options:
            raise TypeError("run_many() takes a list of RunRequests, or a template and its configs, not both")
        requests = list(template)
        if not requests or not all(isinstance(r, RunRequest) for r in requests):
            raise TypeError("run_many() takes a non-empty list of RunRequests")
        if len({(r.model, r.load, r.ray, r.ray_workers) for r in requests}) > 1:
            raise ValueError("run_many() loads one model: every request names the same model, load and driver")
        require_for_scoring(backend=requests[0].load.backend, ray=requests[0].ray, what="probes run")
        refs: dict[tuple[str, str | None], HubRef | None] = {}  # each Hub dataset resolved once, for all its configs
    else:
        if isinstance(template, RunRequest):
            if model is not None or results is not None or options:
                raise TypeError("run_many() takes a RunRequest or its fields, not both")
        elif model is None or results is None:
            raise TypeError("run_many() takes RunRequests, or a dataset, configs, model and results folder")
        else:
            template = RunRequest(template, "", model, results, **options)
        configs = [configs] if isinstance(configs, str) else list(configs or ())
        if not configs:
            raise ProbeError("give at least one --config")
        require_for_scoring(backend=template.load.backend, ray=template.ray, what="probes run")
        ref = hub_ref(str(template.dataset), template.revision)  # one commit for every config of the run
        requests = [replace(template, config=name) for name in expand_configs(template.dataset, configs, ref=ref)]
        refs = {(str(template.dataset), template.revision): ref}
    first = requests[0]
    resolved: list[ResolvedRun] = []
    with warnings_to(on_warning):
        for request in requests:
            where = (str(request.dataset), request.revision)
            if where not in refs:
                refs[where] = hub_ref(*where)
            resolved.append(resolve_protocol(replace(request, shard=request.shard_range), ref=refs[where]))
    hooks = on_config or (lambda _request: (None, None))
    summaries = []
    if first.ray:
        from runners.run.ray_driver import run_config_ray

        for one in resolved:
            start, advance = hooks(one.request)
            summaries.append(run_config_ray(one.prompts, one.request, on_start=start, on_advance=advance))
    else:
        with Runner.load(first.model, first.load, sized_for=resolved, on_warning=on_warning) as runner:
            for one in resolved:
                start, advance = hooks(one.request)
                summaries.append(runner.run(one, on_start=start, on_advance=advance))
    return [replace(summary, protocol=one.protocol) for summary, one in zip(summaries, resolved, strict=True)]


def resolve_protocol(
    request: RunRequest, *, ref: HubRef | None = None, limit_flag: str | None = "--limit"
) -> ResolvedRun:
    """Load the request's config and decide how it is scored: its protocol with the request's settings over it.

    Returns a `ResolvedRun`: the config holding only the rows scored, selected once
    (`runners.prompts.select_prompts`: the protocol's or the request's `where`, the sample, the shard,
    the limit), the request with a `ScoringSettings`, the prompt form and the `where` decided, and the
    run summary's protocol line. `ref`: the Hub dataset's revision already resolved to a commit
    (`hub_ref`); else it is resolved here.

    Every check of a config that needs no model is here, so each caller (`run_many`, the sweep,
    the demo, `probes rewrite`) makes all of them for every config before it loads one: the
    results folder (empty, a file, a prompt dataset, an input, unwritable, a damaged manifest),
    the rows it holds being scored on this build of the prompts (else `--rescore-changed`), the
    protocol, the prompt form and the scoring mode. The session checks only what needs the tokenizer.
    """
    # empty, a file, a prompt dataset, an input or unwritable: one line before a model loads
    inputs = [("DATASET", request.dataset), Reference("--model", request.model)]
    results = check_out_folder(request.results, inputs=inputs)
    request = replace(request, results=results)
    # with a shard or a limit (and no sample), a local config's load reads only the rows the selection keeps
    rows = request.selection
    prompts = load_prompt_config(str(request.dataset), request.config, revision=request.revision, ref=ref, rows=rows)
    tasks = prompts.dataset.unique("task") if "task" in prompts.dataset.column_names else None
    scoring = resolve_scoring(prompts.protocol, request.settings, request.chat, request.where, tasks=tasks)
    if prompts.no_protocol_reason:
        scoring = replace(scoring, label=f"{scoring.label}: {prompts.no_protocol_reason}")
    request = replace(request, settings=scoring.settings, chat=scoring.chat, where=scoring.where)
    prompts, note = select_prompts(prompts, request.selection)  # the run's rows, selected once
    if note:
        warnings.warn(note, RunnerWarning, stacklevel=2)
    partial = request.limit is not None and request.sample is None and limit_flag is not None
    if partial and (line := limit_warning(prompts, limit_flag or "")):
        warnings.warn(line, RunnerWarning, stacklevel=2)
    if scoring.chat is not None:
        check_chat_form(prompts, scoring.chat)
    check_scoring_mode(prompts, scoring.settings)
    # a folder of another build's rows: refused before any config of a sweep is scored, not after its load
    check_same_prompts(results, prompts.provenance(), rescore_changed=request.rescore_changed)
    return ResolvedRun(prompts, request, scoring.label)
