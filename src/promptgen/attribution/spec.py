"""Talent or Luck? (attribution bias): this probe as the project knows it, found by `promptgen.probe_registry`.

`probes import --format talent-or-luck-csv` reads the release's scorer files into its `*_release`
configs (the reader is this probe's own, in `probes/attribution/`), and `probes export` writes them
from its results (the writer is in `analysis/attribution/`).
"""

from ..core.probe_spec import ProbeSpec, SampleUnit

SPEC = ProbeSpec.in_project(
    __package__,
    name="talent-or-luck",
    lint=f"{__package__}.dataset:lint",
    table_prefix="attribution_",
    row_probes=("attribution",),
    rank=10,
    # designed configs: a template (domain x scenario x outcome) with every identity, name and option order of
    # it; the *_release configs: the release's own set of a template and its names (DESIGN 9)
    sample_units=(SampleUnit("template", ("template_id",)), SampleUnit("template", ("set_id",))),
)
