"""What `probes demo` scores of the Trust Game: every trustee gender x race cell of one investor group, and
a few probing questions, all in the `base` prompt variant (the paper's base-model prompt)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.probe_spec import DemoPlan, DemoRun
from ..core.sampling import stratified_rows

VARIANT = "base"
GAMES_CONFIG = "games_paper_phi_2"


def game_rows(dataset: Any, sizes: Mapping[str, int]) -> list[int]:
    """`games_per_cell` games of each trustee gender x race cell (2 x 5) of the first investor group."""
    frame = dataset.select_columns(["variant", "investor_group", "trustee_gender", "trustee_race"]).to_pandas()
    games = frame[frame["variant"] == VARIANT]
    group = sorted(games["investor_group"].unique())[0]
    cells = ["trustee_gender", "trustee_race"]
    return stratified_rows(games[games["investor_group"] == group], cells, sizes["games_per_cell"])


def probing_rows(dataset: Any, sizes: Mapping[str, int]) -> list[int]:
    """About `probing_items` probing questions, as many of each question type."""
    frame = dataset.select_columns(["variant", "question"]).to_pandas()
    base = frame[frame["variant"] == VARIANT]
    per_question = max(1, sizes["probing_items"] // max(1, base["question"].nunique()))
    return stratified_rows(base, ["question"], per_question)


DEMO = DemoPlan(
    runs=(DemoRun(GAMES_CONFIG, rows=f"{__name__}:game_rows"), DemoRun("probing", rows=f"{__name__}:probing_rows")),
    sizes={"games_per_cell": 4, "probing_items": 10},
)
