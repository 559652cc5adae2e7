"""`python -m probes.cli`: the `probes` command (as the old single-module CLI ran under `-m`)."""

from probes.cli import entry

entry()
