"""The Trust Game's own parts of `probes` (`ProbeSpec.commands`): `probes curate-pairs` and what it returns."""

from __future__ import annotations

from ..probe_part import ProbeCommands

COMMANDS = ProbeCommands(
    commands={"curate-pairs": "probes.trust_game.cli:curate_pairs_cmd"},
    api={
        "curate_pairs": "probes.trust_game.pair_curation:curate_pairs",
        "CurateResult": "probes.trust_game.pair_curation:CurateResult",
    },
)
