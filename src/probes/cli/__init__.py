"""The `probes` command line. Thin: each command parses flags, calls one `probes.api` function and prints.

`shared` holds the app, the scrubbing consoles, the one-line error and `entry` (the console
script); `options` the option types several commands share; one module per group of
commands holds their flags and bodies; `commands` registers them, and each probe's own
commands (`ProbeCommands.commands`), in the order `probes --help` lists them.

The plugins (installed packages' `social_bias_probes` entry points, and the modules named in
`PROBES_PLUGINS`) are loaded first, so their backends and probes are in every command's `--help`;
one that fails in any way is one scrubbed line, exit code 2 (`shared.load_extensions_or_exit`).
The app is taken from here (`from probes.cli import app`) once `commands` has registered every
command: a probe's command module imports `options` from this package, so the commands are
registered on first use, not while the package is imported.

First of all, Arrow's allocator is told to give the memory it frees back at once (`allocator`):
it must be told before pyarrow loads.
"""

from __future__ import annotations

from typing import Any

from .allocator import give_freed_memory_back

give_freed_memory_back()  # before anything loads pyarrow: its allocator reads these options once, at load

from .shared import load_extensions_or_exit  # noqa: E402

load_extensions_or_exit()  # before the commands exist: their `--help` lists the plugins' backends and probes

__all__ = ["_ENGINE_THREADS", "_warn", "app", "entry", "err", "main", "out"]


def __getattr__(name: str) -> Any:
    """`app`, `entry`, ...: `shared`'s, with every command registered on the app (PEP 562)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import commands

    return getattr(commands, name)
