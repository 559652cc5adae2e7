"""The identity groups of each dimension: corrected labels and the seeded sample of names.

A label correction changes the label shown in prompts, never the id fragment (`key`, from
the original label), so ids stay stable across correction versions.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.contract import slug
from ..core.errors import RecipeError
from ..seeding import hash_sample
from .params import AttributionParams, Corrections
from .release import DIMENSIONS, GENDERS, Release


@dataclass(frozen=True)
class Name:
    index: int  # position in the release's list for this group and gender
    name: str


@dataclass(frozen=True)
class Identity:
    dimension: str
    label: str  # corrected label, used in prompts
    label_original: str
    key: str  # id fragment, from the original label (stable across correction versions)
    all_names: dict[str, tuple[Name, ...]]
    sampled: dict[str, tuple[Name, ...]]


def build_identities(
    release: Release, params: AttributionParams, corrections: Corrections
) -> dict[str, list[Identity]]:
    """Identity groups per dimension with corrected labels and the seeded name sample."""
    fixes = {(f.dimension, f.original): f.corrected for f in corrections.labels}
    known = {(d, g.label) for d, gs in release.groups.items() for g in gs}
    stale = sorted(set(fixes) - known)
    if stale:
        raise RecipeError(f"corrections.labels refer to labels not in the release: {stale}")
    out: dict[str, list[Identity]] = {}
    for dimension in DIMENSIONS:
        groups = []
        for g in release.groups[dimension]:
            all_names, sampled = {}, {}
            for gender in GENDERS:
                seen: dict[str, Name] = {}
                for i, n in enumerate(g.names[gender]):
                    seen.setdefault(n, Name(i, n))
                unique = tuple(seen.values())
                if len(unique) < params.names_per_group:
                    raise RecipeError(
                        f"names/{dimension}.json: {g.label}.{gender}_names has {len(unique)} distinct names, "
                        f"fewer than names_per_group={params.names_per_group}"
                    )
                all_names[gender] = unique
                sampled[gender] = tuple(
                    hash_sample(params.seed, f"names/{dimension}/{g.label}/{gender}", unique, params.names_per_group)
                )
            groups.append(
                Identity(
                    dimension, fixes.get((dimension, g.label), g.label), g.label, slug(g.label), all_names, sampled
                )
            )
        out[dimension] = groups
    return out
