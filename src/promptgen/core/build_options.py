"""The choices a build is asked for, common to every probe, and the ones only some probes take.

Below the probes' packages, so each probe's drafter can take a `BuildOptions` (its `draft`
function, named by its `ProbeSpec`); the probe-specific payloads (a trust game's curated pairs, an
empathy build's model rewrites) are typed by their own packages, never here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import RecipeError


@dataclass(frozen=True)
class BuildOptions:
    """Command-line choices that change what is built (and so the dataset's name).

    `full`: the full cross product instead of the recipe's sampling; `max_events`: a
    stratified subset of N source events (empathy), for tests and quick runs;
    `curated_pairs`: per-model pairs selected from race-probe results (trust game), each
    added as `pairs_<slug>` + `games_<slug>` configs of a new dataset version; `rewrites`:
    a model's third-person rewrites replacing the rule-based T2 narratives (empathy), also
    a new dataset version; `configs`: only these configs of the recipe (sorted, once each), so
    a run that scores one config does not wait for the others (the default talent-or-luck
    build spends minutes on 3 M release rows that a `single_actor` run never reads).
    """

    full: bool = False
    max_events: int | None = None
    #: the trust game's curated pairs (its `CuratedPairs`), one per model
    curated_pairs: tuple[Any, ...] = ()
    #: the empathy probe's model rewrites (its `ModelRewrites`)
    rewrites: Any | None = None
    configs: tuple[str, ...] = ()

    def dataset_name(self, recipe_name: str) -> str:
        """`talent-or-luck`, `talent-or-luck-full`, `intergroup-empathy-events24`, `talent-or-luck-single_actor`, ...

        A build of some configs is named by them, so it is never taken for the whole dataset.
        """
        name = recipe_name + ("-full" if self.full else "")
        name += f"-events{self.max_events}" if self.max_events is not None else ""
        return name + "".join(f"-{config}" for config in self.configs)

    def check_taken(self, recipe_name: str, taken: tuple[str, ...]) -> None:
        """Refuse, before any work, a probe-specific option the probe does not take (`ProbeSpec.build_options`)."""
        for option, refusal in PROBE_BUILD_OPTIONS.items():
            if option not in taken and getattr(self, option) not in (None, ()):
                raise RecipeError(refusal.format(name=recipe_name))


#: `BuildOptions` fields that only some probes take -> the refusal when another probe is given one
PROBE_BUILD_OPTIONS: dict[str, str] = {
    "max_events": "--max-events applies to event-based datasets; {name!r} has no events",
    "curated_pairs": "curated pairs apply to the trust game; {name!r} has no pairs",
    "rewrites": "third-person rewrites apply to intergroup-empathy; {name!r} has no narratives",
}
