"""Which scored items count as refusals: one rule for every probe's analysis (docs/DESIGN.md section 6).

An item is refused when the runner said so (`refused`), when the chosen score is missing (no
parseable number, no distribution), or, when `min_valid_mass` is given, when the distribution
put less mass than that on valid answers. Each probe then drops refused items from its means
and tests, or keeps their values for the "with refusals" variant.
"""

from __future__ import annotations

import pandas as pd


def refusal_mask(joined: pd.DataFrame, value: pd.Series, *, min_valid_mass: float | None = None) -> pd.Series:
    """True where the item is refused; `value` is the score the analysis reads (NaN = none)."""
    refused = value.isna()
    if "refused" in joined.columns:
        refused |= joined["refused"].fillna(False).astype(bool)
    if min_valid_mass is not None:
        if "valid_mass" not in joined.columns:
            raise ValueError("min_valid_mass needs a `valid_mass` column")
        refused |= pd.to_numeric(joined["valid_mass"], errors="coerce").fillna(0.0) < min_valid_mass
    return refused
