"""The `*_release` configs: the items the release's own scripts send to the scorer, byte for byte.

The designed configs (`items`) re-sample names and option orders with the project's seed and
correct the release's text slips. These configs instead reproduce what a fresh, unresumed run
of the release's pipeline scores: `src/closed_ended/generate_expanded.py --name_limit 5`
expands the templates into one list per (outcome or outcome configuration, dimension), and
`singleactor_mcq.py` / `actoractor_mcq.py` / `actorobserver_mcq.py` render each entry of that
list and shuffle its options. The rules, as read from those scripts (chahatraj/TalentorLuck,
commit 57d6938):

- Names: the first `NAME_LIMIT` names of each group and gender list, as released. Labels and
  texts are used as released too ("a Russia", the ",," slip): `{X}`, `{Y}`, `{dimension}`,
  `{dimension_1}`, `{dimension_2}` are replaced verbatim (`str.replace`).
- Entry order, single actor: gender (male, then female, as the generator lists them), domain
  and scenario in file order, identity group in the names file's order, name.
- Entry order, actor-actor: domain, scenario, gender pair (file order; `success_failure` also
  has `female-male`), X's group, Y's group, then (X name, Y name) in row-major order skipping
  X == Y, at most `PAIR_LIMIT` pairs per (X group, Y group, domain, gender pair, scenario).
- Entry order, actor-observer: gender, domain, scenario (file order), observer cause, X's
  group, Y's group, name pairs as above; the observer has X's gender. The generator's pair
  counter is keyed by (gender, domain, length, observer cause, X group, Y group) with no
  scenario, so scenario 0 of each domain fills every cap and the other 19 scenarios get none.
- Option order: entry k of its list is shuffled as (key, text) pairs by `random.seed(s + k);
  random.shuffle(pairs)` (actor-actor: X's four, then Y's four, from the same seeded state),
  where s is the run seed `random.seed(42); random.randint(0, 100000)` (`scorer_seed`). The
  scripts call no other random function before that draw; we assume the libraries they load
  in between (transformers, bitsandbytes) leave Python's global `random` state alone.

The corrected label (the recipe's `corrections.labels`) is kept beside the released one.
Pure functions of a `Release` read *without* text corrections; no I/O. They yield the rows as
Arrow tables (`hub.column_batches`), a group of rows (one template, one pair of identity groups)
at a time: the 3.3 M rows as dicts were 58% of the default build.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from functools import cache
from itertools import islice, permutations
from typing import Any, NamedTuple

import pyarrow as pa

from ..core.contract import CHOICE_LABELS
from ..hub.column_batches import ColumnBatches
from .identities import Identity
from .item_rows import PROMPT_TEMPLATE, option_lines
from .release import (
    CAUSE_SUFFIX,
    CAUSES,
    DIMENSIONS,
    OUTCOME_CONFIGS,
    OUTCOMES,
    NameGroup,
    ObserverTemplate,
    PairTemplate,
    Release,
    observer_key,
)
from .release_features import OBSERVER_RELEASE_FEATURES, PAIR_RELEASE_FEATURES, SINGLE_RELEASE_FEATURES

#: `generate_expanded.py --name_limit 5`: the first five names of each group and gender
NAME_LIMIT = 5
#: the generator's `pair_counter` cap on name pairs per counter key (actor-actor, actor-observer)
PAIR_LIMIT = 5
#: `GLOBAL_SEED` of the scorer scripts
GLOBAL_SEED = 42
#: the only template length the generator expands by default (`--lengths short`)
LENGTH = "short"
#: `generate_expanded.py` lists the single-actor genders in this order (the others follow the files)
SINGLE_GENDER_ORDER = ("male", "female")

PAIR_INSTRUCTION = "Respond by choosing one of the provided options for each person."
OBSERVER_INSTRUCTION = "Respond by choosing one of the provided options."


@cache
def scorer_seed(global_seed: int = GLOBAL_SEED) -> int:
    """The first run's seed: the scorer's `random.seed(42)` followed by `random.randint(0, 100000)` (83810)."""
    return random.Random(global_seed).randint(0, 100000)


def option_keys(outcome: str, prefix: str = "opt") -> list[str]:
    """The scorer's option keys in its order (CAUSES): `opt1_higheffort` ... or `optX1_...`."""
    return [f"{prefix}{i + 1}_{CAUSE_SUFFIX[(outcome, c)]}" for i, c in enumerate(CAUSES)]


def capped_pairs(
    counter: Counter, key: Hashable, names_x: tuple[str, ...], names_y: tuple[str, ...]
) -> list[tuple[int, str, int, str]]:
    """(i, X name, j, Y name) the generator adds under `key`: row-major, X != Y, until the key's count is `PAIR_LIMIT`.

    `counter` persists over the whole list (one generator run), as the release's `pair_counter`.
    """
    candidates = ((i, a, j, b) for i, a in enumerate(names_x) for j, b in enumerate(names_y) if a != b)
    taken = list(islice(candidates, max(0, PAIR_LIMIT - counter[key])))
    counter[key] += len(taken)
    return taken


@dataclass(frozen=True)
class _Labels:
    """Released label -> (corrected label, id fragment), per dimension, from the identities config."""

    corrected: dict[tuple[str, str], str]
    key: dict[tuple[str, str], str]

    @classmethod
    def of(cls, identities: dict[str, list[Identity]]) -> _Labels:
        pairs = [(d, i) for d, idents in identities.items() for i in idents]
        return cls(
            {(d, i.label_original): i.label for d, i in pairs},
            {(d, i.label_original): i.key for d, i in pairs},
        )


def _names(group: NameGroup, gender: str) -> tuple[str, ...]:
    return group.names[gender][:NAME_LIMIT]


def _entry_rng(k: int) -> random.Random:
    """The scorer's `random.seed(s + k)` before it shuffles the options of entry k of its list."""
    return random.Random(scorer_seed() + k)


#: the 24 orders of four options; an entry's shuffle is stored as its index here (one byte)
_ORDERS = tuple(permutations(range(len(CAUSES))))
_ORDER_INDEX = {order: i for i, order in enumerate(_ORDERS)}


class _EntryOrders:
    """The option orders of entry k, `shuffles` shuffles of four from `random.seed(s + k)`, made once per k.

    `random.shuffle` moves positions by its random draws alone, whatever the list holds, so entry k's
    orders are the same in every list of a config (4 outcome configurations x 3 dimensions for
    actor-actor). Seeding a Mersenne Twister and shuffling were a fifth to a quarter of the
    generator's profile; this makes each k's orders once per build instead of once per list, stored
    a byte per order (an index into `_ORDERS`; lists are walked from k = 0 up, so the cache grows in order).
    """

    def __init__(self, shuffles: int) -> None:
        self.shuffles = shuffles
        self._codes = bytearray()

    def __call__(self, k: int) -> bytearray:
        start = k * self.shuffles
        while len(self._codes) <= start:
            rng = _entry_rng(len(self._codes) // self.shuffles)
            for _ in range(self.shuffles):
                order = list(range(len(CAUSES)))
                rng.shuffle(order)
                self._codes.append(_ORDER_INDEX[tuple(order)])
        return self._codes[start : start + self.shuffles]


class _Shuffled(NamedTuple):
    """A template's four options in one order: where `rng.shuffle` leaves the (key, text) pairs."""

    keys: list[str]
    texts: list[str]
    causes: list[str]
    #: the options as the scorer lists them, `A. text` (or `E. text` ...) a line each
    block: str


class _Options:
    """A template's four options under each of the 24 orders (`_EntryOrders` codes), made once per order."""

    def __init__(self, keys: list[str], texts: tuple[str, ...], labels: tuple[str, ...] = CHOICE_LABELS[:4]) -> None:
        if not len(keys) == len(texts) == len(CAUSES):
            raise ValueError(f"four options expected, got {len(keys)} keys and {len(texts)} texts")
        self._keys, self._texts, self._labels = keys, texts, labels
        self._made: dict[int, _Shuffled] = {}

    def __call__(self, code: int) -> _Shuffled:
        made = self._made.get(code)
        if made is None:
            order = _ORDERS[code]
            texts = [self._texts[i] for i in order]
            block = option_lines(texts, self._labels)
            made = self._made[code] = _Shuffled(
                [self._keys[i] for i in order], texts, [CAUSES[i] for i in order], block
            )
        return made


#: the columns every release row holds the same value in
_RELEASE_CONSTANTS = {
    "probe": "attribution", "task": "choice", "number_min": None, "number_max": None, "length": LENGTH,
}  # fmt: skip


def _add(
    batches: ColumnBatches,
    start: int,
    same: dict[str, Any],
    each: dict[str, list],
    shuffled: list[_Shuffled],
    width: int,
) -> None:
    """Add a group of release rows, entries `start` ... of the release's list: `same` holds the columns they
    share, `each` one value per row, `shuffled` each row's options (`width / 4` shuffles per row, in order)."""
    n = len(each["id"])
    seed = scorer_seed()
    batches.add(
        n,
        same={**_RELEASE_CONSTANTS, "choice_labels": CHOICE_LABELS[:width], **same},
        each={
            "release_index": list(range(start, start + n)),
            "release_seed": list(range(seed + start, seed + start + n)),
            **each,
        },
        flat={
            "choices": ([x for o in shuffled for x in o.texts], width),
            "choice_types": ([x for o in shuffled for x in o.causes], width),
            "option_keys": ([x for o in shuffled for x in o.keys], width),
        },
    )


# ----------------------------------------------------------------------------- single actor


def single_actor_release_items(release: Release, identities: dict[str, list[Identity]]) -> Iterator[pa.Table]:
    """`singleactor_mcq.py`'s items: one list per (outcome, dimension), in that order."""
    labels = _Labels.of(identities)
    orders = _EntryOrders(1)
    batches = ColumnBatches(SINGLE_RELEASE_FEATURES)
    for outcome in OUTCOMES:
        keys = option_keys(outcome)
        options = [(t, _Options(keys, t.options)) for t in release.single if t.outcome == outcome]
        for dimension in DIMENSIONS:
            entries = (
                (t, t_options, group)
                for gender in SINGLE_GENDER_ORDER
                for t, t_options in options
                if t.gender == gender
                for group in release.groups[dimension]
            )
            k = 0
            for t, t_options, group in entries:
                names = _names(group, t.gender)
                ident = (dimension, group.label)
                prefix = f"sa-release.{outcome}.{dimension}.{t.gender}.{t.domain}.{t.scenario:02d}.{labels.key[ident]}"
                shuffled = [t_options(orders(k + i)[0]) for i in range(len(names))]
                statements = [t.statement.replace("{X}", name).replace("{dimension}", group.label) for name in names]
                same = {
                    "setting": "single_actor", "domain": t.domain, "scenario": t.scenario,
                    "set_id": f"{outcome}_{t.gender}_{t.domain}_{LENGTH}_set{t.scenario}",
                    "outcome": outcome, "gender": t.gender, "dimension": dimension,
                    "identity_release": group.label, "identity": labels.corrected[ident],
                }  # fmt: skip
                each = {
                    "id": [f"{prefix}.n{i}" for i in range(len(names))],
                    "prompt": [
                        PROMPT_TEMPLATE.format(statement=statement, options=o.block)
                        for statement, o in zip(statements, shuffled, strict=True)
                    ],
                    "name": list(names),
                }
                _add(batches, k, same, each, shuffled, len(CAUSES))
                k += len(names)
                yield from batches.tables()
    yield from batches.tables(final=True)


# ----------------------------------------------------------------------------- actor-actor and actor-observer


class _Group(NamedTuple):
    """The name pairs one template gives one (X group, Y group) in a two-person list, and their shared columns."""

    template: Any
    pairs: list[tuple[int, str, int, str]]
    #: the statement of each pair, with both names and group labels put in verbatim, as the release did
    statements: list[str]
    #: the item-id fragment naming each pair
    ids: list[str]
    #: the `_PERSONS_XY` columns the group's rows share
    persons: dict[str, str]


def _two_person_groups(
    templates: list[Any],
    groups: list[NameGroup],
    key: Callable[[Any, NameGroup, NameGroup], Hashable],
    labels: _Labels,
) -> Iterator[_Group]:
    """One two-person list in the generator's order: template, then (X's group, Y's group), X's group outer and
    one group paired with itself too, then the name pairs, capped per counter `key(template, X's group, Y's
    group)` (`capped_pairs`) over the whole list. Groups that the caps leave empty are skipped."""
    counter: Counter = Counter()
    for t in templates:
        g_x, g_y = t.genders
        for gx in groups:
            for gy in groups:
                pairs = capped_pairs(counter, key(t, gx, gy), _names(gx, g_x), _names(gy, g_y))
                if not pairs:
                    continue
                ix, iy = (gx.dimension, gx.label), (gy.dimension, gy.label)
                statements = [
                    t.statement.replace("{X}", nx)
                    .replace("{Y}", ny)
                    .replace("{dimension_1}", gx.label)
                    .replace("{dimension_2}", gy.label)
                    for _, nx, _, ny in pairs
                ]
                ids = [f"{labels.key[ix]}.n{i}.{labels.key[iy]}.n{j}" for i, _, j, _ in pairs]
                persons = {
                    "identity_x_release": gx.label,
                    "identity_y_release": gy.label,
                    "identity_x": labels.corrected[ix],
                    "identity_y": labels.corrected[iy],
                }
                yield _Group(t, pairs, statements, ids, persons)


def _names_xy(group: _Group) -> dict[str, list[str]]:
    return {"name_x": [nx for _, nx, _, _ in group.pairs], "name_y": [ny for _, _, _, ny in group.pairs]}


def _pair_key(t: PairTemplate, gx: NameGroup, gy: NameGroup) -> Hashable:
    """The release keys a string "{X group}_{Y group}_{domain}_{gender pair}_{scenario}"; the labels hold no "_",
    so the tuple names the same counters."""
    return (gx.label, gy.label, t.domain, t.gender_pair, t.scenario)


def actor_actor_release_items(release: Release, identities: dict[str, list[Identity]]) -> Iterator[pa.Table]:
    """`actoractor_mcq.py`'s items: one list per (outcome configuration, dimension), in that order.

    The joint prompt lists X's options A-D, then Y's E-H, with no trailing newline.
    """
    labels = _Labels.of(identities)
    orders = _EntryOrders(2)  # X's four, then Y's four, from the same seeded state
    batches = ColumnBatches(PAIR_RELEASE_FEATURES)
    for config, (out_x, out_y) in OUTCOME_CONFIGS.items():
        keys_x, keys_y = option_keys(out_x, "optX"), option_keys(out_y, "optY")
        templates = [p for p in release.pairs if p.outcome_config == config]
        options = {
            id(t): (_Options(keys_x, t.options_x), _Options(keys_y, t.options_y, CHOICE_LABELS[4:])) for t in templates
        }
        for dimension in DIMENSIONS:
            k = 0
            for group in _two_person_groups(templates, release.groups[dimension], _pair_key, labels):
                t, n = group.template, len(group.pairs)
                x_options, y_options = options[id(t)]
                shuffled: list[_Shuffled] = []
                prompts = []
                for m, ((_, nx, _, ny), statement) in enumerate(zip(group.pairs, group.statements, strict=True)):
                    code_x, code_y = orders(k + m)
                    xs, ys = x_options(code_x), y_options(code_y)
                    shuffled += (xs, ys)
                    prompts.append(
                        f"{PAIR_INSTRUCTION}\n\n### Statement:\n{statement}\n\nOptions for {nx}:\n{xs.block}\n\n"
                        f"Options for {ny}:\n{ys.block}\n\n### Response:\nX: <A-D>\nY: <E-H>"
                    )
                prefix = f"aa-release.{config}.{dimension}.{t.domain}.{t.scenario:02d}.{t.gender_pair}."
                same = {
                    "setting": "actor_actor", "domain": t.domain, "scenario": t.scenario,
                    "set_id": f"{config}_{t.gender_pair}_{t.domain}_{LENGTH}_set{t.scenario}",
                    "outcome_config": config, "outcome_x": out_x, "outcome_y": out_y, "gender_pair": t.gender_pair,
                    "gender_x": t.genders[0], "gender_y": t.genders[1], "dimension": dimension, **group.persons,
                    "choice_person": ["X"] * len(CAUSES) + ["Y"] * len(CAUSES),
                }  # fmt: skip
                each = {"id": [prefix + i for i in group.ids], "prompt": prompts, **_names_xy(group)}
                _add(batches, k, same, each, shuffled, 2 * len(CAUSES))
                k += n
                yield from batches.tables()
    yield from batches.tables(final=True)


def _observer_key(t: ObserverTemplate, gx: NameGroup, gy: NameGroup) -> Hashable:
    """No scenario in the release's counter key: scenario 0 of each domain uses up every cap."""
    return (t.gender, t.domain, LENGTH, observer_key(t.outcome, t.observer_cause), gx.label, gy.label)


def actor_observer_release_items(release: Release, identities: dict[str, list[Identity]]) -> Iterator[pa.Table]:
    """`actorobserver_mcq.py`'s items: one list per (outcome, dimension), in that order.

    `release.observer` holds each outcome's templates in the file's order (female, then male;
    observer causes y_opt1 ... y_opt4), which is the order the generator walks them. The prompt
    has its own instruction and a blank line before the response cue `< A-D >`.
    """
    labels = _Labels.of(identities)
    orders = _EntryOrders(1)
    batches = ColumnBatches(OBSERVER_RELEASE_FEATURES)
    for outcome in OUTCOMES:
        keys = option_keys(outcome)
        templates = [t for t in release.observer if t.outcome == outcome]
        options = {id(t): _Options(keys, t.options) for t in templates}
        for dimension in DIMENSIONS:
            k = 0
            for group in _two_person_groups(templates, release.groups[dimension], _observer_key, labels):
                t, n = group.template, len(group.pairs)
                shuffled = [options[id(t)](orders(k + m)[0]) for m in range(n)]
                prompts = [
                    f"{OBSERVER_INSTRUCTION}\n\n### Statement:\n{statement}\n\nOptions:\n{o.block}\n\n"
                    "### Response:\n< A-D >"
                    for statement, o in zip(group.statements, shuffled, strict=True)
                ]
                prefix = f"ao-release.{outcome}.{dimension}.{t.gender}.{t.domain}.{t.scenario:02d}.{t.observer_cause}."
                x_label, y_label = group.persons["identity_x_release"], group.persons["identity_y_release"]
                same = {
                    "setting": "actor_observer", "domain": t.domain, "scenario": t.scenario,
                    "outcome": outcome, "gender": t.gender, "dimension": dimension,
                    "observer_cause": t.observer_cause, "y_opt_key": observer_key(outcome, t.observer_cause),
                    **group.persons,
                }  # fmt: skip
                each = {
                    "id": [prefix + i for i in group.ids],
                    "prompt": prompts,
                    "set_id": [f"{t.domain}_{t.gender}_{x_label}_{y_label}_{nx}_{ny}" for _, nx, _, ny in group.pairs],
                    **_names_xy(group),
                }
                _add(batches, k, same, each, shuffled, len(CAUSES))
                k += n
                yield from batches.tables()
    yield from batches.tables(final=True)


# ----------------------------------------------------------------------------- counts


def _available(names_x: tuple[str, ...], names_y: tuple[str, ...]) -> int:
    """Name pairs with X != Y: |names_x x names_y| less the coinciding ones."""
    return len(names_x) * len(names_y) - sum(names_y.count(a) for a in names_x)


def release_counts(release: Release) -> dict[str, int]:
    """Rows of each `*_release` config, from the release's structure (not by generating them).

    Actor-actor keys name one template each, so each takes min(cap, available pairs); an
    actor-observer key spans the S scenarios of its (gender, domain), so it takes
    min(cap, S x available pairs) in all.
    """
    groups = release.groups
    single = sum(len(_names(g, t.gender)) for t in release.single for d in DIMENSIONS for g in groups[d])
    pairs = 0
    for t in release.pairs:
        g_x, g_y = t.genders
        pairs += sum(
            min(PAIR_LIMIT, _available(_names(gx, g_x), _names(gy, g_y)))
            for d in DIMENSIONS
            for gx in groups[d]
            for gy in groups[d]
        )
    scenarios = Counter((t.outcome, t.gender, t.domain, t.observer_cause) for t in release.observer)
    observer = sum(
        min(PAIR_LIMIT, s * _available(_names(gx, gender), _names(gy, gender)))
        for (_, gender, _, _), s in scenarios.items()
        for d in DIMENSIONS
        for gx in groups[d]
        for gy in groups[d]
    )
    return {"single_actor_release": single, "actor_actor_release": pairs, "actor_observer_release": observer}


#: config name -> (items, features, description)
RELEASE_CONFIGS = {
    "single_actor_release": (
        single_actor_release_items,
        SINGLE_RELEASE_FEATURES,
        "The release's own single-actor items (first 5 names, its option shuffle, texts as released).",
    ),
    "actor_actor_release": (
        actor_actor_release_items,
        PAIR_RELEASE_FEATURES,
        "The release's own joint actor-actor items: eight options A-H, X's then Y's (texts as released).",
    ),
    "actor_observer_release": (
        actor_observer_release_items,
        OBSERVER_RELEASE_FEATURES,
        "The release's own actor-observer items (scenario 0 of each domain, texts as released).",
    ),
}
