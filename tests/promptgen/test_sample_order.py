"""The seeded, nested, stratified order of sample units (promptgen.sample_order), against its definition."""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from fractions import Fraction

import pytest

from promptgen.sample_order import sample_order


def strata_of(sizes: dict[str, int]) -> dict[str, str]:
    return {f"{s}-{i}": s for s, n in sizes.items() for i in range(n)}


def sha_rank(seed: int, probe: str, unit: str) -> int:
    """The unit's hash as the module's docstring defines it, computed here with hashlib alone."""
    return int.from_bytes(hashlib.sha256(f"{seed}\x1fsample/{probe}\x1funit\x1f{unit}".encode()).digest()[:8], "big")


CASES = [
    {"": 17},
    {"a": 1, "b": 1},
    {"anger": 500, "joy": 480, "fear": 13, "pride": 1},
    {"x": 7, "y": 3, "z": 2, "w": 11, "v": 5},
    {f"e{i}": 40 + 7 * i for i in range(12)},  # the empathy corpus: 12 emotions of unequal sizes
]


@pytest.mark.parametrize("sizes", CASES)
def test_every_prefix_keeps_each_stratum_within_one_unit_of_its_share(sizes: dict[str, int]) -> None:
    units = strata_of(sizes)
    order = sample_order(units, seed=0, probe="p")
    assert sorted(order) == sorted(units)  # every unit once
    total = len(units)
    taken: Counter[str] = Counter()
    for k, unit in enumerate(order, start=1):
        taken[units[unit]] += 1
        for stratum, n in sizes.items():
            assert abs(taken[stratum] - Fraction(k * n, total)) < 1, (k, stratum)


@pytest.mark.parametrize("sizes", CASES)
def test_within_a_stratum_units_follow_their_hash(sizes: dict[str, int]) -> None:
    units = strata_of(sizes)
    order = sample_order(units, seed=3, probe="intergroup-empathy")
    for stratum in sizes:
        mine = [u for u in order if units[u] == stratum]
        assert mine == sorted(mine, key=lambda u: sha_rank(3, "intergroup-empathy", u))


def test_nested_and_shared_across_configs() -> None:
    units = strata_of({"a": 30, "b": 20, "c": 9})
    order = sample_order(units, seed=0, probe="p")
    # a config that lists the same units in another order (another cell of the matrix) gets the same order
    shuffled = dict(sorted(units.items(), key=lambda kv: hashlib.md5(kv[0].encode()).hexdigest()))
    assert sample_order(shuffled, seed=0, probe="p") == order
    # nested: the sample of n is the first n, so each smaller sample is a subset of every larger one
    for small, large in itertools.combinations([1, 5, 20, 40, 59], 2):
        assert set(order[:small]) <= set(order[:large])


def test_seed_and_probe_change_the_order() -> None:
    units = strata_of({"a": 30, "b": 20})
    base = sample_order(units, seed=0, probe="p")
    assert sample_order(units, seed=1, probe="p") != base
    assert sample_order(units, seed=0, probe="q") != base
    # and the same seed is the same order, call after call
    assert sample_order(dict(units), seed=0, probe="p") == base
