"""The one seeded, nested, stratified order of a probe's sample units (DESIGN 9).

A sample of size n is the first n units of this order, so a larger sample holds a smaller one and a
model scored at 300 events, then at 1,200, scores only the 900 new ones. A unit's place depends on
`(seed, probe, unit value)` alone, through `promptgen.seeding.hash_int` (sha256, no library's random
stream), and on the strata's sizes: every config of a probe that holds the same units (every cell,
category and setting of the empathy matrices) gets the same order, for every model.

Strata are interleaved so every prefix keeps their population shares as closely as integers allow:
within a stratum the units are in hashed order, and the next unit comes from the stratum furthest below
its share of the next prefix (ties by the stratum's own hash). This greedy rule keeps every stratum's
count within one unit of its exact share at every prefix (tests/promptgen/test_sample_order.py checks
it against the definition, prefix by prefix).
"""

from __future__ import annotations

from collections.abc import Mapping

from .seeding import hash_int


def unit_rank_key(seed: int, probe: str, unit: str) -> tuple[int, str]:
    """Where `unit` stands within its stratum: its hash, then its value (a tie of 64-bit hashes stays ordered)."""
    return hash_int(seed, f"sample/{probe}\x1funit\x1f{unit}"), unit


def sample_order(units: Mapping[str, str], *, seed: int, probe: str) -> list[str]:
    """Every unit of `units` (unit value -> its stratum's value; "" for every unit: no strata), in sample order.

    Pure: the same `units`, `seed` and `probe` give the same list. The first n of it is the sample of n.
    """
    strata: dict[str, list[str]] = {}
    for unit, stratum in units.items():
        strata.setdefault(stratum, []).append(unit)
    queues = {s: sorted(members, key=lambda u: unit_rank_key(seed, probe, u)) for s, members in strata.items()}
    tie = {s: hash_int(seed, f"sample/{probe}\x1fstratum\x1f{s}") for s in queues}
    total = len(units)
    taken = dict.fromkeys(queues, 0)
    order: list[str] = []
    for k in range(1, total + 1):
        # deficit at prefix k, scaled by `total` to stay in integers: k * share - taken
        best = max(
            (s for s in queues if taken[s] < len(queues[s])),
            key=lambda s: (k * len(queues[s]) - taken[s] * total, -tie[s], s),
        )
        order.append(queues[best][taken[best]])
        taken[best] += 1
    return order
