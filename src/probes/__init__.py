"""social-bias-probes: the `probes` command line and the Python API (`probes.api`) it calls.

`probes` is the top layer: it may import `analysis`, `runners` and `promptgen`; nothing imports
it. A probe's own steps (curate-pairs, rewrite: dataset versions made from results) live in its own
room here, `probes/<probe>/`, found through its spec. `publish` uploads folders, `sweep` and
`demo` run the whole pipeline; `cli` only parses options, calls one `api` function and prints.
"""

from promptgen.core.version import __version__

__all__ = ["__version__"]
