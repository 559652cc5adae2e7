"""Talent or Luck? (attribution bias): this probe as the project knows it, found by `promptgen.probe_registry`."""

from ..core.probe_spec import ProbeSpec

SPEC = ProbeSpec(
    name="talent-or-luck",
    builder="attribution",
    draft="promptgen.attribution.dataset:draft",
    lint="promptgen.attribution.dataset:lint",
    analysis="analysis.talent_or_luck",
    section="Attribution",
    table_prefix="attribution_",
    row_probes=("attribution",),
    rank=10,
    demo="promptgen.attribution.demo:DEMO",
)
