"""The backend registry: `BackendSpec`, what a loader is handed (`Resolved`), `register` and the lookups.

Its own module, below every backend: a backend's `spec` registers itself here, and a backend's code
reads `Resolved` from here, so no backend imports the `runners.backends` package, which imports every
built-in backend's spec (the backends-independent contract in pyproject.toml holds without a waiver).
The package re-exports all of it; `runners.backends` stays the public name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from promptgen.core.errors import ProbeError
from promptgen.core.plugins import resolve_reference
from runners.extras import require

#: load options only some backends honour (`BackendSpec.options`), by the `LoadOptions` field they read
DEVICE_MAP, GGUF_FILE, QUANTIZED_WEIGHTS, TENSOR_PARALLEL = "device_map", "gguf_file", "quantized", "tensor_parallel"
#: engine settings a backend may take (`BackendSpec.options`): vLLM's memory fraction, context, cache blocks
ENGINE_MEMORY = "engine_memory"
#: the backend a run uses when none is named (transformers; registered by `runners.backends`)
DEFAULT_BACKEND = "hf"
#: a server to reach (`--base-url`, the key's environment variable, concurrency, timeouts, retries, `--tokenizer`)
SERVER = "server"


@dataclass(frozen=True)
class BackendSpec:
    """What the project needs to know of a backend, without importing it."""

    #: the `--backend` value, recorded in every row and in the result key
    name: str
    #: "module:function" that loads it: `(model, options, resolved)` -> a `protocol.Backend`, where `options`
    #: are the run's `LoadOptions` and `resolved` the `Resolved` settings for this machine
    loader: str
    #: one line for `--help`
    summary: str = ""
    #: pyproject extras it needs besides `hf` (every run tokenizes with transformers)
    extras: tuple[str, ...] = ()
    #: the optional load options it honours (`DEVICE_MAP`, `GGUF_FILE`, `QUANTIZED_WEIGHTS`, `TENSOR_PARALLEL`,
    #: `ENGINE_MEMORY`, `SERVER`); any other given is refused in one line naming the backends that take it
    options: frozenset[str] = frozenset()
    #: it starts an engine whose threads outlive the run (the CLI then exits without waiting on them)
    starts_engine: bool = False
    #: its context length is fixed at load time, so the run sizes it to the items (`runners.positions_needed.needs_of`)
    sizes_context: bool = False
    #: it follows `--device`; False: it runs wherever its install runs (a GPU when there is one), so on a
    #: Ray cluster with GPUs only an explicit `--device cpu` keeps it off them
    follows_device: bool = True
    #: "module:function" counting a call's token positions: `(requests, *, items_per_call)` -> `TokenCounts`;
    #: None: plans and quotes cannot price it
    token_counts: str | None = None
    #: "module:function" pricing a sampled call for `probes plan` (`runners.plan.count.count_call`):
    #: `(token_accounting.SampledCall)` -> (`TokenCounts`, the number tries' positions)
    call_counts: str | None = None
    #: "module:function" pricing a call of generation requests for plans and quotes:
    #: `(generate_accounting.GenerateCall)`
    #: -> `GenerateCounts`, its prefill positions and its decode steps, so how many sequences it decodes at once
    #: (its own batching); None: its generation is not priced in hours (a served backend's is priced by tokens)
    generate_counts: str | None = None
    #: the model runs behind a server (it has `SERVER` options): the run loads only a tokenizer (`--tokenizer`,
    #: else `--model`), the backend keys the model by what the server reports (it has no weights to hash), and
    #: plans price it by tokens and requests, not FLOPs on a GPU of ours
    served: bool = False
    #: "module:function" checking the run's `LoadOptions` for this backend beyond what `check_load_options`
    #: checks for all (one `ProbeError` line per bad flag); None: nothing more
    check_options: str | None = None

    def takes(self, option: str) -> bool:
        return option in self.options

    def gpus_per_replica(self, tensor_parallel_size: int) -> int:
        """GPUs one replica needs: its tensor-parallel degree where it shards a model, else one."""
        return tensor_parallel_size if self.takes(TENSOR_PARALLEL) else 1

    def function(self, field: str) -> Callable[..., Any]:
        """The function a "module:function" field names, imported now."""
        target = getattr(self, field)
        if target is None:
            raise ProbeError(f"--backend {self.name} has no {field.replace('_', ' ')}")
        return resolve_reference(target)


@dataclass(frozen=True)
class Resolved:
    """What `runners.backends.load.load_backend` settled before a backend loads, passed to every loader."""

    #: the transformers tokenizer every backend's token ids come from (generation detokenises with it too)
    tokenizer: Any
    #: the Hub commit to load (None for a local folder)
    revision: str | None
    #: the weights' dtype and the device, `auto` resolved (`runners.model.device`)
    dtype: str
    device: str
    #: an engine's context length, sized to the run's items (`BackendSpec.sizes_context`), else None
    max_model_len: int | None
    #: an engine's memory fraction (`ENGINE_MEMORY`), else None
    gpu_memory_utilization: float | None
    #: keyword arguments of the checkpoint's files (`gguf_file`), for loaders that take them
    extra: dict[str, Any]


#: name -> spec, in registration order (the built-in ones first)
BACKENDS: dict[str, BackendSpec] = {}


def register(spec: BackendSpec) -> BackendSpec:
    """Add a backend; a name registered twice must be the same spec (a module imported again is fine)."""
    known = BACKENDS.get(spec.name)
    if known is not None and known != spec:
        raise ValueError(f"backend {spec.name!r} is registered already, differently")
    BACKENDS[spec.name] = spec
    return spec


def backend_spec(name: str) -> BackendSpec:
    """The spec of `--backend name`; an unknown name is one line listing the known ones."""
    try:
        return BACKENDS[name]
    except KeyError:
        raise ProbeError(f"--backend must be one of {', '.join(BACKENDS)}, got {name!r}") from None


def backends_taking(option: str) -> list[str]:
    """The backends that honour a load option, for the line that refuses it."""
    return [name for name, spec in BACKENDS.items() if spec.takes(option)]


def require_for_scoring(*, backend: str | None = None, ray: bool = False, what: str = "scoring") -> None:
    """The extras a scoring run needs: hf always (tokenizer), the backend's own (its spec), Ray for `--ray`."""
    spec = backend_spec(backend or DEFAULT_BACKEND)
    extras = ["hf"]
    if spec.extras:
        what += f" --backend {spec.name}"
        extras.extend(e for e in spec.extras if e not in extras)
    if ray:
        what += " --ray"
        extras.append("ray")
    require(what, extras)


def priced_backends() -> list[str]:
    """The backends plans can price (those with a call accounting), in registration order."""
    return [name for name, spec in BACKENDS.items() if spec.call_counts is not None]
