"""The intergroup empathy gap: this probe as the project knows it, found by `promptgen.probe_registry`.

Its narratives are not redistributed (`private_source`): a sweep without them builds from the
synthetic corpus, and says so. `probes rewrite` (a model's third-person rewrites -> a version of the
dataset with them as T2) is this probe's own command, and `probes import --format empathy-authors`
(the authors' released generations) its own reader, both in `probes/empathy/`.
"""

from ..core.build_options import MAX_EVENTS
from ..core.probe_spec import ProbeSpec, SampleUnit

#: the build option (`BuildOptions.derived`) under which `probes rewrite` gives a build a model's T2 rewrites
REWRITES = "rewrites"

SPEC = ProbeSpec.in_project(
    __package__,
    name="intergroup-empathy",
    build_options=(MAX_EVENTS, REWRITES),
    table_prefix="empathy_",
    row_probes=("empathy",),
    rank=30,
    private_source="intergroup-empathy-release",
    synthetic_sources=f"{__package__}.synthetic:write_synthetic_corpus",
    # events, in proportion to their emotions: the same events in every cell of every matrix (DESIGN 9)
    sample_units=(SampleUnit("event", ("text_id",), strata=("emotion",)),),
)
