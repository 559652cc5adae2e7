"""The intergroup empathy gap: this probe as the project knows it, found by `promptgen.probe_registry`.

Its narratives are not redistributed (`private_source`): a sweep without them builds from the
synthetic corpus, and says so. `probes rewrite` (a model's third-person rewrites -> a version of the
dataset with them as T2) is this probe's own command, and `probes import --format empathy-authors`
(the authors' released generations) its own reader, both in `probes/empathy/`.
"""

from ..core.build_options import MAX_EVENTS
from ..core.probe_spec import ProbeSpec, ReleaseFormat, SampleUnit

#: the build option (`BuildOptions.derived`) under which `probes rewrite` gives a build a model's T2 rewrites
REWRITES = "rewrites"

SPEC = ProbeSpec.in_project(
    __package__,
    name="intergroup-empathy",
    analysis_options="analysis.empathy.options:EmpathyOptions",
    build_options=(MAX_EVENTS, REWRITES),
    section="Empathy",
    metrics="M0, M, δ with the structured permutation test, per-cell tests, summaries.",
    table_prefix="empathy_",
    row_probes=("empathy",),
    rank=30,
    private_source="intergroup-empathy-release",
    synthetic_sources=f"{__package__}.synthetic:write_synthetic_corpus",
    # events, in proportion to their emotions: the same events in every cell of every matrix (DESIGN 9)
    sample_units=(SampleUnit("event", ("text_id",), strata=("emotion",)),),
    commands={"rewrite": "probes.empathy.cli:rewrite_cmd"},
    api={"rewrite": "probes.empathy.t2_rewrites:rewrite", "RewriteRun": "probes.empathy.t2_rewrites:RewriteRun"},
    import_formats={
        "empathy-authors": ReleaseFormat(
            format="probes.empathy.authors_import:FORMAT",
            help="the intergroup-empathy authors' batch_pred_emotion.py TSV files (<group>_<variation>_batch-<k>.tsv: "
            "idx, system_prompt, user_input, response), joined on the prompts' authors_index and parsed by their "
            "first-integer rule",
        )
    },
)
