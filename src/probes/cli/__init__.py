"""The `probes` command line. Thin: each command parses flags, calls one `probes.api` function and prints.

`shared` holds the app, the scrubbing consoles, the one-line error and `entry` (the console
script); `options` the option types several commands share; one module per group of
commands holds their flags and bodies. The commands are registered here, in the order
`probes --help` lists them.
"""

from __future__ import annotations

from .analyze import analyze_cmd
from .build import build, lint, list_recipes_cmd
from .demo import demo_cmd
from .derive import curate_pairs_cmd, rewrite_cmd
from .export import export_cmd
from .plan import plan_cmd
from .publish import publish_cmd
from .run import run
from .shared import _ENGINE_THREADS, _warn, app, entry, err, main, out

app.command()(build)
app.command()(run)
app.command()(lint)
app.command("curate-pairs")(curate_pairs_cmd)
app.command("rewrite")(rewrite_cmd)
app.command("analyze")(analyze_cmd)
app.command("export")(export_cmd)
app.command("demo")(demo_cmd)
app.command("recipes")(list_recipes_cmd)
app.command("publish")(publish_cmd)
app.command("plan")(plan_cmd)

__all__ = ["_ENGINE_THREADS", "_warn", "app", "entry", "err", "main", "out"]
