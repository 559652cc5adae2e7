"""The intergroup empathy gap: this probe as the project knows it, found by `promptgen.probe_registry`.

Its narratives are not redistributed (`private_source`): a sweep without them builds from the
synthetic corpus, and says so.
"""

from ..core.probe_spec import ProbeSpec

SPEC = ProbeSpec.in_project(
    __package__,
    name="intergroup-empathy",
    build_options=("max_events", "rewrites"),
    section="Empathy",
    table_prefix="empathy_",
    row_probes=("empathy",),
    rank=30,
    private_source="intergroup-empathy-release",
    synthetic_sources=f"{__package__}.synthetic:write_synthetic_corpus",
)
