"""The name-based Trust Game: this probe as the project knows it, found by `promptgen.probe_registry`.

Its `race_probe` rows (the curation input of `probes curate-pairs`) are not analysed: the report
gives their refusals only. That command, a model's race-probe results -> a version of the dataset
with its curated pairs, is this probe's own, in `probes/trust_game/`.
"""

from ..core.probe_spec import ProbeSpec

#: the build option (`BuildOptions.derived`) under which `probes curate-pairs` gives a build its models' pairs
CURATED_PAIRS = "curated_pairs"

SPEC = ProbeSpec.in_project(
    __package__,
    name="trust-game-names",
    aliases=("trust-game",),
    build_options=(CURATED_PAIRS,),
    table_prefix="trust_game_",
    row_probes=("trust_game", "probing"),
    rank=20,
)
