"""Per-model pair curation (docs/DESIGN.md section 5, step 7): race-probe scores -> the pairs a model reads as a race.

The paper picks, for each model, the (title, surname) pairs that model itself reads as the
intended race, so a bias measured in the games is about names the model places in a race.
The race probe (`race_probe` config) asks "{title} {surname} is {race}. True or False?" for
every seed surname and all five races; here those scores become

* a log-odds table: per (title, seed surname, asked race) log P(True) - log P(False);
* a selection: a pair is a candidate for its seed race only if that race has the strictly
  largest log-odds of the five; per race and gender the `per_gender` candidates with the
  largest spread (seed race's log-odds minus the runner-up's) are kept, ranked 1..n.

Why the raw `choice_logprobs` and not `choice_probs`: with two options, the renormalised
probabilities are p_T = e^a / (e^a + e^b) and p_F = e^b / (e^a + e^b), so log p_T - log p_F =
a - b, the same log-odds. The raw sums are used because they are the measurement itself: they
stay exact where a probability rounds to 1.0, and they do not depend on the runner's
`length_normalize` setting (with it on, the stored probabilities come from mean token
log-probabilities and would give a different ratio).

A group with fewer than `per_gender` candidates keeps what it has: the shortfall is recorded
per group (never padded with non-candidates), and the games built on such pairs have
unequal cells (see `dataset`). Everything here is pure; reading the result folder
and writing the dataset is `probes.trust_game.pair_curation`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from datasets import Value

from ..core.contract import slug
from ..core.errors import ProbeError, SourceFormatError
from .census import RACES
from .games import GENDERS
from .paper_pairs import GENDER_TITLES, TITLES, PaperPair

#: race -> log-odds column of the pairs table.
LOGODDS_COLUMNS: dict[str, str] = {race: "logodds_" + slug(race) for race in RACES}
PAIR_COLUMNS: tuple[str, ...] = (
    "race",
    "gender",
    "title",
    "surname",
    *LOGODDS_COLUMNS.values(),
    "spread",
    "seed_race",
    "rank",
)
CURATED_PAIR_FEATURES: dict = {
    "race": Value("string"),
    "gender": Value("string"),
    "title": Value("string"),
    "surname": Value("string"),
    **{column: Value("float64") for column in LOGODDS_COLUMNS.values()},
    "spread": Value("float64"),
    "seed_race": Value("string"),
    "rank": Value("int32"),
}
#: one scored (title, surname) of a seed list; a surname in two seed lists is two keys.
KEY_COLUMNS: tuple[str, ...] = ("title", "gender", "seed_race", "surname")
DEFAULT_PER_GENDER = 17
#: the answers whose log-probabilities are compared, by `choice_types`.
TRUE, FALSE = "True", "False"
_SLUG = re.compile(r"^[a-z0-9][a-z0-9_]*$")
#: recomputed spreads and stored ones may differ by float rounding only.
SPREAD_TOLERANCE = 1e-9


# ----------------------------------------------------------------------------- names


def check_slug(text: str) -> str:
    """A curated source's name fragment: lowercase letters, digits, `_`; never `paper...` (the paper's pairs)."""
    if not _SLUG.match(text):
        raise ProbeError(f"model slug {text!r} must be lowercase letters, digits and '_' (e.g. smollm2_135m)")
    if text.startswith("paper"):
        raise ProbeError(f"model slug {text!r} may not start with 'paper': those config names belong to pairs_paper")
    return text


def default_slug(model: str) -> str:
    """`/cache/models/SmolLM2-135M-Instruct` -> `smollm2_135m_instruct`: the last part of a model path or Hub id."""
    return slug(model.rstrip("/").split("/")[-1]) or "model"


def pairs_config_name(model_slug: str) -> str:
    return f"pairs_{model_slug}"


def curated_games_config_name(model_slug: str) -> str:
    return f"games_{model_slug}"


def model_size_from_name(model: str) -> float | None:
    """Parameters a model's name states (`SmolLM2-135M` -> 1.35e8, `Llama-2-13b` -> 1.3e10), else None.

    Used only to flag pairs of small models as a pipeline check in the card. The last path part
    is read first, then its parent: converted models often sit in `<model name>/hf`.
    """
    for part in reversed(model.rstrip("/").split("/")[-2:]):
        found = re.findall(r"(?<![0-9a-z.])([0-9]+(?:\.[0-9]+)?)([mb])(?![a-z])", part.lower())
        if found:
            number, unit = found[-1]
            return float(number) * (1e6 if unit == "m" else 1e9)
    return None


# ----------------------------------------------------------------------------- log-odds


def logodds_of(choice_types: Sequence[str], logprobs: Sequence[float] | None, *, where: str) -> float:
    """log P(True) - log P(False) of one race-probe result, by the item's own `choice_types` order."""
    types = list(choice_types)
    if types.count(TRUE) != 1 or types.count(FALSE) != 1:
        raise ProbeError(f"{where}: choice_types {types} must hold {TRUE!r} and {FALSE!r} once each")
    if logprobs is None or len(logprobs) != len(types):
        raise ProbeError(f"{where}: choice_logprobs {logprobs!r} do not match choice_types {types}")
    value = float(logprobs[types.index(TRUE)]) - float(logprobs[types.index(FALSE)])
    if not math.isfinite(value):
        raise ProbeError(f"{where}: the log-odds are not finite (choice_logprobs {list(logprobs)})")
    return value


@dataclass(frozen=True)
class LogOdds:
    """Per scored (title, seed surname): the five races' log-odds; plus what could not be used.

    `table` holds the keys with all five races scored (`KEY_COLUMNS` + `LOGODDS_COLUMNS`);
    `incomplete` counts keys with some races unscored (a partial run): they are no candidates.
    """

    table: pd.DataFrame
    results: int
    incomplete: int


def compute_logodds(prompts: pd.DataFrame, results: pd.DataFrame, *, variant: str, prompts_file: str) -> LogOdds:
    """Join results to race-probe items by `id` and pivot to one row per (title, seed surname).

    `prompts`: the `race_probe` rows (`id`, `KEY_COLUMNS`, `race`, `variant`, `choice_types`).
    `results`: `id`, `choice_logprobs` and `file` (the part it came from, for messages). Every
    result id must be an item of `prompts`; results of other variants are left out.
    """
    unknown = ~results["id"].isin(prompts["id"])
    if unknown.any():
        first = results[unknown].iloc[0]
        raise ProbeError(
            f"{first['file']}: result id {first['id']!r} is not an item of {prompts_file} "
            f"({int(unknown.sum())} such id(s)); were these results scored on another prompt dataset?"
        )
    bad_race = ~prompts["race"].isin(RACES) | ~prompts["seed_race"].isin(RACES)
    if bad_race.any():
        row = prompts[bad_race].iloc[0]
        raise ProbeError(
            f"{prompts_file}: item {row['id']!r}: race {row['race']!r} / seed_race {row['seed_race']!r} "
            f"is not one of {list(RACES)}"
        )
    joined = results.merge(prompts, on="id", how="inner", validate="one_to_one")
    joined = joined[joined["variant"] == variant]
    if joined.empty:
        found = sorted(set(results.merge(prompts, on="id")["variant"]))
        raise ProbeError(f"no race-probe results for variant {variant!r}; the results hold variant(s) {found}")
    values = [
        logodds_of(types, lps, where=f"{file}: result {item_id!r}")
        for item_id, types, lps, file in zip(
            joined["id"], joined["choice_types"], joined["choice_logprobs"], joined["file"], strict=True
        )
    ]
    wide = (
        joined.assign(logodds=values)
        .pivot_table(index=list(KEY_COLUMNS), columns="race", values="logodds", aggfunc="first")
        .reindex(columns=list(RACES))
    )
    complete = wide.notna().all(axis=1)
    table = wide[complete].rename(columns=LOGODDS_COLUMNS).reset_index()
    table.columns.name = None
    return LogOdds(table[[*KEY_COLUMNS, *LOGODDS_COLUMNS.values()]], len(joined), int((~complete).sum()))


# ----------------------------------------------------------------------------- selection


@dataclass(frozen=True)
class Selection:
    """The kept pairs (`PAIR_COLUMNS`) and, per race and gender, how many were scored, qualified and kept."""

    pairs: pd.DataFrame
    groups: list[dict[str, Any]]

    @property
    def shortfall(self) -> list[dict[str, Any]]:
        return [g for g in self.groups if g["shortfall"] > 0]


def spreads(table: pd.DataFrame) -> pd.Series:
    """Seed race's log-odds minus the largest other race's: > 0 exactly when the seed race is the strict maximum."""
    matrix = table[list(LOGODDS_COLUMNS.values())].to_numpy(dtype="float64")
    seed = table["seed_race"].map(RACES.index).to_numpy(dtype="int64")  # int also when empty (no pairs kept)
    rows = np.arange(len(table))
    others = matrix.copy()
    others[rows, seed] = -np.inf
    if not len(table):
        return pd.Series([], index=table.index, dtype="float64")
    return pd.Series(matrix[rows, seed] - others.max(axis=1), index=table.index, dtype="float64")


def select_pairs(table: pd.DataFrame, *, per_gender: int) -> Selection:
    """Step 7: candidates (seed race strictly largest), then the top `per_gender` per race and gender by spread.

    A tie for the largest log-odds is no candidate: the model does not single the seed race
    out. Equal spreads are ordered by surname, so the result never depends on row order.
    A group with fewer candidates keeps them all and records the shortfall.
    """
    if per_gender < 1:
        raise ProbeError(f"--per-gender must be positive, got {per_gender}")
    scored = table.assign(spread=spreads(table))
    frames, groups = [], []
    for race in RACES:
        for gender in GENDERS:
            group = scored[(scored["seed_race"] == race) & (scored["gender"] == gender)]
            candidates = group[group["spread"] > 0]
            kept = candidates.sort_values(["spread", "surname"], ascending=[False, True], kind="mergesort")
            kept = kept.head(per_gender).reset_index(drop=True)
            frames.append(kept.assign(race=race, rank=np.arange(1, len(kept) + 1, dtype="int64")))
            groups.append(
                {
                    "race": race,
                    "gender": gender,
                    "scored": len(group),
                    "candidates": len(candidates),
                    "kept": len(kept),
                    "shortfall": per_gender - len(kept),
                }
            )
    pairs = pd.concat(frames, ignore_index=True)[list(PAIR_COLUMNS)]
    return Selection(pairs.astype({"rank": "int64"}), groups)


# ----------------------------------------------------------------------------- a curated source


@dataclass(frozen=True)
class CuratedPairs:
    """One model's curated pairs as the dataset build takes them.

    `record` is JSON: where the pairs come from (model, revision, scoring, results key,
    prompt fingerprints, variant, per_gender) and the selection summary (`groups`,
    `incomplete`). It goes into the manifest's parameters, so the fingerprint covers it and a
    later curation can carry these pairs into the next version unchanged.
    """

    slug: str
    pairs: pd.DataFrame
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def per_gender(self) -> int:
        return int(self.record["per_gender"])


def check_pairs_table(frame: pd.DataFrame, *, file: str, per_gender: int) -> pd.DataFrame:
    """A stored pairs table checked for what the games rely on; errors name the file, row and field.

    Columns exactly `PAIR_COLUMNS`; known race, gender and title; `seed_race` equal to
    `race`; ranks 1..n per race and gender with n <= `per_gender`; distinct surnames per
    group; finite log-odds; `spread` positive and equal to the recomputed one.
    """
    if list(frame.columns) != list(PAIR_COLUMNS):
        raise SourceFormatError(file, "columns", f"expected {list(PAIR_COLUMNS)}, found {list(frame.columns)}")
    frame = frame.reset_index(drop=True)

    def fail(i: int, column: str, problem: str) -> SourceFormatError:
        row = frame.iloc[i]
        return SourceFormatError(file, f"row {i} ({row['title']} {row['surname']}), column {column!r}", problem)

    for column, allowed in (("race", RACES), ("seed_race", RACES), ("gender", GENDERS), ("title", tuple(TITLES))):
        bad = ~frame[column].isin(allowed)
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise fail(i, column, f"unknown value {frame[column].iloc[i]!r}; expected one of {list(allowed)}")
    checks = (
        ("seed_race", frame["seed_race"] != frame["race"], "differs from `race`: a pair is kept for its seed race"),
        ("title", frame["title"] != frame["gender"].map(GENDER_TITLES), "does not match `gender`"),
        ("surname", frame["surname"].isna() | (frame["surname"].str.strip() == ""), "empty surname"),
    )
    for column, bad, problem in checks:
        if bad.any():
            raise fail(int(np.flatnonzero(bad.to_numpy())[0]), column, problem)
    matrix = frame[list(LOGODDS_COLUMNS.values())].to_numpy(dtype="float64")
    if not np.isfinite(matrix).all():
        i = int(np.flatnonzero(~np.isfinite(matrix).all(axis=1))[0])
        raise fail(i, "logodds_*", "log-odds must be finite")
    recomputed = spreads(frame).to_numpy()
    stored = frame["spread"].to_numpy(dtype="float64")
    off = ~(stored > 0) | ~(np.abs(recomputed - stored) <= SPREAD_TOLERANCE)
    if off.any():
        i = int(np.flatnonzero(off)[0])
        raise fail(
            i, "spread", f"{frame['spread'].iloc[i]!r} is not the positive gap {recomputed[i]!r} to the runner-up"
        )
    for (race, gender), group in frame.groupby(["race", "gender"], sort=False):
        ranks = sorted(group["rank"].tolist())
        if ranks != list(range(1, len(group) + 1)) or len(group) > per_gender:
            raise fail(
                int(group.index[0]), "rank", f"{race} {gender}: ranks {ranks} are not 1..n with n <= {per_gender}"
            )
        dup = group["surname"].str.casefold().duplicated()
        if dup.any():
            raise fail(
                int(group.index[int(np.flatnonzero(dup.to_numpy())[0])]), "surname", "appears twice in its group"
            )
    return frame


def as_paper_pairs(curated: CuratedPairs) -> list[PaperPair]:
    """The pairs in the form `games.group_players` takes; `index` is the rank."""
    return [
        PaperPair(curated.slug, r.race, r.race, r.gender, r.title, r.surname, int(r.rank))
        for r in curated.pairs.itertuples()
    ]


def curated_version(recipe_version: str, curated: Iterable[CuratedPairs]) -> str:
    """`1.1.0` -> `1.1.0+pairs.<8 hex>`: a new version whenever the curated pairs or their records change.

    Semver build metadata keeps the recipe's version readable, and the hash of every curated
    table and record makes a different curation a different version (and publish tag).
    """
    digest = hashlib.sha256()
    for cur in sorted(curated, key=lambda c: c.slug):
        digest.update(cur.slug.encode() + b"\x1f")
        digest.update(json.dumps(cur.record, sort_keys=True).encode() + b"\x1f")
        rows = [[v.item() if isinstance(v, np.generic) else v for v in r] for r in cur.pairs.itertuples(index=False)]
        digest.update(json.dumps(rows).encode() + b"\x1e")
    return f"{recipe_version}+pairs.{digest.hexdigest()[:8]}"
