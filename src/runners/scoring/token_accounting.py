"""How many token positions a backend computes for a list of requests: pure functions, one home.

Why a module of its own: the hf backend plans its forward passes with these functions
(`hf_batches` to order and batch requests, `context_radix` to share context prefixes,
`continuation_nodes` for the packed continuation pass), and `probes plan` prices a sweep
with the very same functions, without a model. So the counts a planner reports are the
backend's own, exactly, not a re-derivation that can drift. Nothing here imports torch.

Vocabulary:

- **context tokens**: the tokens of every request's context (what a naive scorer runs).
- **computed context tokens**: the context positions the backend actually runs. The hf
  backend runs every distinct context prefix of a batch once (a radix tree over the batch's
  sorted contexts, `context_radix`); vLLM reuses whole KV blocks through prefix caching.
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

Stable API (used by `probes plan` through the backend registry, `runners.backends`):
`TokenCounts`, `hf_token_counts`, `hf_call_counts`, `prefix_trie_minimum` (vLLM's own counts:
`runners.backends.vllm.accounting`); and for the hf backend itself `hf_batches`,
`budget_chunks`, `context_radix`, `RadixNode`, `continuation_nodes`. Generation requests are
counted by `runners.scoring.generate_accounting`.
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
    "MIN_SHARED_PREFIX",
    "RadixNode",
    "SampledCall",
    "TokenCounts",
    "budget_chunks",
    "context_radix",
    "continuation_nodes",
    "hf_batches",
    "hf_call_counts",
    "hf_token_counts",
    "prefix_trie_minimum",
    "radix_attribution",
]

T = TypeVar("T")

#: the hf backend's default budget of tokens (rows x padded length) in one forward pass
DEFAULT_MAX_BATCH_TOKENS = 8192
#: a shared context segment shorter than this is not run on its own (an extra pass costs more
#: than the few tokens it saves): its tokens are run with each branch instead
MIN_SHARED_PREFIX = 8
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


def hf_batches(contexts: Sequence[Sequence[int]], max_batch_tokens: int) -> list[list[int]]:
    """How the hf backend batches one call's requests: indices sorted by context token ids, then cut.

    Sorting by token ids puts contexts that share a prefix next to each other (all items of
    one persona and instruction, then of one narrative, ...), so the batches' radix trees
    share as much as they can. A batch holds consecutive requests while rows x longest
    context stays within `max_batch_tokens` (it bounds the batch's KV store and each pass).
    """
    order = sorted(range(len(contexts)), key=lambda i: tuple(contexts[i]))
    return budget_chunks(order, lambda i: len(contexts[i]), max_batch_tokens)


@dataclass(frozen=True)
class RadixNode:
    """One edge of a batch's context radix tree: a run of tokens computed once for every context below it."""

    #: index of the parent node in the node list, -1 under the root
    parent: int
    #: the tokens of this edge
    tokens: tuple[int, ...]
    #: position of the first token (the length of the path above it)
    start: int
    #: edges between the root and this one (0 under the root)
    level: int
    #: indices (into the batch's contexts) of the contexts that end at this node's last token
    ends: tuple[int, ...]


def context_radix(contexts: Sequence[Sequence[int]], min_shared_prefix: int = MIN_SHARED_PREFIX) -> list[RadixNode]:
    """The radix tree the hf backend runs a batch's contexts through, parents before children.

    Every context ends at a node's last token (that node's last logits are its next-token
    distribution). A node is cut at every branching point and every context end, then
    shared segments shorter than `min_shared_prefix` that no context ends in are merged into
    their children (their tokens are run once per child instead: an extra pass costs more
    than a few tokens). `min_shared_prefix=0` turns sharing off: one edge per context, as a
    plain batched forward pass. Identical contexts share one node.
    """
    if not contexts:
        return []
    if min_shared_prefix <= 0:
        nodes: list[RadixNode] = []
        seen: dict[tuple[int, ...], int] = {}
        ends: dict[int, list[int]] = {}
        for i, ctx in enumerate(contexts):
            key = tuple(ctx)
            if key not in seen:
                seen[key] = len(nodes)
                nodes.append(RadixNode(-1, key, 0, 0, ()))
            ends.setdefault(seen[key], []).append(i)
        return [RadixNode(n.parent, n.tokens, 0, 0, tuple(ends[k])) for k, n in enumerate(nodes)]
    # a token trie as nested dicts, then compressed; built over the contexts in sorted order
    order = sorted(range(len(contexts)), key=lambda i: tuple(contexts[i]))
    root: dict = {}
    end_at: dict[int, list[int]] = {}  # id(trie node dict) -> contexts ending there
    for i in order:
        node = root
        for t in contexts[i]:
            node = node.setdefault(t, {})
        end_at.setdefault(id(node), []).append(i)

    out: list[dict] = []  # mutable node records: parent, tokens, start, ends, children

    def emit(parent: int, start: int, first: int, child: dict) -> None:
        # follow single-child chains that no context ends in
        tokens = [first]
        node = child
        while len(node) == 1 and id(node) not in end_at:
            ((t, node),) = node.items()
            tokens.append(t)
        k = len(out)
        out.append({"parent": parent, "tokens": tokens, "start": start, "ends": end_at.get(id(node), []), "kids": []})
        if parent >= 0:
            out[parent]["kids"].append(k)
        stack.append((k, start + len(tokens), node))

    stack: list[tuple[int, int, dict]] = []
    for t in sorted(root):
        emit(-1, 0, t, root[t])
    # depth-first, children in token order (recursion-free: contexts can be thousands of tokens)
    while stack:
        k, start, node = stack.pop()
        for t in sorted(node, reverse=True):
            emit(k, start, t, node[t])
    # merge short shared segments into their children
    for rec in out:
        rec["keep"] = True
    for rec in out:
        if rec["kids"] and not rec["ends"] and len(rec["tokens"]) < min_shared_prefix:
            rec["keep"] = False
    final: list[RadixNode] = []
    new_index: dict[int, int] = {}

    def place(k: int) -> None:
        rec = out[k]
        # climb merged ancestors: their tokens are prepended
        tokens = list(rec["tokens"])
        start = rec["start"]
        parent = rec["parent"]
        while parent >= 0 and not out[parent]["keep"]:
            tokens = out[parent]["tokens"] + tokens
            start = out[parent]["start"]
            parent = out[parent]["parent"]
        p = new_index[parent] if parent >= 0 else -1
        level = final[p].level + 1 if p >= 0 else 0
        new_index[k] = len(final)
        final.append(RadixNode(p, tuple(tokens), start, level, tuple(rec["ends"])))

    # parents are emitted before children in `out` order (a child is appended after its parent)
    for k, rec in enumerate(out):
        if rec["keep"]:
            place(k)
    return final


def radix_attribution(nodes: Sequence[RadixNode], n_contexts: int) -> list[int]:
    """Computed context tokens per context: each node's tokens counted once, for the first context below it."""
    owner = [-1] * len(nodes)
    for k in range(len(nodes) - 1, -1, -1):  # children come after parents: fold owners upwards
        node = nodes[k]
        first = min(node.ends) if node.ends else -1
        mine = owner[k]
        best = first if mine < 0 else (mine if first < 0 else min(first, mine))
        owner[k] = best
        if node.parent >= 0:
            p = owner[node.parent]
            owner[node.parent] = best if p < 0 else min(p, best)
    counts = [0] * n_contexts
    for k, node in enumerate(nodes):
        counts[owner[k]] += len(node.tokens)
    return counts


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


def hf_token_counts(
    requests: Sequence[ScoreRequest],
    *,
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
    items_per_call: int | None = DEFAULT_ITEMS_PER_CALL,
    min_shared_prefix: int = MIN_SHARED_PREFIX,
) -> TokenCounts:
    """The hf backend's counts for `requests` sent `items_per_call` at a time (None: all in one call)."""
    step = items_per_call if items_per_call else len(requests)
    per_request = [0] * len(requests)
    computed_context = 0
    continuation = 0
    for start in range(0, len(requests), max(step, 1)):
        call = requests[start : start + step]
        contexts = [r.context for r in call]
        for batch in hf_batches(contexts, max_batch_tokens):
            nodes = context_radix([contexts[i] for i in batch], min_shared_prefix)
            for j, n in enumerate(radix_attribution(nodes, len(batch))):
                per_request[start + batch[j]] += n
                computed_context += n
        for k, r in enumerate(call):
            fed = len(continuation_nodes(r.continuations, bool(r.candidates))) if r.continuations else 0
            per_request[start + k] += fed
            continuation += fed
    return token_counts_of(requests, computed_context, continuation, per_request)


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


def hf_call_counts(call: SampledCall) -> tuple[TokenCounts, float]:
    """One sampled call priced for the hf backend (`runners.plan.count.count_call`): counts, and its tries' positions.

    A trie costs its nodes (bounded: `trie_positions`, at most its nodes), whatever its context,
    so the picked tries scale to the call's `numbers`.
    """
    counts = hf_token_counts(call.requests, max_batch_tokens=call.max_batch_tokens, items_per_call=None)
    per_trie = [hf_token_counts([call.full[k]], items_per_call=None).continuation_positions for k in call.picked]
    if call.trie_positions is not None:
        per_trie = [min(call.trie_positions, n) for n in per_trie]
    scale = len(call.numbers) / len(call.picked) if call.picked else 0.0
    return counts, scale * sum(per_trie)
