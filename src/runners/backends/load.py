"""Check the model options and load a model into a backend: the one loader both drivers use.

`LoadOptions` holds the options every backend reads and the backend's own options object (declared
in its package), and refuses a bad one when it is made (`check_load_options` and the options class's
own checks: one line per bad flag, before any input is read). `load_backend` (a `LoadedModel`) locates
and keys the model (`model_identity.locate`), loads the shared transformers tokenizer and the backend
its spec names with `auto` settings resolved for the machine (`runners.model.device`), and checks the
weights did not change while they loaded.
The backend's own options are its own to settle (`BackendOptions`' methods, asked through `LoadOptions.own`:
its checkpoint files, a served model's tokenizer, an engine's context and memory share): nothing here reads
one by name.
`runners.run.sizing.needs_of` sizes an engine's context to the run's items.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from promptgen.core.errors import ProbeError
from runners.backends import BACKENDS, Resolved, backend_spec, require_for_scoring
from runners.backends import registry as option
from runners.backends.registry import BackendOptions, Settling
from runners.model import identity as model_identity
from runners.model.device import (
    AUTO,
    DTYPES,
    QUANTIZED,
    RunnerWarning,
    cpu_warning,
    device_type,
    is_out_of_memory,
    resolve_device,
    resolve_dtype,
)


@dataclass(frozen=True)
class LoadOptions:
    """How a model is loaded: the options every backend reads, and the backend's own (`options`).

    `options` is the backend's options object (`BackendSpec.options`: `HfOptions`, `VllmOptions`,
    `ServerOptions`, ...), a mapping of its fields, or None for its defaults; it is made and checked
    here. `LoadOptions.of(backend=..., **flags)` takes both kinds by name, as the command line gives
    them. Every option is checked when it is made (`check_load_options`), so a bad flag is one line
    before any input is read or any weights load.
    """

    backend: str = option.DEFAULT_BACKEND
    revision: str | None = None
    dtype: str = AUTO
    device: str = AUTO
    options: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", backend_spec(self.backend).make_options(self.options))
        check_load_options(self)

    @classmethod
    def of(
        cls,
        backend: str = option.DEFAULT_BACKEND,
        revision: str | None = None,
        dtype: str = AUTO,
        device: str = AUTO,
        **options: Any,
    ) -> LoadOptions:
        """The common options and the backend's own by name (None: not given, its default)."""
        return cls(backend, revision, dtype, device, options)

    @property
    def own(self) -> BackendOptions:
        """The backend's own options, to ask what it settles of them (`BackendOptions`'s methods); a backend with
        no options class settles nothing: the defaults."""
        return self.options if self.options is not None else BackendOptions()

    def get(self, name: str, default: Any = None) -> Any:
        """The backend's own option `name`, or `default` where the backend has no such option (or leaves it None)."""
        value = getattr(self.options, name, None)
        return default if value is None else value


def check_load_options(load: LoadOptions) -> None:
    """Refuse a bad common option with one line naming its flag, before anything is loaded.

    The backend's own options checked themselves when made (`BackendSpec.make_options`); a
    backend's options class may check them against the common ones too (`check_load`).
    """
    spec = backend_spec(load.backend)
    if load.dtype not in (AUTO, *DTYPES, *QUANTIZED):
        raise ProbeError(f"--dtype must be one of auto, {', '.join((*DTYPES, *QUANTIZED))}, got {load.dtype!r}")
    if load.dtype in QUANTIZED and not spec.quantizes:
        quantizing = " or ".join(name for name, other in BACKENDS.items() if other.quantizes) or "none"
        raise ProbeError(
            f"--dtype {load.dtype} quantises a checkpoint's weights with --backend {quantizing}, as the release did; "
            f"not with --backend {spec.name}"
        )
    load.own.check_load(load)


def check_quantized_load(dtype: str, device: str) -> None:
    """One line when a quantised load cannot run here: bitsandbytes' 4-bit kernels need CUDA and the package."""
    if dtype not in QUANTIZED:
        return
    if device_type(device) != "cuda":
        raise ProbeError(
            f"--dtype {dtype} (bitsandbytes 4-bit weights, the Talent-or-Luck release's load) needs a CUDA GPU; "
            f"this run is on {device}: leave --dtype out to score the checkpoint's own weights"
        )
    import importlib.util

    if importlib.util.find_spec("bitsandbytes") is None:
        raise ProbeError(f"--dtype {dtype} needs the bitsandbytes package: pip install bitsandbytes")


def load_served(model: str, load: LoadOptions) -> LoadedModel:
    """The backend, tokenizer and result key revision of a model behind a server (`BackendSpec.served`).

    Only the tokenizer loads here (where the backend's options say, `BackendOptions.tokenizer_source`: `--tokenizer`,
    else the model name as a Hub id or folder), located and
    keyed like a model (`model_identity.locate`): the ids sent are what the server scores. The backend keys
    the model by what the server reports of it (`runners.backends.openai.identity`).
    """
    spec = backend_spec(load.backend)
    tokenizer_source = load.own.tokenizer_source()
    source = tokenizer_source or model
    try:
        ref = model_identity.locate(source, revision=load.revision)
    except ProbeError as exc:
        if tokenizer_source is None:
            raise ProbeError(
                f"--backend {spec.name} tokenises here with the served model's tokenizer, and {model!r} is not a Hub "
                f"id or a folder of one: pass --tokenizer ({exc})"
            ) from None
        raise
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(source, revision=ref.load_revision)
    except (OSError, ValueError) as exc:
        raise ProbeError(f"cannot load the tokenizer {source!r}: {exc}") from exc
    resolved = Resolved(tokenizer, ref.load_revision, AUTO, "server", {"tokenizer_revision": ref.revision})
    scorer: Any = spec.function("loader")(model, load.options, resolved)
    return LoadedModel(scorer, tokenizer, scorer.model_revision, None)


@dataclass(frozen=True)
class LocatedModel:
    """A model before its weights: where it is (`ref`), its tokenizer and config, the dtype its weights load in.

    Both drivers start here: `load_backend` goes on to load the weights; the Ray driver keys the run
    with it and lets each actor load the commit `ref.load_revision` names.
    """

    ref: model_identity.ModelRef
    tokenizer: Any
    config: Any
    dtype: str
    extra: dict[str, str]


def locate_model(model: str, load: LoadOptions) -> LocatedModel:
    """The one model resolution: located and keyed (`model_identity.locate`: a Hub id to its commit), then the
    tokenizer and config at that commit, and the dtype (`resolve_dtype`) the weights will load in.

    The checkpoint's files are the backend's to name (`BackendOptions.checkpoint_files`: hf's `--gguf-file`)."""
    extra = dict(load.own.checkpoint_files())
    ref = model_identity.locate(model, revision=load.revision, **extra)
    from transformers import AutoConfig, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(model, revision=ref.load_revision, **extra)
        config = AutoConfig.from_pretrained(model, revision=ref.load_revision, **extra)
        # a checkpoint file named apart (a GGUF file) is de-quantised to float32 by transformers: its config's
        # dtype is not what loads
        dtype = resolve_dtype(load.dtype, None if extra else config)
    except (OSError, ValueError) as exc:
        raise ProbeError(f"cannot load model {model!r}: {exc}") from exc
    return LocatedModel(ref, tokenizer, config, dtype, extra)


class LoadedModel(NamedTuple):
    """A model loaded into a backend (`load_backend`), with what was read of it to load it."""

    backend: Any
    #: the transformers tokenizer every backend's ids come from
    tokenizer: Any
    #: the result key's revision (`model_identity.ModelRef.revision`)
    revision: str
    #: the model's config as transformers read it at the loaded commit (and from `--gguf-file`), for whoever
    #: prices or sizes work on it; None for a served model (its weights are the server's)
    config: Mapping[str, Any] | None


def load_backend(
    model: str, load: LoadOptions | None = None, *, needed_tokens: int | Callable[[Any], int] | None = None
) -> LoadedModel:
    """The backend, tokenizer, result key revision and config (`LoadedModel`) of a model folder or Hub id.

    Both backends get the same transformers tokenizer, so they score the same token ids
    (`runners.scoring.tokenize`); vLLM's own tokenizer only detokenises generations. `auto` settings
    follow the model and the machine (`runners.model.device`): the checkpoint's dtype, CUDA when
    torch sees a GPU (with a `RunnerWarning` when a GPU-sized model lands on the CPU). The backend
    settles what it left out of its own options for the machine and the items (`BackendOptions.settle`:
    vLLM's memory fraction, 0.9 on CUDA, 0.3 on the CPU, and its `max_model_len`, what the items need,
    `needed_tokens(tokenizer)`, see `runners.run.sizing.needs_of`, capped by the model's position limit,
    `runners.model.context_length`; without `needed_tokens`, the smaller of the limit and 4096).

    The model is located and keyed first (`model_identity.locate`): a Hub id is loaded at the
    commit its revision resolves to, and a local folder is checked again after loading.
    """
    load = load or LoadOptions()
    backend, device = load.backend, load.device
    spec = backend_spec(backend)
    require_for_scoring(backend=backend)
    if spec.served:
        return load_served(model, load)
    # checked, resolved (a Hub id to its commit) and keyed before any weights load
    located = locate_model(model, load)
    tokenizer, config, weights_dtype, extra = located.tokenizer, located.config, located.dtype, located.extra
    revision = located.ref.load_revision
    config_dict = config.to_dict()  # what the context limit and, after the load, the sweep's price read
    try:
        on = resolve_device(device)
        check_quantized_load(weights_dtype, on)
        if device == AUTO and device_type(on) == "cpu" and (message := cpu_warning(config, model)):
            warnings.warn(message, RunnerWarning, stacklevel=2)
        settling = Settling(model, on, config_dict, tokenizer, needed_tokens)
        options = None if load.options is None else load.options.settle(settling)
        resolved = Resolved(tokenizer, revision, weights_dtype, on, extra)
        scorer: Any = spec.function("loader")(model, options, resolved)
    except ImportError as exc:
        raise ProbeError(str(exc)) from exc
    except (OSError, ValueError) as exc:
        raise ProbeError(f"cannot load model {model!r}: {exc}") from exc
    except RuntimeError as exc:
        if not is_out_of_memory(exc):
            raise
        raise ProbeError(
            f"out of memory loading {model!r} in {weights_dtype} on {on}: spread it over the GPUs with "
            "--device-map auto (hf) or --tensor-parallel-size N (vllm), or pick a smaller --dtype"
        ) from None
    try:
        located.ref.check_unchanged()  # weights swapped while they loaded must not be filed under the old key
    except ProbeError:
        scorer.close()
        raise
    return LoadedModel(scorer, tokenizer, located.ref.revision, config_dict)
