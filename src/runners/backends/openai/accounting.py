"""What a served model computes for a list of requests, and the prompts it is sent: how plans and quotes price it.

A served model is priced by tokens and requests, not by FLOPs on a GPU of ours: the server's
hardware and batching are its own. The prompts are the backend's (`backend.OpenAIBackend._run`):
one per distinct query of `prompt_logprobs.queries.plan_queries` and group of at most 128 candidate ids.
Every prompt is counted whole: vLLM computes every position of a prompt whose log-probabilities
are asked (it skips its prefix cache for them), and the others (a number trie's inner nodes)
may reuse cached blocks, so for those the count is an upper bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from runners.backends.prompt_logprobs.queries import candidate_groups, plan_queries
from runners.exchange import ScoreRequest
from runners.scoring.token_accounting import DEFAULT_ITEMS_PER_CALL, SampledCall, TokenCounts, token_counts_of


def openai_token_counts(
    requests: Sequence[ScoreRequest], *, items_per_call: int | None = DEFAULT_ITEMS_PER_CALL
) -> TokenCounts:
    """Positions and prompts of `requests` sent `items_per_call` at a time (None: all in one call)."""
    step = items_per_call if items_per_call else len(requests)
    computed_context = continuation = prompts = 0
    per_request = [0] * len(requests)
    for start in range(0, len(requests), max(step, 1)):
        call = requests[start : start + step]
        contexts = {r.context for r in call}
        spent = 0
        for q in plan_queries(call):
            jobs = len(candidate_groups(q.candidates))
            prompts += jobs
            spent += len(q.ids) * jobs
            if q.ids in contexts:
                computed_context += len(q.ids) * jobs
            else:
                continuation += len(q.ids) * jobs
        share, extra = divmod(spent, max(len(call), 1))
        for k in range(len(call)):
            per_request[start + k] = share + (1 if k < extra else 0)
    return replace(token_counts_of(requests, computed_context, continuation, per_request), prompts=prompts)


def openai_call_counts(call: SampledCall) -> tuple[TokenCounts, float]:
    """One sampled call priced for the served backend (`hf.accounting.hf_call_counts` prices it for hf).

    Each number item's trie is counted with its own context and the nearest picked item's trie (its prompts
    hold the whole context); a bounded trie costs `trie_positions` such prompts at the trie's mean depth.
    """
    counts = openai_token_counts(call.requests, items_per_call=None)
    tries, prompts, full, picked = 0.0, counts.prompts, call.full, call.picked
    for k in call.numbers:
        near = full[k] if k in full else full[max((p for p in picked if p <= k), default=picked[0])]
        own = openai_token_counts([ScoreRequest(call.requests[k].context, near.continuations, near.candidates)])
        # less the context's own prompts (one per candidate group), counted in `counts` already
        nodes: float = own.prompts - len(candidate_groups(call.requests[k].candidates))
        positions: float = own.continuation_positions
        if call.trie_positions is not None and nodes:
            positions *= min(call.trie_positions, nodes) / nodes
            nodes = min(call.trie_positions, nodes)
        tries += positions
        prompts += round(nodes)
    return replace(counts, prompts=prompts), tries
