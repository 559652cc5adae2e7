"""What vLLM computes for a list of requests under its backend's query plan: how plans and quotes price it.

The counting rules shared by every backend (`TokenCounts`, the continuation trie's nodes) are
`runners.scoring.token_accounting`'s; what is vLLM's own (whole cache blocks, one prompt per
trie level, candidates in groups) is here, beside the backend whose query plan it follows.
"""

from __future__ import annotations

from collections.abc import Sequence

from runners.exchange import ScoreRequest
from runners.scoring.token_accounting import (
    DEFAULT_ITEMS_PER_CALL,
    DEFAULT_VLLM_BLOCK_SIZE,
    SampledCall,
    TokenCounts,
    continuation_nodes,
    token_counts_of,
)


def vllm_token_counts(
    requests: Sequence[ScoreRequest],
    *,
    block_size: int = DEFAULT_VLLM_BLOCK_SIZE,
    prefix_caching: bool = True,
    items_per_call: int | None = DEFAULT_ITEMS_PER_CALL,
    max_candidates_per_request: int = 128,
) -> TokenCounts:
    """An estimate of the positions vLLM computes for `requests` under `runners.backends.vllm.backend`'s plan.

    It follows the backend: per call, `runners.backends.prompt_logprobs.queries.plan_queries`' distinct
    prompts (one per continuation, one per trie level prefix with candidates), the distinct contexts first
    when prefix caching is on, then the rest. A prompt reuses the whole blocks of
    `block_size` tokens that an earlier wave already computed (blocks are assumed to stay
    cached: an estimate when the cache is smaller than the run), and always computes at
    least its last token; prompts of the same wave do not reuse each other's blocks. A
    prompt with more than `max_candidates_per_request` candidates is sent once per group.
    Context positions are those of the first wave; everything else counts as continuation
    positions.
    """
    from runners.backends.prompt_logprobs.queries import plan_queries

    step = items_per_call if items_per_call else len(requests)
    seen: set[tuple[int, ...]] = set()

    def cost(ids: tuple[int, ...], cached: set[tuple[int, ...]]) -> int:
        hit = 0
        if prefix_caching:
            k = block_size
            while k <= len(ids) and ids[:k] in cached:
                hit = k
                k += block_size
        return max(1, len(ids) - hit)

    def blocks(ids: tuple[int, ...]) -> list[tuple[int, ...]]:
        return [ids[:k] for k in range(block_size, len(ids) + 1, block_size)]

    def jobs(q) -> int:
        return max(1, -(-len(q.candidates) // max_candidates_per_request))

    computed_context = 0
    continuation = 0
    per_request = [0] * len(requests)
    for start in range(0, len(requests), max(step, 1)):
        call = requests[start : start + step]
        queries = plan_queries(call)
        contexts = {r.context for r in call}
        if prefix_caching:
            first = [q for q in queries if q.ids in contexts]
            warm = sorted(contexts - {q.ids for q in first})
            wave1 = sum(cost(q.ids, seen) * jobs(q) for q in first) + sum(cost(ids, seen) for ids in warm)
            for ids in [*(q.ids for q in first), *warm]:
                seen.update(blocks(ids))
            rest = [q for q in queries if q.ids not in contexts]
            wave2 = sum(cost(q.ids, seen) * jobs(q) for q in rest)
            for q in rest:
                seen.update(blocks(q.ids))
        else:
            wave1 = 0
            wave2 = sum(len(q.ids) * jobs(q) for q in queries)
        computed_context += wave1
        continuation += wave2
        # per request: an even share of the call's positions (vLLM does not say which request paid)
        share, extra = divmod(wave1 + wave2, max(len(call), 1))
        for k in range(len(call)):
            per_request[start + k] = share + (1 if k < extra else 0)
    return token_counts_of(requests, computed_context, continuation, per_request)


def vllm_bounded_trie_positions(
    request: ScoreRequest, positions: float, *, block_size: int = DEFAULT_VLLM_BLOCK_SIZE, max_candidates: int = 128
) -> float:
    """The positions vLLM computes for a bounded number item's expanded nodes, its context's blocks cached.

    The vLLM backend expands a bounded trie (`runners.backends.prompt_logprobs.bounded`) with one prompt per
    expanded node: the context and the node's path, whose next-token candidates (the digits)
    are read in groups of `max_candidates`. Each prompt recomputes the context's last partial
    block and the path (whole blocks come from the cache); `positions` such prompts, at the
    trie's mean node depth. The root's candidates are read from the context's own prompt,
    which the context positions already count.
    """
    nodes = continuation_nodes(request.continuations, True)
    depth = sum(len(node) for node in nodes) / len(nodes)
    groups = max(1, -(-len(request.candidates) // max_candidates))
    return min(positions, len(nodes)) * (len(request.context) % block_size + depth) * groups


def vllm_call_counts(call: SampledCall) -> tuple[TokenCounts, float]:
    """One sampled call priced for the vLLM backend (`token_accounting.hf_call_counts` prices it for hf).

    Every level prompt recomputes its context's last partial block, so a trie's cost depends on
    its own context's length: each number item is counted with its own context and the trie of
    the nearest picked item before it (scaling the picked items' costs aliased with the rows'
    identity cycle: +29% on religion_P0S0T0).
    """
    counts = vllm_token_counts(call.requests, block_size=call.block_size, items_per_call=None)
    tries, full, picked = 0.0, call.full, call.picked
    for k in call.numbers:
        near = full[k] if k in full else full[max((p for p in picked if p <= k), default=picked[0])]
        own = ScoreRequest(call.requests[k].context, near.continuations, near.candidates)
        if call.trie_positions is not None:
            tries += vllm_bounded_trie_positions(own, call.trie_positions, block_size=call.block_size)
        else:
            tries += vllm_token_counts([own], block_size=call.block_size, items_per_call=None).continuation_positions
    return counts, tries
