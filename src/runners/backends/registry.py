"""The backend registry: `BackendSpec`, what a loader is handed (`Resolved`), `register` and the lookups.

Its own module, below every backend: a backend's `spec` registers itself here, and a backend's code
reads `Resolved` from here, so no backend imports the `runners.backends` package, which imports every
built-in backend's spec (the backends-independent contract in pyproject.toml holds without a waiver).
The package re-exports all of it; `runners.backends` stays the public name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from promptgen.core.errors import ProbeError
from promptgen.core.flags import DeclaredFlag, declared_flags, flag_name, flags_by_name, option_flag
from promptgen.core.plugins import resolve_reference
from runners.extras import require

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
    #: its own load options: a frozen dataclass of `load_flag` fields, which checks its values when made and
    #: may refine the check against the common options (`check_load(load)`); `LoadOptions.options` holds one.
    #: A flag of another backend's class given to this one is refused in one line naming the backends that take it
    options: type | None = None
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
