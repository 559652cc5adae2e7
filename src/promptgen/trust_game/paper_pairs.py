"""The Trust Game paper's published pairs (docs/DESIGN.md section 5, step 8) and the players' titles.

The paper's own surname selections for three models are published as `pairs_paper`, so its
games can be rebuilt exactly. Pure functions: `dataset` reads `paper_pairs.json`; the games
built on the pairs are in `games`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd
from datasets import Value

from ..core.errors import SourceFormatError
from .census import RACES

#: title -> gender; the paper's players are "Mr. {surname}" and "Ms. {surname}".
TITLES: dict[str, str] = {"Mr.": "male", "Ms.": "female"}
#: paper_pairs.json gender code -> gender.
GENDER_CODES: dict[str, str] = {"M": "male", "F": "female"}
GENDER_TITLES: dict[str, str] = {gender: title for title, gender in TITLES.items()}


# ----------------------------------------------------------------------------- paper pairs


@dataclass(frozen=True)
class PaperPair:
    """One published (model, race, gender, surname) with its position among that gender's 17."""

    model: str
    race: str
    race_key: str
    gender: str
    title: str
    surname: str
    index: int


def parse_paper_pairs(data: Any, *, file: str, models: tuple[str, ...], per_gender: int) -> list[PaperPair]:
    """Check `paper_pairs.json` and flatten it, in the file's order.

    Layout: `races` maps the file's race keys (`Native`) to the five race names; `pairs`
    maps model -> race key -> list of `{surname, gender}` with `gender` `M` or `F`. Every
    model and race must have exactly `per_gender` surnames per gender (the paper's 17),
    none twice, because the games pair the i-th investor with the j-th trustee.
    `index` is 1-based within (model, race, gender).
    """

    def fail(where: str, problem: str) -> SourceFormatError:
        return SourceFormatError(file, where, problem)

    if not isinstance(data, dict) or not isinstance(data.get("races"), dict) or not isinstance(data.get("pairs"), dict):
        raise fail("top level", "expected an object with the mappings 'races' and 'pairs'")
    races: dict[str, str] = data["races"]
    for key, race in races.items():
        if race not in RACES:
            raise fail(f"races.{key}", f"unknown race {race!r}; expected one of {list(RACES)}")
    if sorted(races.values()) != sorted(RACES):
        raise fail("races", f"must name each of {list(RACES)} exactly once, got {list(races.values())}")
    pairs = data["pairs"]
    if sorted(pairs) != sorted(models):
        raise fail("pairs", f"models {list(pairs)} differ from the recipe's paper_pairs.models {list(models)}")
    out: list[PaperPair] = []
    for model, by_race in pairs.items():
        if not isinstance(by_race, dict):
            raise fail(f"pairs.{model}", "expected a mapping race key -> list of pairs")
        unknown = [k for k in by_race if k not in races]
        if unknown:
            raise fail(f"pairs.{model}.{unknown[0]}", f"unknown race key {unknown[0]!r}; known keys {list(races)}")
        missing = [k for k in races if k not in by_race]
        if missing:
            raise fail(f"pairs.{model}", f"race key(s) {missing} missing")
        for key, entries in by_race.items():
            out.extend(_race_pairs(fail, f"pairs.{model}.{key}", model, key, races[key], entries, per_gender))
    return out


def _race_pairs(fail, where: str, model: str, key: str, race: str, entries: Any, per_gender: int) -> list[PaperPair]:
    if not isinstance(entries, list):
        raise fail(where, "expected a list of {surname, gender} objects")
    seen: set[tuple[str, str]] = set()
    index = dict.fromkeys(GENDER_CODES.values(), 0)
    out = []
    for i, entry in enumerate(entries):
        at = f"{where}[{i}]"
        if not isinstance(entry, dict) or set(entry) != {"surname", "gender"}:
            raise fail(at, f"expected exactly the keys 'surname' and 'gender', got {entry!r}")
        surname, code = entry["surname"], entry["gender"]
        if not isinstance(surname, str) or not surname.strip() or surname != surname.strip():
            raise fail(f"{at}.surname", f"expected a non-empty surname without surrounding spaces, got {surname!r}")
        if code not in GENDER_CODES:
            raise fail(f"{at}.gender", f"unknown gender {code!r}; expected one of {list(GENDER_CODES)}")
        gender = GENDER_CODES[code]
        if (surname, gender) in seen:
            raise fail(at, f"{surname!r} ({code}) appears twice for {model} / {key}")
        seen.add((surname, gender))
        index[gender] += 1
        out.append(PaperPair(model, race, key, gender, GENDER_TITLES[gender], surname, index[gender]))
    wrong = {g: n for g, n in index.items() if n != per_gender}
    if wrong:
        counts = ", ".join(f"{n} {g}" for g, n in index.items())
        raise fail(where, f"expected {per_gender} surnames per gender, found {counts}")
    return out


PAIR_FEATURES: dict = {
    "model": Value("string"),
    "race": Value("string"),
    "gender": Value("string"),
    "title": Value("string"),
    "surname": Value("string"),
    "index": Value("int32"),
    "in_seed_list": Value("bool"),
}


def pair_rows(pairs: list[PaperPair], seed: pd.DataFrame) -> Iterator[dict[str, Any]]:
    """Rows of the `pairs_paper` config; `in_seed_list`: the surname is in our seed list for that race."""
    seeded = set(zip(seed["race"], seed["surname"], strict=True))
    for p in pairs:
        yield {
            "model": p.model,
            "race": p.race,
            "gender": p.gender,
            "title": p.title,
            "surname": p.surname,
            "index": p.index,
            "in_seed_list": (p.race, p.surname) in seeded,
        }
