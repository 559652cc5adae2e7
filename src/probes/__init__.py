"""social-bias-probes: the `probes` command line and the Python API (`probes.api`) it calls.

`probes` is the top layer: it may import `analysis`, `runners` and `promptgen`; nothing imports
it. `pair_curation` and `t2_rewrites` make dataset versions from results, `publish`
uploads folders, `sweep` and `demo` run the whole pipeline; `cli` only parses options, calls one
`api` function and prints.
"""

from promptgen.core.version import __version__

__all__ = ["__version__"]
