"""Talent or Luck? (attribution bias): this probe as the project knows it, found by `promptgen.probe_registry`."""

from ..core.probe_spec import ProbeSpec

SPEC = ProbeSpec.in_project(
    __package__,
    name="talent-or-luck",
    lint=f"{__package__}.dataset:lint",
    section="Attribution",
    table_prefix="attribution_",
    row_probes=("attribution",),
    rank=10,
)
