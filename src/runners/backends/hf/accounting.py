"""How the hf backend batches and shares work, as pure functions its scoring and `probes plan` both call.

The hf backend plans its forward passes with these functions (`hf_batches` to order and batch
requests, `context_radix` to share context prefixes, `generate_batches` for generation) and its
spec prices a sweep with the very same ones (`hf_token_counts`, `hf_call_counts`,
`hf_generate_counts`), without a model: the counts a plan reports are the backend's own, exactly.
What every backend counts alike (`TokenCounts`, `continuation_nodes`, `budget_chunks`) is
`runners.scoring.token_accounting`; vLLM's counts are `runners.backends.vllm.accounting`.
Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runners.exchange import ScoreRequest
from runners.scoring.generate_accounting import DecodeGroup, GenerateCall, GenerateCounts
from runners.scoring.token_accounting import (
    DEFAULT_ITEMS_PER_CALL,
    DEFAULT_MAX_BATCH_TOKENS,
    SampledCall,
    TokenCounts,
    budget_chunks,
    continuation_nodes,
    token_counts_of,
)

#: a shared context segment shorter than this is not run on its own (an extra pass costs more
#: than the few tokens it saves): its tokens are run with each branch instead
MIN_SHARED_PREFIX = 8


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


def hf_call_counts(call: SampledCall) -> tuple[TokenCounts, float]:
    """One sampled call priced for the hf backend (`runners.plan.count.count_call`): counts, and its tries' positions.

    A trie costs its nodes (bounded: `trie_positions`, at most its nodes), whatever its context,
    so the picked tries scale to the call's `numbers`.
    """
    counts = hf_token_counts(call.requests, max_batch_tokens=call.max_batch_tokens, items_per_call=None)
    per_trie: list[float] = [
        hf_token_counts([call.full[k]], items_per_call=None).continuation_positions for k in call.picked
    ]
    if call.trie_positions is not None:
        per_trie = [min(call.trie_positions, n) for n in per_trie]
    scale = len(call.numbers) / len(call.picked) if call.picked else 0.0
    return counts, scale * sum(per_trie)


def generate_batches(lengths: Sequence[int], max_new_tokens: int, max_batch_tokens: int) -> list[list[int]]:
    """How the hf backend batches greedy requests of one `generate` call (`runners.backends.hf.generate`).

    Indices sorted by prompt length (stable), then cut so that rows x (longest prompt + `max_new_tokens`)
    stays within `max_batch_tokens`: a left-padded batch's final width.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    return budget_chunks(order, lambda i: lengths[i] + max_new_tokens, max_batch_tokens)


def hf_generate_counts(call: GenerateCall) -> GenerateCounts:
    """A call of generation requests priced for the hf backend: static left-padded batches.

    The batches are `generate_batches`' (a sampled request runs alone). A batch's prefill runs its
    rows x longest prompt (padding included); then every row decodes until the batch's longest
    answer stops (`DecodedLengths.longest` of its rows), so finished rows are padding waste; a row's
    cache holds the padded prompt and the tokens so far.
    """
    m = len(call.contexts)
    lengths = [len(call.contexts[k % m]) for k in range(call.size)] if m else []
    if call.sampled:
        batches = [[i] for i in range(len(lengths))]
    else:
        batches = generate_batches(lengths, call.max_new_tokens, call.max_batch_tokens)
    computed = positions = 0.0
    groups = []
    for batch in batches:
        rows, width = len(batch), max(lengths[i] for i in batch)
        computed += rows * width
        steps = max(call.lengths.longest(rows) - 1, 0.0)
        if steps:
            groups.append(DecodeGroup(steps, rows, width + (steps + 1) / 2))
            positions += rows * steps
    return GenerateCounts(
        items=len(lengths),
        prompt_tokens=float(sum(lengths)),
        computed_prompt_tokens=computed,
        decoded_tokens=len(lengths) * call.lengths.mean,
        decode_positions=positions,
        groups=tuple(groups),
    )
