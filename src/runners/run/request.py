"""What one `probes run` asks for: `RunRequest` (its model loaded as `backends.load.LoadOptions` says).

Built once (by the command line, or by a notebook through `probes.api.run`) and handed down
unchanged: `runners.run.runner.run` checks it and picks a driver, and both drivers
(`local_driver.run_config`, `ray_driver.run_config_ray`) read their settings from it, so a new
option is one field here instead of a keyword re-typed at every layer.

These are plain values that import no model library; they live in their own module so that
`run` and both drivers can import them without importing each other. `ResolvedRun` is a request
once `runners.run.runner.resolve_protocol` has checked it against its prompt config: what `Runner.run`,
the sweep and pricing take.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from promptgen.core.errors import ProbeError
from runners.backends import backend_spec
from runners.backends.load import LoadOptions
from runners.model.identity import check_model_name
from runners.prompts import PromptConfig
from runners.results import parse_shard
from runners.scoring.settings import ScoringSettings
from runners.selection.select import Selection


@dataclass(frozen=True)
class RunRequest:
    """One config of a prompt dataset, scored with one model into one result folder (`probes run`).

    `shard` is `i/n` text or an (i, n) pair (None: the whole config); `runners.run.runner.run` checks
    it and the output folder, and passes on a request with both resolved. `load` left as None
    is the default. `ray=True` scores on `ray_workers` Ray replicas.

    `settings`, `chat` and `where` left as None are the dataset's declared protocol (the paper's
    scoring, `promptgen.protocols`): `settings` may instead be a complete `ScoringSettings`, or a
    mapping of `scoring_settings` keywords (the flags given) laid over the protocol. `run`
    resolves them (`runners.scoring.settings.resolve_scoring`) and passes on a request with a
    `ScoringSettings`, the prompt form and the row selection decided.
    """

    dataset: str | Path
    config: str
    model: str
    results: str | Path
    revision: str | None = None
    model_name: str | None = None
    load: LoadOptions = field(default_factory=LoadOptions)
    settings: ScoringSettings | Mapping[str, Any] | None = None
    chat: bool | None = None
    #: score only the rows whose column holds one of the values (column -> values)
    where: Mapping[str, Sequence[str]] | None = None
    shard: str | tuple[int, int] | None = None
    limit: int | None = None
    #: score the rows of the first `sample` units of the config's seeded order (`runners.selection.sample`); None:
    #: all rows
    sample: int | None = None
    #: the seed of that order: the same seed gives the same units for every model
    sample_seed: int = 0
    batch_size: int | None = None
    flush_every: int = 64
    ray: bool = False
    ray_workers: int = 1
    #: the results folder may hold another build of the config's prompts: rescore the changed items
    rescore_changed: bool = False

    def __post_init__(self) -> None:
        # None is "the default", as the keyword arguments this request replaces took it
        if self.load is None:
            object.__setattr__(self, "load", LoadOptions())
        # the counts a run takes: refused here, as the request is made, never after a model has loaded
        if (self.batch_size is not None and self.batch_size < 1) or self.flush_every < 1:
            raise ProbeError("--batch-size and --flush-every must be positive")
        # a limit or sample size below 1 is one line, as the request is made
        Selection(limit=self.limit, sample=self.sample, seed=self.sample_seed)
        if self.model_name is not None:  # before the model loads, not once it has (`session.model_name_for`)
            check_model_name(self.model_name)
        if self.ray_workers < 1:
            raise ProbeError("--ray-workers must be positive")
        if self.ray and backend_spec(self.load.backend).served:
            raise ProbeError(
                f"--backend {self.load.backend} scores a model behind a server, which scales it itself: drop --ray "
                "(raise --max-concurrency instead)"
            )

    @classmethod
    def each_config(cls, model: str, **fields: Any) -> RunRequest:
        """How a sweep scores each of its configs (`probes.sweep.SweepRequest.run`): every field but the dataset, the
        config and the results folder, which the sweep sets for each config it scores."""
        return cls("", "", model, "", **fields)

    @property
    def scoring(self) -> ScoringSettings:
        """The settings a driver scores with, defined once for both drivers and the session.

        `runners.run.runner.resolve_protocol` lays the dataset's protocol under the request and passes on
        complete settings; a driver called directly scores the request's own, None being the
        project's defaults. A mapping of flags here is a caller's bug (it skipped the resolving).
        """
        if self.settings is None:
            return ScoringSettings()
        if not isinstance(self.settings, ScoringSettings):
            raise TypeError(
                "a driver needs complete ScoringSettings; resolve flags with runners.run.runner.resolve_protocol"
            )
        return self.settings

    @property
    def selection(self) -> Selection:
        """The rows it scores (`runners.selection.select`): `where` (None: the protocol's, until `resolve_protocol`
        decides it), the sample, the shard and the limit."""
        where = None if self.where is None else dict(self.where)
        return Selection(where, self.shard_range, self.limit, self.sample, self.sample_seed)

    @property
    def shard_range(self) -> tuple[int, int]:
        """(i, n): the shard to score (`results.parse_shard` of the text; (0, 1) when none)."""
        return self.shard if isinstance(self.shard, tuple) else parse_shard(self.shard)


@dataclass(frozen=True)
class ResolvedRun:
    """One config checked and ready to score, before any model loads (`runners.run.runner.resolve_protocol`).

    A value, not a tuple, so every caller (`run_many`, the sweep, pricing, `probes rewrite`) reads
    the same names: `prompts` is the config restricted to the rows scored; `request` carries a
    complete `ScoringSettings`, the prompt form and the row selection decided; `protocol` is the
    run summary's protocol line (the dataset's protocol and what the flags changed).
    """

    prompts: PromptConfig
    request: RunRequest
    protocol: str

    @property
    def settings(self) -> ScoringSettings:
        """The settings it is scored with (the protocol's, with the request's flags over them)."""
        return self.request.scoring

    @property
    def chat(self) -> bool | None:
        """The prompt form decided: the chat template (True), the plain prompt (False), or the config's own."""
        return self.request.chat

    def moved_to(self, folder: Path) -> ResolvedRun:
        """The same run reading its prompt dataset from `folder` (a sweep moves its built datasets into place)."""
        prompts = replace(self.prompts, path=str(folder))
        return replace(self, prompts=prompts, request=replace(self.request, dataset=folder))
