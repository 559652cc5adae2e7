"""Third-party extensions: installed packages' entry points, and the modules `PROBES_PLUGINS` names.

A plugin is any importable module that registers what it adds when imported: a backend
(`runners.backends.register`), a probe (`promptgen.probe_registry.register_probe`), or both.
A package makes it part of every `probes` command, its `--help` included, by declaring an
entry point of the group `social_bias_probes` (`ENTRY_POINT_GROUP`) in its own
`pyproject.toml`, as pytest finds its plugins (`pytest11`)::

    [project.entry-points.social_bias_probes]
    my_probe = "my_probe"                 # a module, imported
    my_backend = "my_backend.spec:setup"  # or a function, called once

`PROBES_PLUGINS` (comma-separated module names) adds modules that are not installed (lm-eval's
`--include_path`). Nothing is found while a registry is imported: `load_extensions()` loads
them, at one explicit call, made by the command line (`probes.cli`), the Python API
(`probes.api`), a Ray replica and the tests' fixtures. A program that uses a registry directly
(`runners`, `promptgen`) calls it first.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
from collections.abc import Callable, Iterator
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any

from .errors import ProbeError
from .secrets import scrub

PLUGINS_VARIABLE = "PROBES_PLUGINS"
#: the entry-point group an installed package declares its plugin modules (or setup functions) under
ENTRY_POINT_GROUP = "social_bias_probes"
#: the entry points whose function has been called in this process: each is called once
_CALLED: set[str] = set()
#: the project's own packages (pyproject.toml's `root_packages`): code under them is ours, and a bug of ours keeps
#: its traceback; code anywhere else was registered by a plugin (`PluginCode`)
PROJECT_PACKAGES = ("probes", "analysis", "runners", "promptgen")


def plugin_modules() -> list[str]:
    """The module names `PROBES_PLUGINS` lists, in order, blanks dropped."""
    return [name.strip() for name in os.environ.get(PLUGINS_VARIABLE, "").split(",") if name.strip()]


def load_extensions() -> None:
    """Load every plugin: each installed entry point of `ENTRY_POINT_GROUP` (by name), then `PROBES_PLUGINS`.

    An entry point naming a module imports it; one naming a function calls it, once per process. Calling this
    again loads what is new and nothing twice (a module is imported once). Whatever a plugin raises is one
    `ProbeError` line naming the entry point and its distribution (`load_plugins` for the variable's modules),
    exit code 2 at the command line.
    """
    for point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name):
        _load_entry_point(point)
    load_plugins()


def _load_entry_point(point: EntryPoint) -> None:
    where = f"{ENTRY_POINT_GROUP} entry point {point.name!r} ({point.value}"
    where += f", of {point.dist.name})" if point.dist is not None else ")"
    with _one_line_failures(where, f"{where}: cannot import it"):
        loaded = point.load()
        if not isinstance(loaded, ModuleType) and callable(loaded) and point.value not in _CALLED:
            _CALLED.add(point.value)
            loaded()


@contextlib.contextmanager
def _one_line_failures(named: str, cannot_import: str) -> Iterator[None]:
    """Whatever loading a plugin raises as one `_PluginError` line: a registry's own line after `named`, an import
    that fails after `cannot_import`, anything else (a plugin's own bug, a name registered twice) as `named` failed."""
    try:
        yield
    except ProbeError as exc:  # a registry's own one line, raised from a plugin or a registry it imported
        raise _PluginError(f"{named}: {_one_line(exc)}") from None
    except ImportError as exc:
        raise _PluginError(f"{cannot_import}: {_one_line(exc)}") from None
    except Exception as exc:
        raise _PluginError(f"{named} failed: {type(exc).__name__}: {_one_line(exc)}") from None


def load_plugins() -> None:
    """Import every plugin module (once: Python caches modules); one that fails is one `ProbeError` line.

    Whatever a plugin raises, on import or while registering (a backend or probe name taken
    already), becomes one line naming the module, scrubbed: the exception's text is third-party
    and may repeat the environment (the Hub token, a server key). The error's `exit_code` is 2:
    the installation, not the command's input, is broken. A relative name (`.foo`) has no
    package to be relative to and is refused before any import.
    """
    for name in plugin_modules():
        if name.startswith("."):
            raise _PluginError(f"{PLUGINS_VARIABLE}: {name!r} is a relative module name; name the full module")
        named = f"{PLUGINS_VARIABLE}: plugin module {name!r}"
        with _one_line_failures(named, f"{PLUGINS_VARIABLE}: cannot import plugin module {name!r}"):
            importlib.import_module(name)


class _PluginError(ProbeError):
    """A plugin that cannot be loaded: exit code 2 at the command line (as a missing extra)."""

    exit_code = 2


def _one_line(exc: BaseException) -> str:
    """An exception's text on one line, secrets masked (it is printed and may be raised into a caller's log)."""
    return " ".join(scrub(str(exc)).split()) or type(exc).__name__


def resolve_reference(target: str) -> Any:
    """The object a "module:attribute" reference names (a function, a format, a plan), imported now (registries
    import lazily)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def is_plugin_module(module: str) -> bool:
    """Whether `module` is a plugin's (any module outside `PROJECT_PACKAGES`), not the project's own."""
    return module.partition(".")[0] not in PROJECT_PACKAGES


class PluginCodeError(_PluginError):
    """A plugin's code (a format it registered) raised on use: one line, exit code 2, as a plugin that cannot load."""


def plugin_call(label: str, what: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`call(*args, **kwargs)`, where `call` is a plugin's code; whatever it raises but a `ProbeError` (a plugin's
    own one line, kept) is one scrubbed line, `<label>: <what> raised <Type>: <message>`, never a traceback: the
    text is third-party and may repeat the environment, and the bug is the plugin's, which this line names."""
    try:
        return call(*args, **kwargs)
    except ProbeError:
        raise
    except Exception as exc:
        raise PluginCodeError(f"{label}: {what} raised {type(exc).__name__}: {_one_line(exc)}") from None


class PluginCode:
    """A plugin's object (a format its probe registered), each use of it through `plugin_call`.

    Attributes read through; a method called is guarded, and so is the code a call returns for later (a callable
    field of the dataclass it returns: an import format's `parse(...)` gives `ParsedFile.rows`, called once the
    files are checked). `__wrapped__` is the plugin's object itself.
    """

    __slots__ = ("__wrapped__", "_label")

    def __init__(self, label: str, target: Any) -> None:
        self._label = label
        self.__wrapped__ = target

    def __getattr__(self, attr: str) -> Any:
        missing = object()
        value = plugin_call(self._label, f"reading {attr}", getattr, self.__wrapped__, attr, missing)
        if value is missing:  # `hasattr` and `getattr(..., default)` work as on the object itself
            raise AttributeError(f"{type(self.__wrapped__).__name__!r} object has no attribute {attr!r}")
        if not callable(value) or isinstance(value, type):
            return value

        def guarded(*args: Any, **kwargs: Any) -> Any:
            return self._returned(attr, plugin_call(self._label, attr, value, *args, **kwargs))

        return guarded

    def _returned(self, attr: str, result: Any) -> Any:
        """`result` with each callable field guarded, when it is a dataclass instance (`ParsedFile`); an iterator
        (an import format's chunks, `read(...)`) guarded as it is consumed, and each item it gives as above."""
        if isinstance(result, Iterator):
            return self._iterated(attr, result)
        if not dataclasses.is_dataclass(result) or isinstance(result, type):
            return result
        code = {
            f.name: getattr(result, f.name)
            for f in dataclasses.fields(result)
            if f.init and callable(getattr(result, f.name, None))
        }
        if not code:
            return result

        def guard(name: str, call: Callable[..., Any]) -> Callable[..., Any]:
            return lambda *args, **kwargs: plugin_call(self._label, f"{attr}(...).{name}", call, *args, **kwargs)

        return dataclasses.replace(result, **{name: guard(name, call) for name, call in code.items()})

    def _iterated(self, attr: str, items: Iterator[Any]) -> Iterator[Any]:
        done = object()
        while (item := plugin_call(self._label, f"{attr}(...)", next, items, done)) is not done:
            yield self._returned(attr, item)
