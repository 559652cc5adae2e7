"""Deterministic, library-independent randomness.

Published datasets must be rebuildable years later, so sampling never goes through a
pseudo-random generator whose stream may change between numpy releases. Every draw is
a sha256 of `(seed, key, candidate)`: sort candidates by that hash and take the first k.
The key names what is drawn (e.g. `names/race/a hispanic/female`), so adding a new draw
never shifts an existing one.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")

#: the 24 orders of four options, in lexicographic order; `option_seed % 24` picks one.
PERMUTATIONS_4: tuple[tuple[int, ...], ...] = tuple(itertools.permutations(range(4)))


def hash_int(seed: int, key: str) -> int:
    """A 64-bit integer determined by `(seed, key)` alone."""
    digest = hashlib.sha256(f"{seed}\x1f{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def hash_sample(seed: int, key: str, candidates: Sequence[T], k: int) -> list[T]:
    """The k candidates with the smallest `hash_int(seed, key/candidate)`, in that order.

    Candidates are identified by their position and string form so equal strings at
    different positions stay distinct.
    """
    if k > len(candidates):
        raise ValueError(f"cannot draw {k} from {len(candidates)} candidates for {key!r}")
    ranked = sorted(range(len(candidates)), key=lambda i: hash_int(seed, f"{key}\x1f{i}\x1f{candidates[i]}"))
    return [candidates[i] for i in ranked[:k]]


def hash_choice(seed: int, key: str, candidates: Sequence[T]) -> T:
    """One candidate drawn uniformly by hashing (see `hash_sample`)."""
    if not candidates:
        raise ValueError(f"nothing to choose from for {key!r}")
    return candidates[hash_int(seed, key) % len(candidates)]


def stratified_sample(seed: int, key: str, groups: Mapping[str, Sequence[T]], k: int) -> list[tuple[str, T]]:
    """k (group, member) draws spread evenly over groups: one per group in a hashed group
    order, then a second per group, and so on (members ranked by hash within each group).

    Returned in the groups' given order and, within a group, in the members' given order,
    so a subset keeps the source's order. Used for scenarios per domain and events per emotion.
    """
    total = sum(len(v) for v in groups.values())
    if k > total:
        raise ValueError(f"cannot draw {k} from {total} candidates for {key!r}")
    order = hash_sample(seed, f"{key}/groups", list(groups), len(groups))
    queues = {g: hash_sample(seed, f"{key}/{g}", list(range(len(groups[g]))), len(groups[g])) for g in order}
    picked: list[tuple[str, int]] = []
    depth = 0
    while len(picked) < k:
        for g in order:
            if depth < len(queues[g]) and len(picked) < k:
                picked.append((g, queues[g][depth]))
        depth += 1
    position = {g: i for i, g in enumerate(groups)}
    picked.sort(key=lambda gi: (position[gi[0]], gi[1]))
    return [(g, groups[g][i]) for g, i in picked]


def nth_permutation(index: int, n: int) -> tuple[int, ...]:
    """The `index`-th permutation of `range(n)` in lexicographic order (itertools' order),
    computed from its factorial-base digits so n = 8 needs no table of 40,320 entries."""
    index %= math.factorial(n)
    pool = list(range(n))
    out = []
    for position in range(n, 0, -1):
        digit, index = divmod(index, math.factorial(position - 1))
        out.append(pool.pop(digit))
    return tuple(out)


def option_permutation(option_seed: int, n: int = 4) -> tuple[int, ...]:
    """The presented order of n canonical options for a row's stored `option_seed`:
    permutation number `option_seed % n!` in lexicographic order."""
    return nth_permutation(option_seed, n)
