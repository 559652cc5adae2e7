"""Bounded number tries: one engine call per trie level (`runners.scoring.number_bound`).

Each bounded request's `TrieExpansion` names the nodes the next level computes; each node is
one engine prompt, the context and the node's token path, whose next-token log-probabilities
are read at the node's children and the candidates (`logprob_token_ids`, in groups of at most
128: `runners.backends.prompt_logprobs.queries.Query`). The context's own prompt comes first and reads the root's
children; with prefix caching on, every later prompt reuses its whole cached blocks, so a node
costs the context's last partial block and its path. Identical prompts (requests that share a
context) are asked once. Nothing here imports vllm: the engine call is the backend's `run` (the
vLLM engine's, or a server's requests).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from runners.backends.prompt_logprobs.queries import Query
from runners.exchange import ScoreRequest, ScoreResult
from runners.scoring.number_bound import TrieExpansion


def _ask(run: Callable[[list[Query]], None], asks: Sequence[tuple[tuple[int, ...], tuple[int, ...]]]) -> list[dict]:
    """{token id: log-probability} after each (prompt ids, candidate ids), one engine call for all of them."""
    queries: dict[tuple[tuple[int, ...], tuple[int, ...]], Query] = {}
    for ids, candidates in asks:
        queries.setdefault((ids, candidates), Query(ids, candidates=candidates))
    run(sorted(queries.values(), key=lambda q: q.ids))
    out = []
    for key in asks:
        q = queries[key]
        out.append(dict(zip(q.candidates, q.next_logprobs.tolist(), strict=True)))
    return out


def score_bounded(run: Callable[[list[Query]], None], requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
    """Every bounded request expanded to its tolerance, one `run` (engine call) per trie level."""
    expansions = [TrieExpansion(r) for r in requests]
    roots = _ask(run, [(exp.request.context, exp.root_ids()) for exp in expansions])
    for exp, logprobs in zip(expansions, roots, strict=True):
        exp.root(logprobs)
    while True:
        todo = [(exp, k) for exp in expansions for k in exp.pending()]
        if not todo:
            return [exp.result() for exp in expansions]
        answers = _ask(run, [(exp.request.context + exp.shape.nodes[k], exp.child_ids(k)) for exp, k in todo])
        for (exp, k), logprobs in zip(todo, answers, strict=True):
            exp.record(k, logprobs)
