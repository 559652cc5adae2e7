"""The name-based Trust Game: this probe as the project knows it, found by `promptgen.probe_registry`.

Its `race_probe` rows (the curation input of `probes curate-pairs`) are not analysed: the report
gives their refusals only.
"""

from ..core.probe_spec import ProbeSpec

SPEC = ProbeSpec(
    name="trust-game-names",
    aliases=("trust-game",),
    builder="trust_game",
    draft="promptgen.trust_game.dataset:draft",
    build_options=("curated_pairs",),
    analysis="analysis.trust_game_names",
    section="Trust Game",
    table_prefix="trust_game_",
    row_probes=("trust_game", "probing"),
    rank=20,
    demo="promptgen.trust_game.demo:DEMO",
)
