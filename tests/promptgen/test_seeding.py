import itertools
from collections import Counter

import pytest

from promptgen.seeding import PERMUTATIONS_4, hash_choice, hash_int, hash_sample, nth_permutation, option_permutation


def test_hash_int_depends_on_seed_and_key_only():
    assert hash_int(1, "a") == hash_int(1, "a")
    assert hash_int(1, "a") != hash_int(2, "a")
    assert hash_int(1, "a") != hash_int(1, "b")
    assert 0 <= hash_int(7, "x") < 2**64


def test_hash_sample_is_a_stable_subset_without_repeats():
    names = [f"n{i}" for i in range(20)]
    a = hash_sample(3, "names/x", names, 5)
    assert a == hash_sample(3, "names/x", names, 5)
    assert len(set(a)) == 5 and set(a) <= set(names)
    # a larger draw extends the smaller one: prefix property of rank-by-hash
    assert hash_sample(3, "names/x", names, 8)[:5] == a
    assert hash_sample(4, "names/x", names, 5) != a
    with pytest.raises(ValueError):
        hash_sample(3, "k", names, 21)


def test_hash_choice_is_roughly_uniform():
    counts = Counter(hash_choice(0, f"k{i}", "abcd") for i in range(8000))
    assert set(counts) == set("abcd")
    assert all(1800 < c < 2200 for c in counts.values()), counts


def test_option_permutation_covers_all_24_orders_evenly():
    assert len(set(PERMUTATIONS_4)) == 24
    counts = Counter(option_permutation(hash_int(0, f"i{i}") >> 1) for i in range(24000))
    assert len(counts) == 24
    assert all(850 < c < 1150 for c in counts.values())
    assert option_permutation(0) == (0, 1, 2, 3) and option_permutation(23) == (3, 2, 1, 0)


def test_nth_permutation_is_itertools_order():
    for n in (1, 3, 4, 5):
        assert [nth_permutation(i, n) for i in range(len(list(itertools.permutations(range(n)))))] == list(
            itertools.permutations(range(n))
        )
    assert nth_permutation(40319, 8) == (7, 6, 5, 4, 3, 2, 1, 0)
    assert option_permutation(7, 4) == PERMUTATIONS_4[7]
