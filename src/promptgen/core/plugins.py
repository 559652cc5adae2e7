"""Third-party extensions, named in `PROBES_PLUGINS`: modules imported when a registry loads.

A plugin is any importable module that registers what it adds when imported: a backend
(`runners.backends.register`), a probe (`promptgen.probe_registry.register_probe`), or both. Naming it
in `PROBES_PLUGINS` (comma-separated module names) makes it part of every `probes` command,
its `--help` included, without touching the project's files (lm-eval's `--include_path`).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any

from .errors import ProbeError
from .secrets import scrub

PLUGINS_VARIABLE = "PROBES_PLUGINS"


def plugin_modules() -> list[str]:
    """The module names `PROBES_PLUGINS` lists, in order, blanks dropped."""
    return [name.strip() for name in os.environ.get(PLUGINS_VARIABLE, "").split(",") if name.strip()]


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
        try:
            importlib.import_module(name)
        except ProbeError as exc:  # a registry's own one line, raised from a plugin or a registry it imported
            raise _PluginError(f"{PLUGINS_VARIABLE}: plugin module {name!r}: {_one_line(exc)}") from None
        except ImportError as exc:
            raise _PluginError(f"{PLUGINS_VARIABLE}: cannot import plugin module {name!r}: {_one_line(exc)}") from None
        except Exception as exc:  # a plugin's own bug or a name registered twice: still one line
            raise _PluginError(
                f"{PLUGINS_VARIABLE}: plugin module {name!r} failed: {type(exc).__name__}: {_one_line(exc)}"
            ) from None


class _PluginError(ProbeError):
    """A plugin that cannot be loaded: exit code 2 at the command line (as a missing extra)."""

    exit_code = 2


def _one_line(exc: BaseException) -> str:
    """An exception's text on one line, secrets masked (it is printed and may be raised into a caller's log)."""
    return " ".join(scrub(str(exc)).split()) or type(exc).__name__


def resolve_reference(target: str) -> Callable[..., Any]:
    """The function a "module:function" reference names, imported now (registries import lazily)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)
