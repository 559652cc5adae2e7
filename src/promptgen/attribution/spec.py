"""Talent or Luck? (attribution bias): this probe as the project knows it, found by `promptgen.probe_registry`.

`probes import --format talent-or-luck-csv` reads the release's scorer files into its `*_release`
configs (the reader is this probe's own, in `probes/attribution/`), and `probes export` writes them
from its results (the writer is in `analysis/attribution/`).
"""

from ..core.probe_spec import ProbeSpec, ReleaseFormat, SampleUnit

SPEC = ProbeSpec.in_project(
    __package__,
    name="talent-or-luck",
    analysis_options="analysis.attribution.options:AttributionOptions",
    lint=f"{__package__}.dataset:lint",
    section="Attribution",
    metrics="d, single-actor t-tests, Δd, Δd_pair, Δd1/Δd2 with SMD, shares; the *_release configs (the "
    "release's exact items) get the release's own metrics, as its analysis scripts compute them "
    "(attribution_release_* tables).",
    table_prefix="attribution_",
    row_probes=("attribution",),
    rank=10,
    # designed configs: a template (domain x scenario x outcome) with every identity, name and option order of
    # it; the *_release configs: the release's own set of a template and its names (DESIGN 9)
    sample_units=(SampleUnit("template", ("template_id",)), SampleUnit("template", ("set_id",))),
    import_formats={
        "talent-or-luck-csv": ReleaseFormat(
            format="probes.attribution.release_import:FORMAT",
            help="the Talent-or-Luck release's scorer CSV files, in its outputs/ folder "
            "(closed_ended/<setting>/<dimension>/<model>/closed_ended_<mode>_<model>_<dimension>_all_<n>_runs.csv, "
            "as probes export writes it), into the *_release configs (the inverse of probes export)",
        )
    },
    export_formats={
        "talent-or-luck-csv": ReleaseFormat(
            format="analysis.attribution.release_export:FORMAT",
            help="the CSV files the Talent-or-Luck release's scorers wrote, from the *_release configs (one per "
            "setting, outcome, dimension and model, in the release's row order and columns), in the release's "
            "outputs/ folder (closed_ended/<setting>/<dimension>/<model>/"
            "closed_ended_<mode>_<model>_<dimension>_all_1_runs.csv), so its src/viz scripts read it as "
            "../../outputs; --round rounds their probabilities (the release wrote 2 decimals)",
        )
    },
)
