"""What vLLM computes for a list of requests under its backend's query plan: how plans and quotes price it.

The counting rules shared by every backend (`TokenCounts`, the continuation trie's nodes) are
`runners.scoring.token_accounting`'s; what is vLLM's own (whole cache blocks, one prompt per
trie level, candidates in groups) is here, beside the backend whose query plan it follows; so is how
its engine decodes a call of generation requests (`vllm_generate_counts`: continuous batching).
"""

from __future__ import annotations

from collections.abc import Sequence

from runners.exchange import ScoreRequest
from runners.model.device import GPU_MEMORY_UTILIZATION
from runners.scoring.generate_accounting import DecodeGroup, DecodeMachine, GenerateCall, GenerateCounts
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
    """One sampled call priced for the vLLM backend (`hf.accounting.hf_call_counts` prices it for hf).

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


GiB = 2**30


def default_max_num_seqs(machine: DecodeMachine | None) -> int:
    """The sequences vLLM's offline engine (`vllm.LLM`) runs at once when `max_num_seqs` is not set.

    The backend does not set it (`runners.backends.vllm.backend.VLLMBackend.from_pretrained`), so vLLM
    0.32's default holds (`vllm/engine/arg_utils.py`, `EngineArgs.get_batch_defaults`, the LLM class's
    row): 1024 on a GPU of at least 160 GiB, or of at least 70 GiB whose name does not say A100 (H100,
    H200); 256 on the others (A100, RTX A6000, L40S) and on a CPU (x the world size, 1 here).
    """
    if machine is None or machine.memory_bytes is None:
        return 256
    memory, name = machine.memory_bytes, machine.name.lower()
    if memory >= 160 * GiB or (memory >= 70 * GiB and "a100" not in name):
        return 1024
    return 256


def vllm_generate_counts(call: GenerateCall) -> GenerateCounts:
    """A call of generation requests priced for the vLLM backend: prefix caching, then continuous batching.

    Prefill: each prompt reuses the whole `block_size` blocks an earlier prompt of the call computed
    (automatic prefix caching; an estimate that assumes the cache keeps them) and computes the rest,
    at least its last token. Decode: the engine keeps up to `default_max_num_seqs` sequences running,
    fewer where the KV cache (the GPU's memory x `GPU_MEMORY_UTILIZATION`, less the weights) holds
    fewer sequences of a mean prompt and answer, and never more than the call's requests; a finished
    sequence's slot goes to the next request, so no step is spent on a finished one. Its steps are the
    sequences' decode positions over the running sequences, at least the longest answer of a
    full batch; a sequence's cache holds, on average over its steps, its prompt and half its answer.
    """
    m = len(call.contexts)
    if not m:
        return GenerateCounts(0, 0.0, 0.0, 0.0, 0.0, ())
    block = call.block_size
    seen: set[tuple[int, ...]] = set()
    computed = 0
    for context in call.contexts:
        ids = tuple(context)
        hit, k = 0, block
        while k < len(ids) and ids[:k] in seen:  # the last token is always computed
            hit = k
            k += block
        computed += len(ids) - hit
        seen.update(ids[:j] for j in range(block, len(ids) + 1, block))
    n = call.size
    scale = n / m
    prompt_mean = sum(len(c) for c in call.contexts) / m
    mean = call.lengths.mean
    running = min(default_max_num_seqs(call.machine), n)
    machine = call.machine
    if machine is not None and machine.memory_bytes is not None and machine.kv_bytes_per_token > 0:
        cache = GPU_MEMORY_UTILIZATION["cuda"] * machine.memory_bytes - machine.weight_bytes
        fits = int(cache / machine.kv_bytes_per_token // max(prompt_mean + mean, 1.0))
        running = min(running, max(fits, 1))
    running = max(running, 1)
    positions = n * max(mean - 1, 0.0)
    groups: tuple[DecodeGroup, ...] = ()
    if positions:
        steps = max(positions / running, call.lengths.longest(running) - 1)
        groups = (DecodeGroup(steps, positions / steps, prompt_mean + mean / 2),)
    return GenerateCounts(
        items=n,
        prompt_tokens=prompt_mean * n,
        computed_prompt_tokens=computed * scale,
        decoded_tokens=n * mean,
        decode_positions=positions,
        groups=groups,
    )
