"""The intergroup empathy gap: this probe as the project knows it, found by `promptgen.probe_registry`.

Its narratives are not redistributed (`private_source`): a sweep without them builds from the
synthetic corpus, and says so.
"""

from ..core.probe_spec import ProbeSpec

SPEC = ProbeSpec(
    name="intergroup-empathy",
    builder="empathy",
    draft="promptgen.empathy.dataset:draft",
    build_options=("max_events", "rewrites"),
    analysis="analysis.intergroup_empathy",
    section="Empathy",
    table_prefix="empathy_",
    row_probes=("empathy",),
    rank=30,
    demo="promptgen.empathy.demo:DEMO",
    private_source="intergroup-empathy-release",
    synthetic_sources="promptgen.empathy.synthetic:write_synthetic_corpus",
)
