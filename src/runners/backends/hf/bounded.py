"""The hf backend's bounded number tries: one pass per trie level over the pooled context.

The expansion rule is `runners.scoring.number_bound`'s.

After the context passes, each bounded request's `TrieExpansion` names the nodes the next pass
computes. A pass feeds each request's nodes in one row, over a past of its context slots and
every inner node computed before; through `TreeRow.sees`, a node sees the context and its
own ancestors only, at position `len(context) + depth - 1`, as in the exact packed row. The
keys and values of new nodes that have children go to pool slots reserved for them
(`KVPool.reserve`), so the next level reads them instead of computing them again (a leaf's are
never read, so not kept): a node is computed once, and only the nodes the bound needs are.
The logits at a node give its children's tokens and the candidates.

torch is imported by the passes only, so `import runners` works without the `hf` extra.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from runners.backends.hf.logprobs import LogSoftmax, gather_logprobs
from runners.backends.hf.tree_pass import KVPool, TreeRow, tree_pass
from runners.scoring.number_bound import TrieExpansion
from runners.scoring.token_accounting import budget_chunks


def bounded_passes(
    model: Any,
    pool: KVPool,
    expansions: dict[int, TrieExpansion],
    context_slots: dict[int, list[int]],
    *,
    max_batch_tokens: int,
    max_logit_rows: int,
) -> None:
    """Run every expansion to its bound; each `TrieExpansion` records what its nodes' logits say."""
    done: dict[int, list[tuple[int, int]]] = {i: [] for i in expansions}  # (node, pool slot), in order computed
    while True:
        todo = {i: nodes for i, exp in expansions.items() if (nodes := exp.pending())}
        if not todo:
            return
        cost = {i: len(context_slots[i]) + len(done[i]) + len(nodes) for i, nodes in todo.items()}
        width = {i: len(nodes) for i, nodes in todo.items()}
        # rows of similar widths share a pass: a row is left-padded to the widest, and padding is computed
        order = sorted(todo, key=lambda i: (len(todo[i]), i))
        for group in budget_chunks(order, cost.__getitem__, max_batch_tokens):
            for chunk in budget_chunks(group, width.__getitem__, max_logit_rows):
                _pass(model, pool, chunk, todo, expansions, context_slots, done)


def _pass(
    model: Any,
    pool: KVPool,
    chunk: list[int],
    todo: dict[int, list[int]],
    expansions: dict[int, TrieExpansion],
    context_slots: dict[int, list[int]],
    done: dict[int, list[tuple[int, int]]],
) -> None:
    """One forward pass over `chunk`'s pending nodes, one row per request."""
    rows = []
    for i in chunk:
        exp, nodes, ctx = expansions[i], todo[i], context_slots[i]
        where = {node: len(ctx) + j for j, (node, _) in enumerate(done[i])}
        sees = np.zeros((len(nodes), len(ctx) + len(done[i])), dtype=bool)
        sees[:, : len(ctx)] = True
        for j, k in enumerate(nodes):
            a = exp.shape.parent[k]
            while a >= 0:
                sees[j, where[a]] = True
                a = exp.shape.parent[a]
        n_context = len(exp.request.context)
        # only a node with children is read again (by them): a leaf's keys and values are not kept
        inner = [bool(exp.shape.children[k]) for k in nodes]
        reserved = iter(pool.reserve(sum(inner)))
        rows.append(
            TreeRow(
                past=[*ctx, *(slot for _, slot in done[i])],
                tokens=[exp.shape.nodes[k][-1] for k in nodes],
                parents=[-1] * len(nodes),
                positions=[n_context + len(exp.shape.nodes[k]) - 1 for k in nodes],
                slots=[next(reserved) if keep else -1 for keep in inner],
                sees=sees,
            )
        )
    width = max(len(row.tokens) for row in rows)
    logits = tree_pass(model, pool, rows, all_logits=True)
    logprobs = LogSoftmax(logits)
    spots: list[tuple[int, int, int]] = []
    for b, i in enumerate(chunk):
        pad = width - len(todo[i])
        for j, k in enumerate(todo[i]):
            spots.extend((b, pad + j, t) for t in expansions[i].child_ids(k))
    values = gather_logprobs(logprobs, model.device, *zip(*spots, strict=True))
    del logits, logprobs
    at = 0
    for b, i in enumerate(chunk):
        slots = rows[b].slots
        assert slots is not None  # every row above is given its slots
        for k, slot in zip(todo[i], slots, strict=True):
            ids = expansions[i].child_ids(k)
            expansions[i].record(k, dict(zip(ids, values[at : at + len(ids)].tolist(), strict=True)))
            at += len(ids)
            if slot >= 0:
                done[i].append((k, slot))
