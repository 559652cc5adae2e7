"""Bounded number distributions (`--number-tolerance`, `runners.scoring.number_bound`, `runners.backends.hf.bounded`).

The bound is checked against the exact run of the same backend and model: every item's L1
distance between the bounded and the exact `number_probs` is at most its `number_bound`, which
is at most the tolerance, on the four real tokenizer families. The pure parts are checked
against brute force: the oracle's knapsack against every ancestor-closed node set of small
random tries, the expansion against a table of known log-probabilities.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from promptgen.core.errors import ProbeError
from runners.exchange import NumberBound, ScoreRequest
from runners.scoring.distributions import refused_by_mass
from runners.scoring.number_bound import FLOAT_FLOOR, TrieExpansion, TrieShape, certified_bound, oracle_positions
from runners.scoring.settings import ScoringSettings, scoring_settings
from runners_fixtures import vocab_model, vocab_tokenizer

FAMILIES = ("llama-bpe", "llama-spm", "qwen2", "gpt-2")
#: float32 passes over a different batch shape differ by ~1e-7 in a probability
ROUND_OFF = 1e-6


def _random_trie(rng: np.random.Generator, n_leaves: int) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]]]:
    """Leaves of a random token trie over ids 1..6 (depth <= 3) and a random set of its nodes as number ends."""
    paths = {tuple(rng.integers(1, 7, size=rng.integers(1, 4)).tolist()) for _ in range(n_leaves)}
    nodes = sorted({p[:k] for p in paths for k in range(1, len(p) + 1)})
    leaves = [p for p in nodes if not any(q != p and q[: len(p)] == p for q in nodes)]
    ends = [p for p in nodes if p in leaves or rng.random() < 0.5]
    return leaves, ends


def _model_table(rng: np.random.Generator, shape: TrieShape, candidates: tuple[int, ...]) -> dict:
    """A fake model: for the context and every node, log-probabilities of ids 1..9 (normalised with room to leak).

    Ids 1..6 are the "digits" (the trie's tokens and the candidates), 7..9 end a number.
    """
    table = {}
    for key in [(), *shape.nodes]:
        p = rng.dirichlet(np.full(10, 0.3))[:9]  # the tenth share leaks to tokens outside the trie
        table[key] = dict(zip(range(1, 10), np.log(p).tolist(), strict=True))
    return table


def _exact_step_and_end(shape: TrieShape, table: dict, candidates: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    step = np.array([table[node[:-1]][node[-1]] for node in shape.nodes])
    p_end = np.array([max(0.0, 1 - sum(np.exp(table[node][c]) for c in candidates)) for node in shape.nodes])
    return step, p_end


def _brute_oracle(shape: TrieShape, step: np.ndarray, p_end: np.ndarray, eps: float) -> int:
    """The fewest expansions meeting the bound, by trying every node set whose parents are all expanded."""
    n = len(shape.nodes)
    logp = np.zeros(n)
    for k in range(n):
        logp[k] = step[k] + (logp[shape.parent[k]] if shape.parent[k] >= 0 else 0.0)
    for size in range(n + 1):
        for chosen in itertools.combinations(range(n), size):
            s = set(chosen)
            if any(shape.parent[k] >= 0 and shape.parent[k] not in s for k in s):
                continue
            resolved = sum(np.exp(logp[k]) * p_end[k] for k in s if shape.is_end[k])
            exposed = [k for k in range(n) if k not in s and (shape.parent[k] < 0 or shape.parent[k] in s)]
            frontier = sum(np.exp(logp[k]) for k in exposed)
            if certified_bound(resolved, frontier) <= eps + 1e-12:
                return size
    raise AssertionError("expanding every node always meets the bound")


@pytest.mark.parametrize("seed", range(6))
def test_oracle_knapsack_equals_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    leaves, ends = _random_trie(rng, 6)
    shape = TrieShape(leaves, ends)
    if len(shape.nodes) > 13:
        pytest.skip("too many nodes to enumerate")  # never for these seeds: asserted below
    candidates = (1, 2, 3, 4, 5, 6)
    step, p_end = _exact_step_and_end(shape, _model_table(rng, shape, candidates), candidates)
    for eps in (0.02, 0.1, 0.3):
        assert oracle_positions(shape, step, p_end, eps) == _brute_oracle(shape, step, p_end, eps)


def test_random_tries_are_small_enough_to_enumerate() -> None:
    sizes = [len(TrieShape(*_random_trie(np.random.default_rng(s), 6)).nodes) for s in range(6)]
    assert max(sizes) <= 13 and min(sizes) >= 4


@pytest.mark.parametrize("seed", range(20))
def test_expansion_bound_holds_against_the_exact_distribution(seed: int) -> None:
    """Driven by a fake model, the expansion's result is within its bound of the exact one, and stops at the bound."""
    from runners.scoring.distributions import NumberTrie
    from runners.scoring.number_bound import bounded_number_distribution

    rng = np.random.default_rng(100 + seed)
    leaves, ends = _random_trie(rng, 12)
    shape = TrieShape(leaves, ends)
    candidates = (1, 2, 3, 4, 5, 6)
    table = _model_table(rng, shape, candidates)
    values = list(range(len(ends)))
    leaf_of = [next(j for j, leaf in enumerate(leaves) if leaf[: len(e)] == e) for e in ends]
    trie = NumberTrie(tuple(values), tuple(ends), tuple(leaves), tuple(leaf_of), 0, len(ends) - 1)
    step, p_end = _exact_step_and_end(shape, table, candidates)
    logp = np.zeros(len(shape.nodes))
    for k in range(len(shape.nodes)):
        logp[k] = step[k] + (logp[shape.parent[k]] if shape.parent[k] >= 0 else 0.0)
    exact = np.array([np.exp(logp[shape.index[e]]) * p_end[shape.index[e]] for e in ends])
    exact_probs = exact / exact.sum()
    for eps in (0.0, 1e-3, 0.05, 0.3):
        if not eps:
            continue
        request = ScoreRequest((9,), tuple(leaves), candidates, NumberBound(eps, tuple(ends)))
        exp = TrieExpansion(request)
        exp.root(table[()])
        passes = 0
        while nodes := exp.pending():
            passes += 1
            for k in nodes:
                exp.record(k, table[shape.nodes[k]])
        dist, bound, positions = bounded_number_distribution(trie, exp.result())
        stated = max(exp.bound(), FLOAT_FLOOR) if exp.bound() > 0 else 0.0  # never under the float error
        assert bound == pytest.approx(stated) and bound <= eps
        assert positions == exp.positions <= len(shape.nodes)
        assert np.abs(dist.probs - exact_probs).sum() <= bound + 1e-12
        # the exact number mass lies in the row's interval [M, 2M / (2 - bound)], so the refusal rule
        # (`refused_by_mass`) refuses a bounded row only where the exact one is refused too
        mass = float(exact.sum())
        assert dist.valid_mass <= mass + 1e-12 and mass <= 2 * dist.valid_mass / (2 - bound) + 1e-12
        for threshold in (mass * 0.999, mass * 1.001, dist.valid_mass * 1.0001):
            if refused_by_mass(dist.valid_mass, threshold, bound):
                assert mass < threshold
        assert positions >= oracle_positions(shape, step, p_end, eps)
        assert passes <= 2 * max(len(n) for n in shape.nodes)


def test_tolerance_key_and_flag_errors() -> None:
    exact = ScoringSettings()
    assert "number_tolerance" not in exact.key()  # keys of exact runs made before the flag stay valid
    assert ScoringSettings(number_tolerance=0.0).key() == exact.key()
    keys = {ScoringSettings(number_tolerance=t).key() for t in (0.0, 1e-3, 1e-2)}
    assert len(keys) == 3
    for bad in (-1e-3, 1.0, 2.0, float("nan"), 1e-12, 9e-7):
        with pytest.raises(ProbeError, match="--number-tolerance must be at least 0"):
            scoring_settings(number_tolerance=bad)
    # a bound under the float error of the log-probabilities cannot be certified: the smallest is FLOAT_FLOOR
    assert scoring_settings(number_tolerance=FLOAT_FLOOR).number_tolerance == FLOAT_FLOOR
    with pytest.raises(ProbeError, match="not for --scoring generate"):
        scoring_settings("generate", number_tolerance=1e-3)
    with pytest.raises(ProbeError, match="--number-mode first-token reads no trie"):
        scoring_settings(number_mode="first-token", number_tolerance=1e-3)
    with pytest.raises(ValueError, match="exact number mode only"):
        ScoringSettings(number_mode="first-token", number_tolerance=1e-3)


def _items(n: int, hi: int = 100) -> list[dict[str, Any]]:
    return [
        {
            "id": f"n{k}",
            "task": "number",
            "prompt": f"Story {k}: a neighbour lost their job.\nHow sad are you, from 0 to {hi}?\nAnswer:",
            "messages": None,
            "number_min": 0,
            "number_max": hi,
        }
        for k in range(n)
    ]


@pytest.mark.parametrize("family", FAMILIES)
def test_bounded_rows_are_within_their_bound_of_exact(family: str) -> None:
    """hf, four real tokenizers: L1(bounded, exact) <= number_bound <= ε per item; fewer positions at larger ε."""
    from runners.backends.hf.backend import HFBackend
    from runners.rows import run_items

    backend = HFBackend(vocab_model(family), model_id=family, max_batch_tokens=512)
    items = _items(4)
    exact = run_items(items, backend, vocab_tokenizer(family), chat=False)
    assert {r["number_bound"] for r in exact} == {0.0}
    full = exact[0]["trie_positions"]
    assert full == (202 if family == "gpt-2" else 203)
    seen = []
    for eps in (1e-3, 0.05, 0.5):
        rows = run_items(
            items, backend, vocab_tokenizer(family), chat=False, settings=ScoringSettings(number_tolerance=eps)
        )
        for want, got in zip(exact, rows, strict=True):
            distance = np.abs(np.asarray(got["number_probs"]) - np.asarray(want["number_probs"])).sum()
            assert distance <= got["number_bound"] + ROUND_OFF, (eps, got["id"])
            assert got["number_bound"] <= eps
            assert got["valid_mass"] <= want["valid_mass"] * (1 + ROUND_OFF)
            assert 0 < got["trie_positions"] <= full
            assert f'"number_tolerance":{eps}' in got["scoring"]
        seen.append(np.mean([r["trie_positions"] for r in rows]))
    assert seen[0] >= seen[1] >= seen[2] and seen[2] < full  # a looser bound computes fewer positions


def test_bounded_with_a_tiny_tolerance_equals_exact_on_smollm2(smollm2_model: Any, smollm2_tokenizer: Any) -> None:
    """Level-by-level passes over pooled keys and values give the one packed row's numbers (a second computation)."""
    from runners.backends.hf.backend import HFBackend
    from runners.rows import run_items

    backend = HFBackend(smollm2_model, model_id="smollm2", max_batch_tokens=1024)
    items = _items(3)
    exact = run_items(items, backend, smollm2_tokenizer, chat=False)
    tiny = run_items(items, backend, smollm2_tokenizer, chat=False, settings=ScoringSettings(number_tolerance=1e-6))
    for want, got in zip(exact, tiny, strict=True):
        # within the bound (the smallest one: FLOAT_FLOOR) plus the float error it stands for
        np.testing.assert_allclose(got["number_probs"], want["number_probs"], rtol=0, atol=ROUND_OFF + 1e-6)
        assert 0 <= got["number_bound"] <= 1e-6
        assert got["valid_mass"] == pytest.approx(want["valid_mass"], rel=1e-5)


@pytest.mark.slow
def test_bounded_costs_at_most_about_exact_on_a_random_tiny_model() -> None:
    """Issue "Feed the GPU": bounded mode at 1e-3 takes at most 1.1x exact's wall time (best of 3) on a random
    tiny model, and its rows stay within their bound of the exact rows. (Measured here: about 0.1x, since a
    random model's numbers end after their first digit; the margin keeps this from depending on the machine.)"""
    import time

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from runners.backends.hf.backend import HFBackend
    from runners.rows import run_items
    from runners_fixtures import tiny_llama_folder

    folder = tiny_llama_folder("float32")
    backend = HFBackend(AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval(), max_batch_tokens=8192)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    items = _items(24)

    def best_of_3(settings: ScoringSettings) -> tuple[float, list[dict[str, Any]]]:
        times, rows = [], []
        for _ in range(3):
            start = time.perf_counter()
            rows = run_items(items, backend, tokenizer, chat=False, settings=settings, batch_items=24)
            times.append(time.perf_counter() - start)
        return min(times), rows

    exact_s, exact = best_of_3(ScoringSettings())
    bounded_s, bounded = best_of_3(ScoringSettings(number_tolerance=1e-3))
    assert bounded_s <= 1.1 * exact_s, (bounded_s, exact_s)
    for want, got in zip(exact, bounded, strict=True):
        assert got["number_bound"] <= 1e-3
        l1 = np.abs(np.array(got["number_probs"]) - np.array(want["number_probs"])).sum()
        assert l1 <= got["number_bound"] + ROUND_OFF, (got["id"], l1, got["number_bound"])
