"""`probes plan --precision EPS --pilot RESULTS`: the sample size whose headline intervals are at most EPS wide.

A pilot is a small `--sample n` run of the model, kept: the larger sample holds its units and resumes
it (DESIGN 9). Its analysis gives each headline number's sampling interval at n units
(`analysis.precision`); the half-width falls as sqrt(1/m - 1/N), so the size m at which every
half-width is at most EPS follows (`analysis.precision.units_for_precision`). The plan then prices
that `--sample m`. Which analysis: `probes analyze`'s, with its permutation tests cut to a few
permutations (the sampling intervals do not depend on them).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis.pipeline import AnalysisRequest, analyze
from analysis.precision import units_for_precision
from analysis.probe_analysis import AnalysisOptions
from promptgen.core.errors import ProbeError

#: permutations of the papers' own tests while sizing (their p-values are not read)
PILOT_PERMUTATIONS = 10


@dataclass(frozen=True)
class PrecisionSample:
    """The units per config a precision needs: `size`, set by `driving` (the row needing the most units)."""

    size: int
    eps: float
    rows: pd.DataFrame

    @property
    def driving(self) -> pd.Series:
        return self.rows.iloc[0]

    def line(self) -> str:
        """What the plan prints before it prices the sample."""
        top = self.driving
        return (
            f"--precision {self.eps:g}: --sample {self.size:,} (set by the pilot's {top['table']} row needing most, "
            f"half-width {top['half_width']:.3g} at {int(top['units']):,} units; {len(self.rows)} headline numbers)"
        )


def sample_for_precision(
    dataset: str | Path, pilot: str | Path, eps: float, *, configs: Sequence[str] | None = None
) -> PrecisionSample:
    """The sample size at which every headline interval the pilot's analysis gives is at most `eps` wide (half)."""
    if not (isinstance(eps, int | float) and math.isfinite(eps) and eps > 0):
        raise ProbeError(f"--precision must be a positive half-width, got {eps}")
    options = AnalysisOptions.from_flags(n_permutations=PILOT_PERMUTATIONS)
    with warnings.catch_warnings():  # numpy's and scipy's notes on empty or constant cells: the rows say it
        warnings.simplefilter("ignore", RuntimeWarning)
        analysis = analyze(AnalysisRequest(dataset, [pilot], options=options, configs=configs, figures=False))
    rows = units_for_precision(analysis.tables, eps)
    if rows.empty:
        raise ProbeError(
            f"--pilot {pilot}: no headline number with a sampling interval (score a pilot with `probes run "
            "--sample n`, n of at least 2 units, on the configs priced)"
        )
    return PrecisionSample(int(rows["needed"].max()), float(eps), rows.reset_index(drop=True))
