"""What one `probes run` asks for: `RunRequest`, and `LoadOptions`, how its model is loaded.

Built once (by the command line, or by a notebook through `probes.api.run`) and handed down
unchanged: `runners.run.run` checks it and picks a driver, and both drivers
(`local_run.run_config`, `ray_run.run_config_ray`) read their settings from it, so a new
option is one field here instead of a keyword re-typed at every layer.

These are plain values that import no model library; they live in their own module so that
`run` and both drivers can import them without importing each other.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .device import AUTO
from .models import check_load_options
from .results import parse_shard
from .scoring_settings import ScoringSettings


@dataclass(frozen=True)
class LoadOptions:
    """How the model is loaded (the `probes run` options of the same names); `models.load_backend`'s keywords.

    The one home of the backend options: `probes run` and `probes rewrite` build it, both
    drivers read it. The backend is checked when it is made; the other options when the model
    loads (`models.check_load_options`), after the cheaper checks of a run.
    """

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
        check_load_options(self.backend)

    def load_kwargs(self) -> dict[str, Any]:
        """Keywords of `models.load_backend` (all of them but `needed_tokens`)."""
        return asdict(self)

    def replica_kwargs(self) -> dict[str, Any]:
        """What every Ray replica passes to `models.load_backend` beyond the model, backend, dtype and device."""
        kwargs = asdict(self)
        for name in ("backend", "revision", "dtype", "device"):
            kwargs.pop(name)
        return kwargs


@dataclass(frozen=True)
class RunRequest:
    """One config of a prompt dataset, scored with one model into one result folder (`probes run`).

    `shard` is `i/n` text or an (i, n) pair (None: the whole config); `runners.run.run` checks
    it and the output folder, and passes on a request with both resolved. `settings` and
    `load` left as None are the defaults. `ray=True` scores on `ray_workers` Ray replicas.
    """

    dataset: str | Path
    config: str
    model: str
    results: str | Path
    revision: str | None = None
    model_name: str | None = None
    load: LoadOptions = field(default_factory=LoadOptions)
    settings: ScoringSettings = field(default_factory=ScoringSettings)
    chat: bool | None = None
    shard: str | tuple[int, int] | None = None
    limit: int | None = None
    batch_size: int | None = None
    flush_every: int = 64
    ray: bool = False
    ray_workers: int = 1

    def __post_init__(self) -> None:
        # None is "the default", as the keyword arguments this request replaces took it
        if self.load is None:
            object.__setattr__(self, "load", LoadOptions())
        if self.settings is None:
            object.__setattr__(self, "settings", ScoringSettings())

    @property
    def shard_range(self) -> tuple[int, int]:
        """(i, n): the shard to score (`results.parse_shard` of the text; (0, 1) when none)."""
        return self.shard if isinstance(self.shard, tuple) else parse_shard(self.shard)
