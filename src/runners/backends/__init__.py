"""The scoring backends by `--backend` name: one registry that every caller reads.

A backend is registered once, as a `BackendSpec` (lm-eval's `@register_model`, made lazy): its
name, the extras it needs, the load options it honours, how Ray places a replica, whether it
starts an engine, and where its loader and its token accounting live ("module:function",
imported on first use, so registering costs nothing and `import runners` needs no torch).
Nothing else in the project branches on a backend's name: loading (`runners.backends.load`), the
drivers, the extras check, plans and quotes and the CLI all read the spec.

A new backend is a package under `runners/backends/` (or any importable module) with a class
that implements `protocol.Backend` and a loader, plus one `register(BackendSpec(...))`
(docs/ARCHITECTURE.md, "Extending"). The three built in register below, from their own `spec`
modules; a module outside the project registers by being named in `PROBES_PLUGINS`
(`promptgen.core.plugins`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from promptgen.core.errors import ProbeError
from promptgen.core.plugins import load_plugins, resolve_reference
from runners.extras import require

#: load options only some backends honour (`BackendSpec.options`), by the `LoadOptions` field they read
DEVICE_MAP, GGUF_FILE, QUANTIZED_WEIGHTS, TENSOR_PARALLEL = "device_map", "gguf_file", "quantized", "tensor_parallel"
#: engine settings a backend may take (`BackendSpec.options`): vLLM's memory fraction, context, cache blocks
ENGINE_MEMORY = "engine_memory"
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


from .hf.spec import HF  # noqa: E402 - registers the built-in backends once the registry exists
from .vllm.spec import VLLM  # noqa: E402

# isort: split
# a model behind a server, registered after the in-process backends (`--help` and plans list them in this order)
from .openai.spec import OPENAI  # noqa: E402

#: the backend a run uses when none is named
DEFAULT_BACKEND = HF.name

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "HF",
    "OPENAI",
    "SERVER",
    "VLLM",
    "BackendSpec",
    "Resolved",
    "backend_spec",
    "backends_taking",
    "priced_backends",
    "register",
    "require_for_scoring",
]

load_plugins()  # PROBES_PLUGINS: third-party modules that register their own backends (or probes)
