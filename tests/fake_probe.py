"""A fourth probe that exists only in the tests: one module and one registration, nothing else touched.

Named in `PROBES_PLUGINS`, it is part of every `probes` command; imported, it is registered.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from analysis.probes import ProbeSpec, register_probe

NAME, SECTION, PREFIX = "fake-probe", "Fake probe", "fake_probe_"


def headline(tables: Mapping[str, pd.DataFrame], labels: Mapping) -> pd.DataFrame | None:
    """The mean score of the fake probe's one table: what its report section opens with."""
    table = tables.get(f"{PREFIX}scores")
    return None if table is None else pd.DataFrame({"mean fake score": [table["score"].mean()]})


SPEC = register_probe(ProbeSpec(NAME, SECTION, PREFIX, aliases=("fake",), headline=f"{__name__}:headline"))
