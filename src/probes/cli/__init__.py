"""The `probes` command line. Thin: each command parses flags, calls one `probes.api` function and prints.

`shared` holds the app, the scrubbing consoles, the one-line error and `entry` (the console
script); `options` the option types several commands share; one module per group of
commands holds their flags and bodies. The commands are registered here, in the order
`probes --help` lists them.

The plugins named in `PROBES_PLUGINS` are imported first, so their backends and probes are in
every command's `--help`; one that cannot be imported is one line, exit code 2.
"""

from __future__ import annotations

import sys

from promptgen.core.errors import ProbeError
from promptgen.core.plugins import load_plugins

try:
    load_plugins()
except ProbeError as _exc:
    sys.stderr.write(f"error: {_exc}\n")
    raise SystemExit(2) from None

from .analyze import analyze_cmd
from .build import build, lint, list_recipes_cmd
from .demo import demo_cmd
from .derive import curate_pairs_cmd, rewrite_cmd
from .export import export_cmd
from .importer import import_cmd
from .plan import plan_cmd
from .publish import publish_cmd
from .run import run
from .shared import _ENGINE_THREADS, _warn, app, entry, err, main, one_line_errors, out
from .sweep import sweep_cmd

COMMANDS = (
    ("build", build),
    ("run", run),
    ("sweep", sweep_cmd),
    ("lint", lint),
    ("curate-pairs", curate_pairs_cmd),
    ("rewrite", rewrite_cmd),
    ("analyze", analyze_cmd),
    ("export", export_cmd),
    ("import", import_cmd),
    ("demo", demo_cmd),
    ("recipes", list_recipes_cmd),
    ("publish", publish_cmd),
    ("plan", plan_cmd),
)
for _name, _command in COMMANDS:
    app.command(_name)(one_line_errors(_command))

__all__ = ["_ENGINE_THREADS", "_warn", "app", "entry", "err", "main", "out"]
