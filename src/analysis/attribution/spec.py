"""Talent or Luck?'s analysis as its spec names it (`ProbeSpec.analysis`): section, metrics, options, export format.

Light: `--help` reads it without pandas. Its tables (`probe.TABLES`) are imported when an analysis runs.
"""

from __future__ import annotations

from functools import partial

from promptgen.core.plugins import resolve_reference
from promptgen.core.release_format import ReleaseFormat

from ..probe_part import ProbeAnalysis
from .options import AttributionOptions

ANALYSIS = ProbeAnalysis(
    section="Attribution",
    tables=partial(resolve_reference, "analysis.attribution.probe:TABLES"),  # imported when an analysis runs
    metrics="d, single-actor t-tests, Δd, Δd_pair, Δd1/Δd2 with SMD, shares; the *_release configs (the "
    "release's exact items) get the release's own metrics, as its analysis scripts compute them "
    "(attribution_release_* tables).",
    options=AttributionOptions,
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
