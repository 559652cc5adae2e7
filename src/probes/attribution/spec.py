"""Talent or Luck?'s own parts of `probes` (`ProbeSpec.commands`): the release's scorer files, for `probes import`."""

from __future__ import annotations

from promptgen.core.release_format import ReleaseFormat

from ..probe_part import ProbeCommands

COMMANDS = ProbeCommands(
    import_formats={
        "talent-or-luck-csv": ReleaseFormat(
            format="probes.attribution.release_import:FORMAT",
            help="the Talent-or-Luck release's scorer CSV files, in its outputs/ folder "
            "(closed_ended/<setting>/<dimension>/<model>/closed_ended_<mode>_<model>_<dimension>_all_<n>_runs.csv, "
            "as probes export writes it), into the *_release configs (the inverse of probes export)",
        )
    },
)
