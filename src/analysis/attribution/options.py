"""Talent or Luck?'s own `probes analyze` options (`ProbeAnalysis.options`).

Its own module, with no pandas, so the command line can build `--release-rounding` from it for
`--help` without importing the analysis.
"""

from __future__ import annotations

from dataclasses import dataclass

from promptgen.core.flags import option_flag


@dataclass(frozen=True)
class AttributionOptions:
    """What the attribution tables compute with; the report records it."""

    #: the `*_release` tables: round each probability (and actor-actor Δ) to 2 decimals as the release did
    release_rounding: bool = option_flag(
        "Tables of the *_release configs (the release's own metrics): round each probability to 2 decimals "
        "before the metric (actor-actor: after the per-person renormalisation, and each Δ too), as the "
        "release's scorers and heatmap did. Default: full precision.",
        False,
        flag="--release-rounding",
    )
