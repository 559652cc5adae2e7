"""The name-based Trust Game: this probe as the project knows it, found by `promptgen.probe_registry`.

Its `race_probe` rows (the curation input of `probes curate-pairs`) are not analysed: the report
gives their refusals only.
"""

from ..core.probe_spec import ProbeSpec

SPEC = ProbeSpec.in_project(
    __package__,
    name="trust-game-names",
    aliases=("trust-game",),
    build_options=("curated_pairs",),
    section="Trust Game",
    table_prefix="trust_game_",
    row_probes=("trust_game", "probing"),
    rank=20,
)
