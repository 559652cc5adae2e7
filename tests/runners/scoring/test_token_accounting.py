"""runners.scoring.token_accounting and hf.accounting against brute-force counts (prefix sets), no model needed."""

from __future__ import annotations

import random

import pytest

from runners.backends.hf import accounting as hfa
from runners.backends.vllm import accounting as vllm_accounting
from runners.exchange import ScoreRequest
from runners.scoring import token_accounting as ta


def _random_contexts(seed: int, n: int = 40) -> list[tuple[int, ...]]:
    """Contexts that share prefixes at several levels (a persona, an instruction, a narrative), like empathy prompts."""
    rng = random.Random(seed)
    heads = [tuple(rng.randrange(50) for _ in range(rng.randint(5, 20))) for _ in range(3)]
    mids = [tuple(rng.randrange(50) for _ in range(rng.randint(1, 12))) for _ in range(4)]
    out = []
    for _ in range(n):
        tail = tuple(rng.randrange(50) for _ in range(rng.randint(1, 6)))
        out.append(rng.choice(heads) + rng.choice(mids) + tail)
    out.append(out[0])  # a duplicate
    out.append(out[1][: max(1, len(out[1]) - 2)])  # a context that is a prefix of another
    return out


def _distinct_prefixes(contexts) -> int:
    return len({tuple(c[:k]) for c in contexts for k in range(1, len(c) + 1)})


def _paths(nodes: list[hfa.RadixNode]) -> list[tuple[int, ...]]:
    paths: list[tuple[int, ...]] = []
    for node in nodes:
        above = paths[node.parent] if node.parent >= 0 else ()
        assert node.start == len(above)
        paths.append(above + node.tokens)
    return paths


@pytest.mark.parametrize("seed", range(5))
def test_prefix_trie_minimum_counts_distinct_prefixes(seed: int) -> None:
    contexts = _random_contexts(seed)
    assert ta.prefix_trie_minimum(contexts) == _distinct_prefixes(contexts)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("min_shared", [0, 1, 4, 8])
def test_radix_tree_spells_every_context_and_computes_each_prefix_once(seed: int, min_shared: int) -> None:
    contexts = _random_contexts(seed)
    nodes = hfa.context_radix(contexts, min_shared)
    paths = _paths(nodes)
    for i, ctx in enumerate(contexts):
        (node,) = [k for k, n in enumerate(nodes) if i in n.ends]
        assert paths[node] == ctx
    for node in nodes:
        assert node.level == (nodes[node.parent].level + 1 if node.parent >= 0 else 0)
    computed = sum(len(n.tokens) for n in nodes)
    if min_shared == 0:
        assert computed == sum(len(c) for c in dict.fromkeys(contexts))  # one edge per distinct context
    elif min_shared == 1:
        assert computed == _distinct_prefixes(contexts)  # every distinct prefix exactly once
    else:
        assert computed >= _distinct_prefixes(contexts)
        # a merged segment is short and unended: every kept shared node is long or ends a context
        for k, n in enumerate(nodes):
            if any(m.parent == k for m in nodes) and not n.ends:
                assert len(n.tokens) >= min_shared
    attribution = hfa.radix_attribution(nodes, len(contexts))
    assert sum(attribution) == computed
    assert all(a >= 0 for a in attribution)


def test_continuation_nodes_are_the_distinct_prefixes_parents_first() -> None:
    conts = [(1, 2, 3), (1, 2), (1, 4), (5,)]
    with_c = ta.continuation_nodes(conts, True)
    assert set(with_c) == {(1,), (1, 2), (1, 2, 3), (1, 4), (5,)}
    assert all(n[:-1] in with_c[:k] for k, n in enumerate(with_c) if len(n) > 1)
    # without candidates the full continuations are fed only where they are inner nodes
    assert set(ta.continuation_nodes(conts, False)) == {(1,), (1, 2)}


def test_hf_counts_per_call_match_brute_force() -> None:
    contexts = _random_contexts(7, 60)
    conts = ((1, 2), (1, 3), (4,))
    requests = [ScoreRequest(c, conts, (9,)) for c in contexts]
    counts = hfa.hf_token_counts(requests, max_batch_tokens=10**9, items_per_call=16, min_shared_prefix=1)
    expected = sum(_distinct_prefixes(contexts[s : s + 16]) for s in range(0, len(contexts), 16))
    assert counts.computed_context_tokens == expected
    assert counts.continuation_positions == 4 * len(requests)  # (1,), (1,2), (1,3), (4,)
    assert counts.prefix_trie_minimum == _distinct_prefixes(contexts)
    assert counts.context_tokens == sum(map(len, contexts))
    assert sum(counts.per_request) == counts.computed_tokens
    assert counts.shared_prefix_saved == counts.context_tokens - expected


def test_hf_batches_sort_by_tokens_and_respect_the_budget() -> None:
    contexts = _random_contexts(3, 50)
    batches = hfa.hf_batches(contexts, 200)
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(contexts)))
    assert [contexts[i] for i in flat] == sorted(contexts)
    for b in batches:
        assert len(b) == 1 or len(b) * max(len(contexts[i]) for i in b) <= 200


def test_vllm_counts_reuse_whole_blocks_only() -> None:
    shared = tuple(range(100, 132))  # two blocks of 16
    requests = [ScoreRequest((*shared, k, k + 1, k + 2), ((7,), (8, 9)), ()) for k in range(3)]
    counts = vllm_accounting.vllm_token_counts(requests, block_size=16, items_per_call=None)
    # wave 1: three distinct contexts in one step, none cached yet: all 35 tokens each
    assert counts.computed_context_tokens == 3 * 35
    # wave 2: each continuation prompt reuses the two shared blocks only (its context ends mid-block)
    assert counts.continuation_positions == 3 * ((36 - 32) + (37 - 32))
    off = vllm_accounting.vllm_token_counts(requests, block_size=16, prefix_caching=False, items_per_call=None)
    assert off.computed_context_tokens == 0 and off.continuation_positions == 3 * (36 + 37)


def test_radix_sharing_on_religion_comes_within_1_3_of_the_trie_minimum(
    smollm2_tokenizer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The must-show figure of issue 19 on the fixture corpus: computed context tokens per prompt vs the minimum.

    Items are sent as the run loop sends them (the CPU's items per call, in dataset order), with
    the hf backend's default budget; every prompt's context is encoded as `run_items` encodes it.
    """
    import pyarrow.parquet as pq

    from envent_fixture import write_recipe, write_sources
    from promptgen.build import build
    from runners.rows import cached_digit_start_ids, prepare_request
    from runners.scoring.settings import ScoringSettings

    root = tmp_path_factory.mktemp("envent-accounting")
    path = build(
        str(write_recipe(root / "r.yaml")), out_dir=root / "out", sources=write_sources(root / "src"), max_events=24
    ).path
    files = sorted(path.glob("data/religion_P0S0T0/*.parquet"))
    items = [row for f in files for row in pq.read_table(f).to_pylist()]
    assert len(items) > 64 and all(item["task"] == "number" for item in items)
    digits = cached_digit_start_ids(smollm2_tokenizer)
    requests = [prepare_request(i, smollm2_tokenizer, False, ScoringSettings(), digits) for i in items]
    counts = hfa.hf_token_counts(requests)
    assert counts.prefix_trie_minimum == _distinct_prefixes([r.context for r in requests])
    ratio = counts.computed_context_tokens / counts.prefix_trie_minimum
    assert ratio <= 1.3, counts.as_dict()
    # and far below running every context in full
    assert counts.computed_context_tokens < 0.7 * counts.context_tokens
