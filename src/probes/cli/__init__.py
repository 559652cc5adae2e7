"""The `probes` command line. Thin: each command parses flags, calls one `probes.api` function and prints.

`shared` holds the app, the scrubbing consoles, the one-line error and `entry` (the console
script); `options` the option types several commands share; one module per group of
commands holds their flags and bodies. The commands are registered here, in the order
`probes --help` lists them.

The plugins named in `PROBES_PLUGINS` are imported first, so their backends and probes are in
every command's `--help`; one that fails in any way is one scrubbed line, exit code 2
(`shared.load_plugins_or_exit`).
"""

from __future__ import annotations

from .shared import load_plugins_or_exit

load_plugins_or_exit()  # before the commands exist: their `--help` lists the plugins' backends and probes

from .analyze import analyze_cmd  # noqa: E402
from .build import build, lint, list_recipes_cmd  # noqa: E402
from .demo import demo_cmd  # noqa: E402
from .derive import curate_pairs_cmd, rewrite_cmd  # noqa: E402
from .export import export_cmd  # noqa: E402
from .importer import import_cmd  # noqa: E402
from .plan import plan_cmd  # noqa: E402
from .publish import publish_cmd  # noqa: E402
from .run import run  # noqa: E402
from .shared import _ENGINE_THREADS, _warn, app, entry, err, main, one_line_errors, out  # noqa: E402
from .sweep import sweep_cmd  # noqa: E402

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
