"""How many token positions a backend computes for a list of requests: what every backend counts alike.

Why a module of its own: the backends plan their work with these functions and `probes plan`
prices a sweep with the very same ones, through each backend's own accounting module
(`runners.backends.hf.accounting`: its batches and context radix tree; `...vllm.accounting`;
`...openai.accounting`), without a model. So the counts a planner reports are the backends'
own, exactly, not a re-derivation that can drift. Nothing here imports torch.

Vocabulary:

- **context tokens**: the tokens of every request's context (what a naive scorer runs).
- **computed context tokens**: the context positions the backend actually runs. The hf
  backend runs every distinct context prefix of a batch once (a radix tree over the batch's
  sorted contexts, `runners.backends.hf.accounting.context_radix`); vLLM reuses whole KV blocks through prefix caching.
- **shared-prefix saving**: context tokens minus computed context tokens.
- **continuation positions**: the positions fed after the contexts: in the hf backend one
  per node of each request's continuation trie (`continuation_nodes`: for a number item in
  exact mode, every node of the digit trie; for a sentence-mode choice item, every option
  token but the last ones; none for letter-mode and first-token number items).
- **prefix-trie minimum**: the number of distinct context prefixes over all requests, i.e.
  the context positions a scorer that computed every distinct prefix exactly once (with
  unlimited memory) would run. It is the floor the computed context tokens are compared to.

The number mode (`exact` or `first-token`) is already in the requests
(`runners.rows.prepare_request` builds a trie request or a next-token request), so callers
build requests exactly as a run does and pass them here.

Stable API: `TokenCounts` and `token_counts_of` (the figures every backend reports), `SampledCall`
(one sampled call, for a backend to price), `prefix_trie_minimum`, `continuation_nodes` (the
continuation trie's fed positions) and `budget_chunks`. Generation requests are counted by
`runners.scoring.generate_accounting`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from runners.exchange import ScoreRequest
from runners.model.device import ITEMS_PER_CALL

__all__ = [
    "DEFAULT_ITEMS_PER_CALL",
    "DEFAULT_MAX_BATCH_TOKENS",
    "SampledCall",
    "TokenCounts",
    "budget_chunks",
    "continuation_nodes",
    "prefix_trie_minimum",
]

T = TypeVar("T")

#: the hf backend's default budget of tokens (rows x padded length) in one forward pass
DEFAULT_MAX_BATCH_TOKENS = 8192
#: requests per backend call when a caller does not say (the run loop's CPU default; a GPU run
#: sends `runners.model.device.ITEMS_PER_CALL["cuda"]`)
DEFAULT_ITEMS_PER_CALL = ITEMS_PER_CALL["cpu"]
#: vLLM's prefix-cache block size when not given (its CPU default; GPUs default to 16)
DEFAULT_VLLM_BLOCK_SIZE = 128


@dataclass(frozen=True)
class TokenCounts:
    """Token positions of a list of requests under one backend's plan (module docstring)."""

    items: int
    context_tokens: int
    computed_context_tokens: int
    continuation_positions: int
    prefix_trie_minimum: int
    #: per request (in input order): its computed context tokens (each shared segment counted
    #: for the first request of its batch that needs it) plus its continuation positions
    per_request: tuple[int, ...] = field(default=(), repr=False)
    #: prompts (engine requests) sent, for a backend priced by requests (a served model's); 0: not counted
    prompts: int = 0

    @property
    def shared_prefix_saved(self) -> int:
        """Context tokens not computed thanks to shared prefixes."""
        return self.context_tokens - self.computed_context_tokens

    @property
    def computed_tokens(self) -> int:
        """Every position the backend runs: computed context tokens plus continuation positions."""
        return self.computed_context_tokens + self.continuation_positions

    def as_dict(self) -> dict[str, int | float]:
        """The counts and the per-item figures, as JSON-ready numbers."""
        n = max(self.items, 1)
        return {
            "items": self.items,
            "context_tokens": self.context_tokens,
            "computed_context_tokens": self.computed_context_tokens,
            "shared_prefix_saved": self.shared_prefix_saved,
            "continuation_positions": self.continuation_positions,
            "computed_tokens": self.computed_tokens,
            "prefix_trie_minimum": self.prefix_trie_minimum,
            "context_tokens_per_item": self.context_tokens / n,
            "computed_context_tokens_per_item": self.computed_context_tokens / n,
            "prefix_trie_minimum_per_item": self.prefix_trie_minimum / n,
            "continuation_positions_per_item": self.continuation_positions / n,
        }


def prefix_trie_minimum(contexts: Sequence[Sequence[int]]) -> int:
    """Distinct prefixes (lengths 1..len) over all `contexts`: the positions of a perfect prefix sharer.

    Counted as the sum over the contexts in sorted order of each one's length minus its
    longest common prefix with the one before it (sorted neighbours share the longest
    prefixes), so it needs no set of prefixes in memory.
    """
    ordered = sorted(tuple(c) for c in contexts)
    total = 0
    previous: tuple[int, ...] = ()
    for ctx in ordered:
        total += len(ctx) - _common(previous, ctx)
        previous = ctx
    return total


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    k = 0
    while k < n and a[k] == b[k]:
        k += 1
    return k


def budget_chunks(items: Sequence[T], cost: Callable[[T], int], budget: int) -> list[list[T]]:
    """Consecutive groups of `items` whose rows x largest `cost` stays within `budget` (at least one row each).

    The one batching rule of the hf backend: requests into batches (`hf_batches`), radix
    nodes and continuation rows into passes, generation requests into `generate` calls.
    """
    groups: list[list[T]] = []
    group: list[T] = []
    worst = 0
    for item in items:
        c = cost(item)
        if group and (len(group) + 1) * max(worst, c) > budget:
            groups.append(group)
            group, worst = [], 0
        group.append(item)
        worst = max(worst, c)
    if group:
        groups.append(group)
    return groups


def continuation_nodes(continuations: Sequence[Sequence[int]], with_candidates: bool) -> list[tuple[int, ...]]:
    """The continuation trie's nodes the hf backend feeds in one packed row, in depth-first order.

    A node is a distinct prefix of a continuation (one token each: its last). Its logits give
    the next token of every continuation through it and, with candidates, the candidates'
    log-probabilities there. The full continuations are nodes only when candidates are asked
    (their logits score nothing else) or when they are prefixes of longer ones. Sorted order
    puts every node after its parent.
    """
    nodes: set[tuple[int, ...]] = set()
    for cont in continuations:
        cont = tuple(cont)
        stop = len(cont) if with_candidates else len(cont) - 1
        for k in range(1, stop + 1):
            nodes.add(cont[:k])
    return sorted(nodes)


def token_counts_of(
    requests: Sequence[ScoreRequest], computed_context: int, continuation: int, per_request: Sequence[int]
) -> TokenCounts:
    """The `TokenCounts` of a backend's tally: the figures every backend reports the same way."""
    return TokenCounts(
        items=len(requests),
        context_tokens=sum(len(r.context) for r in requests),
        computed_context_tokens=computed_context,
        continuation_positions=continuation,
        prefix_trie_minimum=prefix_trie_minimum([r.context for r in requests]),
        per_request=tuple(per_request),
    )


@dataclass(frozen=True)
class SampledCall:
    """One call of a config as `probes plan` samples it (`runners.plan.count.count_call`), for a backend to price."""

    #: the call's requests as the run sends them, every number item's trie left out
    requests: Sequence[ScoreRequest]
    #: the built requests of the `picked` number items (tries included) and of the other items
    full: Mapping[int, ScoreRequest]
    picked: Sequence[int]
    #: the positions of the call's number items
    numbers: Sequence[int]
    #: bounded mode: the profile's trie positions per number item; None: exact tries
    trie_positions: float | None
    max_batch_tokens: int
    block_size: int
