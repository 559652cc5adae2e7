"""Race-probe items (docs/DESIGN.md section 5, step 7): "{title} {surname} is {race}. True or False?".

Asked for every seed surname and every race, so a later step (`curation`) can keep the surnames
the model itself reads as the intended race. Pure functions; the seed list comes from `census`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd
from datasets import Value

from ..core.contract import contract_row, item_features, slug, user_messages
from .census import RACES
from .paper_pairs import TITLES


@dataclass(frozen=True)
class ProbeVariant:
    """One published True/False prompt format and the answer strings it is scored on."""

    template: str
    choices: tuple[str, str]


#: docs/DESIGN.md section 5 step 7. `base`: Llama-2 / Mistral style, printed by the paper on three lines
#: (`### True or False:\n` / `1. {title} {surname} is {race}.\n` / `### Answer:\n\n`), whose `\n`
#: marks stand for empty lines it does not show: each is read as the game prompt reads them
#: (`games`: the literal `\n` plus the line that ends there), so every printed line ends with its
#: marks and a line break. `phi`: Phi-2's exercise format, printed on one line with its line
#: breaks as `\n`; its answers follow `Answer:` with a space.
RACE_PROBE_VARIANTS: dict[str, ProbeVariant] = {
    "base": ProbeVariant(
        "### True or False:\n\n1. {title} {surname} is {race}.\n\n### Answer:\n\n\n", ("True", "False")
    ),
    "phi": ProbeVariant("Exercise 1:\nTrue or False: {title} {surname} is {race}.\nAnswer:", (" True", " False")),
}
#: how the question names a race where the census category's word is not the paper's: its example
#: asks "Mr. Johnson is African American" for the Black category (the `race` column keeps `Black`)
RACE_WORDS: dict[str, str] = {"Black": "African American"}


@dataclass(frozen=True)
class RaceProbeParams:
    """The recipe's `race_probe` block: which titles and prompt variants are asked."""

    titles: tuple[str, ...]
    variants: tuple[str, ...]


RACE_PROBE_CHOICE_TYPES = ("True", "False")
RACE_PROBE_LABELS = ("T", "F")


RACE_PROBE_META: dict = {
    "title": Value("string"),
    "gender": Value("string"),
    "surname": Value("string"),
    "seed_race": Value("string"),
    "race": Value("string"),
    "variant": Value("string"),
}
RACE_PROBE_FEATURES = item_features(RACE_PROBE_META)


def render_race_probe(variant: str, title: str, surname: str, race: str) -> str:
    """The True/False question of one variant for one (title, surname, census race), the race in the paper's words."""
    return RACE_PROBE_VARIANTS[variant].template.format(title=title, surname=surname, race=RACE_WORDS.get(race, race))


def race_probe_id(variant: str, title: str, seed_race: str, surname: str, race: str) -> str:
    """Stable id from the row's factors: `race_probe/base/mr/native_american/begay/white`."""
    return "/".join(("race_probe", variant, slug(title), slug(seed_race), slug(surname), slug(race)))


def race_probe_rows(seed: pd.DataFrame, params: RaceProbeParams) -> Iterator[dict[str, Any]]:
    """Every variant x title x seed surname (in seed-list order per race) x asked race.

    A surname in two races' seed lists appears under both `seed_race`s with identical
    prompts, so each seed list can be refined on its own (step 7).
    """
    surnames = list(zip(seed["race"], seed["surname"], strict=True))
    for variant in params.variants:
        spec = RACE_PROBE_VARIANTS[variant]
        options: dict[str, Any] = {
            "choices": spec.choices,
            "choice_labels": RACE_PROBE_LABELS,
            "choice_types": RACE_PROBE_CHOICE_TYPES,
        }
        for title in params.titles:
            for seed_race, surname in surnames:
                for race in RACES:
                    prompt = render_race_probe(variant, title, surname, race)
                    item_id = race_probe_id(variant, title, seed_race, surname, race)
                    yield {
                        **contract_row(item_id, "race_probe", "choice", prompt, user_messages(prompt), **options),
                        "title": title,
                        "gender": TITLES[title],
                        "surname": surname,
                        "seed_race": seed_race,
                        "race": race,
                        "variant": variant,
                    }


def race_probe_count(seed: pd.DataFrame, params: RaceProbeParams) -> int:
    """Rows `race_probe_rows` yields."""
    return len(params.variants) * len(params.titles) * len(seed) * len(RACES)
