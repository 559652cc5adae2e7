"""What a builder hands to the writer: configs, effective parameters and a build report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .folder import ConfigData

if TYPE_CHECKING:
    from ..empathy.model_rewrites import ModelRewrites
    from ..trust_game.curation import CuratedPairs


@dataclass(frozen=True)
class BuildOptions:
    """Command-line choices that change what is built (and so the dataset's name).

    `full`: the full cross product instead of the recipe's sampling; `max_events`: a
    stratified subset of N source events (empathy), for tests and quick runs;
    `curated_pairs`: per-model pairs selected from race-probe results (trust game), each
    added as `pairs_<slug>` + `games_<slug>` configs of a new dataset version; `rewrites`:
    a model's third-person rewrites replacing the rule-based T2 narratives (empathy), also
    a new dataset version.
    """

    full: bool = False
    max_events: int | None = None
    curated_pairs: tuple[CuratedPairs, ...] = ()
    rewrites: ModelRewrites | None = None

    def dataset_name(self, recipe_name: str) -> str:
        """`talent-or-luck`, `talent-or-luck-full`, `intergroup-empathy-events24`, ..."""
        name = recipe_name + ("-full" if self.full else "")
        return name + (f"-events{self.max_events}" if self.max_events is not None else "")


@dataclass
class BuildPlan:
    """A dataset ready to be written: nothing has touched the output folder yet.

    `report` goes into the manifest (`build_report`) and the card; `card_context` is
    extra template context only the card uses (examples, counts, prose tables). `version`
    replaces the recipe's when the build adds inputs the recipe does not name (curated pairs).
    """

    name: str
    configs: list[ConfigData]
    parameters: dict[str, Any]
    report: dict[str, Any] = field(default_factory=dict)
    card_context: dict[str, Any] = field(default_factory=dict)
    default_config: str | None = None
    rows_per_shard: int = 200_000
    version: str | None = None
