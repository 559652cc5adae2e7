"""Every `probes` command, registered on the app once, in the order `probes --help` lists them.

The project's own commands are listed here; a probe's own commands (a step only it has, such as
the Trust Game's `curate-pairs`) come from its parts (`ProbeCommands.commands`), after `lint`, so this
module names no probe and a plugin probe's commands are commands of `probes` too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from probes.probe_part import probe_extras
from promptgen.core.errors import ProbeError
from promptgen.core.plugins import resolve_reference

from .analyze import analyze_cmd
from .build import build, lint, list_recipes_cmd
from .demo import demo_cmd
from .export import export_cmd
from .importer import import_cmd
from .plan import plan_cmd
from .publish import publish_cmd
from .run import run
from .shared import _ENGINE_THREADS, _warn, app, entry, err, main, one_line_errors, out, plugin_failed, reflowed_help
from .sweep import sweep_cmd

BEFORE_PROBES: tuple[tuple[str, Callable[..., Any]], ...] = (
    ("build", build),
    ("run", run),
    ("sweep", sweep_cmd),
    ("lint", lint),
)
AFTER_PROBES: tuple[tuple[str, Callable[..., Any]], ...] = (
    ("analyze", analyze_cmd),
    ("export", export_cmd),
    ("import", import_cmd),
    ("demo", demo_cmd),
    ("recipes", list_recipes_cmd),
    ("publish", publish_cmd),
    ("plan", plan_cmd),
)


def probe_commands() -> list[tuple[str, Callable[..., Any]]]:
    """The registered probes' own commands, imported; one that does not import, or is named like a command
    of the project's, is one line and exit code 2 (`shared.plugin_failed`), like a plugin that fails."""
    taken = {name for name, _ in (*BEFORE_PROBES, *AFTER_PROBES)}
    try:
        found = probe_extras("commands")
        clash = sorted(taken & set(found))
        if clash:
            raise ProbeError(f"a probe's command {clash[0]!r} ({found[clash[0]]}) is a command of probes already")
        return [(name, resolve_reference(target)) for name, target in found.items()]
    except Exception as exc:
        plugin_failed(exc)


COMMANDS = (*BEFORE_PROBES, *probe_commands(), *AFTER_PROBES)
for _name, _command in COMMANDS:
    app.command(_name, help=reflowed_help(_command.__doc__))(one_line_errors(_command))

__all__ = ["COMMANDS", "_ENGINE_THREADS", "_warn", "app", "entry", "err", "main", "out"]
