"""The choices a build is asked for, common to every probe, and the ones only some probes take.

Below the probes' packages, so each probe's drafter can take a `BuildOptions` (its `draft`
function, named by its `ProbeSpec`); what a probe's own derive steps add (`BuildOptions.derived`)
is named by its spec and typed by its own package, never here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import RecipeError


@dataclass(frozen=True)
class BuildOptions:
    """Choices that change what is built (and, all but `derived`, the dataset's name: a derive step's new
    version goes to a folder its command names).

    `full`: the full cross product instead of the recipe's sampling; `max_events`: a
    stratified subset of N source events, for tests and quick runs (a probe whose dataset is
    made of events takes it); `derived`: what a probe's own derive steps add to a new version of
    its dataset, by the names its `ProbeSpec.build_options` lists, each value typed by the probe's
    package (a model's pairs or rewrites, say), so no other module knows them; `configs`: only these
    configs of the recipe (sorted, once each), so a run that scores one config does not wait for the
    others (the default talent-or-luck build spends minutes on 3 M release rows that a `single_actor`
    run never reads).
    """

    full: bool = False
    max_events: int | None = None
    #: a derive step's additions: build option name -> value (read by the probe's drafter alone)
    derived: Mapping[str, Any] = field(default_factory=dict)
    configs: tuple[str, ...] = ()

    def dataset_name(self, recipe_name: str) -> str:
        """`talent-or-luck`, `talent-or-luck-full`, `intergroup-empathy-events24`, `talent-or-luck-single_actor`, ...

        A build of some configs is named by them, so it is never taken for the whole dataset.
        """
        name = recipe_name + ("-full" if self.full else "")
        name += f"-events{self.max_events}" if self.max_events is not None else ""
        return name + "".join(f"-{config}" for config in self.configs)

    def check_taken(self, recipe_name: str, taken: tuple[str, ...]) -> None:
        """Refuse, before any work, a build option the probe does not take (`ProbeSpec.build_options`)."""
        if self.max_events is not None and MAX_EVENTS not in taken:
            raise RecipeError(f"--max-events applies to event-based datasets; {recipe_name!r} has no events")
        if MAX_EVENTS in self.derived:
            raise RecipeError(f"{MAX_EVENTS} is BuildOptions.max_events (--max-events), not a derived build option")
        if unknown := sorted(set(self.derived) - set(taken)):
            takes = ", ".join(t for t in taken if t != MAX_EVENTS) or "none"
            raise RecipeError(f"{recipe_name!r} takes no build option {', '.join(unknown)} (its own: {takes})")


#: the build option of a probe whose dataset is made of events (`probes build --max-events`)
MAX_EVENTS = "max_events"
