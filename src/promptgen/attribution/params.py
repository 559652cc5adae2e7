"""The attribution recipe's `parameters` and `corrections` blocks, validated into frozen dataclasses.

Unknown keys and values outside the allowed sets are `RecipeError`s naming the key, before
anything is built.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.errors import RecipeError
from ..core.validate import choose, take
from .release import DIMENSIONS, GENDERS, OUTCOME_CONFIGS, TextRule

OPTION_ORDERS = ("permuted", "rotations", "canonical")
SAMPLINGS = ("default", "full")
CONDITIONS = ("context", "context+identity")


@dataclass(frozen=True)
class ActorActorParams:
    """`parameters.actor_actor`: the two-actor items' outcome configs, gender pairs, scenarios and target cue."""

    outcome_configs: tuple[str, ...]
    gender_pairs: tuple[str, ...]
    scenarios_per_pair: int
    target_cue: dict[str, str]


@dataclass(frozen=True)
class ActorObserverParams:
    """`parameters.actor_observer`: the conditions, scenarios per cell and the anonymous observer."""

    conditions: tuple[str, ...]
    scenarios_per_cell: int
    anonymous_observer: str


@dataclass(frozen=True)
class AttributionParams:
    """The recipe's whole `parameters` block, each section parsed."""

    seed: int
    names_per_group: int
    option_order: str
    sampling: str
    rows_per_shard: int
    actor_actor: ActorActorParams
    actor_observer: ActorObserverParams
    #: add the `*_release` configs (the release's own scorer items, `release_items`)
    release_configs: bool = True


@dataclass(frozen=True)
class LabelFix:
    """`corrections.labels`: one option label of `dimension` the release misspells, as it should read, and why."""

    dimension: str
    original: str
    corrected: str
    reason: str


@dataclass(frozen=True)
class Corrections:
    """The recipe's `corrections` block: its version, the label fixes and the text rules applied on reading."""

    version: str
    labels: tuple[LabelFix, ...]
    texts: tuple[TextRule, ...]


def parse_params(raw: dict[str, Any]) -> AttributionParams:
    """Validate the recipe's `parameters` block (unknown keys are errors)."""
    where = "parameters"
    p = take(
        where,
        raw,
        {
            "seed": int,
            "names_per_group": int,
            "option_order": str,
            "sampling": str,
            "rows_per_shard": int,
            "actor_actor": dict,
            "actor_observer": dict,
        },
        {"release_configs": bool},
    )
    aa = take(
        f"{where}.actor_actor",
        p["actor_actor"],
        {
            "outcome_configs": list,
            "gender_pairs": list,
            "scenarios_per_pair": int,
            "target_cue": dict,
        },
    )
    ao = take(
        f"{where}.actor_observer",
        p["actor_observer"],
        {
            "conditions": list,
            "scenarios_per_cell": int,
            "anonymous_observer": str,
        },
    )
    if p["option_order"] not in OPTION_ORDERS:
        raise RecipeError(f"{where}.option_order must be one of {OPTION_ORDERS}, got {p['option_order']!r}")
    if p["sampling"] not in SAMPLINGS:
        raise RecipeError(f"{where}.sampling must be one of {SAMPLINGS}, got {p['sampling']!r}")
    for key in ("names_per_group", "rows_per_shard"):
        if p[key] < 1:
            raise RecipeError(f"{where}.{key} must be positive")
    cue = take(f"{where}.actor_actor.target_cue", aa["target_cue"], {"success": str, "failure": str})
    for outcome, text in cue.items():
        if "{T}" not in text:
            raise RecipeError(f"{where}.actor_actor.target_cue.{outcome} must contain {{T}}, got {text!r}")
    pairs = []
    for gp in aa["gender_pairs"]:
        parts = str(gp).split("-")
        if len(parts) != 2 or any(x not in GENDERS for x in parts):
            raise RecipeError(f"{where}.actor_actor.gender_pairs: {gp!r} is not '<female|male>-<female|male>'")
        pairs.append(str(gp))
    for key, value in (
        ("scenarios_per_pair", aa["scenarios_per_pair"]),
        ("scenarios_per_cell", ao["scenarios_per_cell"]),
    ):
        if value < 1:
            raise RecipeError(f"{where}: {key} must be positive")
    return AttributionParams(
        seed=p["seed"],
        names_per_group=p["names_per_group"],
        option_order=p["option_order"],
        sampling=p["sampling"],
        rows_per_shard=p["rows_per_shard"],
        actor_actor=ActorActorParams(
            outcome_configs=choose(f"{where}.actor_actor.outcome_configs", aa["outcome_configs"], OUTCOME_CONFIGS),
            gender_pairs=tuple(pairs),
            scenarios_per_pair=aa["scenarios_per_pair"],
            target_cue=dict(cue),
        ),
        actor_observer=ActorObserverParams(
            conditions=choose(f"{where}.actor_observer.conditions", ao["conditions"], CONDITIONS),
            scenarios_per_cell=ao["scenarios_per_cell"],
            anonymous_observer=ao["anonymous_observer"],
        ),
        release_configs=p.get("release_configs", True),
    )


def parse_corrections(raw: dict[str, Any]) -> Corrections:
    """Validate the recipe's versioned `corrections` table."""
    c = take(
        "corrections",
        raw or {"version": "0", "labels": [], "texts": []},
        {"version": str, "labels": list, "texts": list},
    )
    labels = []
    for i, fix in enumerate(c["labels"]):
        f = take(f"corrections.labels[{i}]", fix, {"dimension": str, "original": str, "corrected": str, "reason": str})
        if f["dimension"] not in DIMENSIONS:
            raise RecipeError(f"corrections.labels[{i}].dimension must be one of {DIMENSIONS}")
        labels.append(LabelFix(**f))
    texts = []
    for i, rule in enumerate(c["texts"]):
        r = take(f"corrections.texts[{i}]", rule, {"find": str, "replace": str, "reason": str})
        if not r["find"]:
            raise RecipeError(f"corrections.texts[{i}].find must not be empty")
        texts.append(TextRule(**r))
    return Corrections(version=c["version"], labels=tuple(labels), texts=tuple(texts))
