"""Third-party extensions, named in `PROBES_PLUGINS`: modules imported when a registry loads.

A plugin is any importable module that registers what it adds when imported: a backend
(`runners.backends.register`), a probe (`analysis.probes.register_probe`), or both. Naming it
in `PROBES_PLUGINS` (comma-separated module names) makes it part of every `probes` command,
its `--help` included, without touching the project's files (lm-eval's `--include_path`).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any

from .errors import ProbeError

PLUGINS_VARIABLE = "PROBES_PLUGINS"


def plugin_modules() -> list[str]:
    """The module names `PROBES_PLUGINS` lists, in order, blanks dropped."""
    return [name.strip() for name in os.environ.get(PLUGINS_VARIABLE, "").split(",") if name.strip()]


def load_plugins() -> None:
    """Import every plugin module (once: Python caches modules); one that cannot be imported is one line."""
    for name in plugin_modules():
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ProbeError(f"{PLUGINS_VARIABLE}: cannot import plugin module {name!r}: {exc}") from exc


def resolve_reference(target: str) -> Callable[..., Any]:
    """The function a "module:function" reference names, imported now (registries import lazily)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)
