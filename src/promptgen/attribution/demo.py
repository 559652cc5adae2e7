"""What `probes demo` scores of Talent or Luck?: every religion x gender x outcome cell of the single-actor items."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.probe_spec import DemoPlan, DemoRun
from ..core.sampling import stratified_rows

CONFIG = "single_actor"


def rows(dataset: Any, sizes: Mapping[str, int]) -> list[int]:
    """`per_cell` items of each religion x gender x outcome cell (6 x 2 x 2 cells)."""
    frame = dataset.select_columns(["dimension", "identity", "gender", "outcome"]).to_pandas()
    religion = frame[frame["dimension"] == "religion"]
    return stratified_rows(religion, ["identity", "gender", "outcome"], sizes["per_cell"])


#: only the config it scores is built: the default build's 3 M release rows take minutes
DEMO = DemoPlan(
    runs=(DemoRun(CONFIG, rows=f"{__name__}:rows"),),
    sizes={"per_cell": 6},
    build={"configs": [CONFIG]},
)
