"""Planning the engine prompts of a score batch, and assembling its results from their answers. Pure.

`plan_queries` turns `ScoreRequest`s into the engine prompts that answer them: each
context+continuation once with prompt log-probabilities, and, when candidates are asked
for, every prefix whose next-token candidates are needed (the context, and the context
plus each leading part of each continuation; a number trie's inner nodes). Identical
prompts are asked once, and the queries are sorted by token ids so prompts that share a
prefix are adjacent (what prefix caching can reuse). A prompt's candidates are asked in
groups of at most `MAX_LOGPROB_TOKEN_IDS` (`candidate_groups`), one engine request per group.
The backend fills each `Query` from its engine's answers (`runners.backends.prompt_logprobs.read`),
and `assemble` makes the `ScoreResult`s of the requests from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from runners.exchange import ContinuationScore, ScoreRequest, ScoreResult

#: candidate ids per engine request: vLLM's V1 sampler returns at most this many
#: `logprob_token_ids`. A larger candidate set (Llama-3 has over a thousand digit-starting
#: tokens) is asked in groups of this size, one request per group (`candidate_groups`)
MAX_LOGPROB_TOKEN_IDS = 128


def candidate_groups(candidates: Sequence[int], size: int = MAX_LOGPROB_TOKEN_IDS) -> list[tuple[int, ...]]:
    """`candidates` cut into consecutive groups of at most `size`; one empty group when there are none."""
    groups = [tuple(candidates[i : i + size]) for i in range(0, len(candidates), size)]
    return groups or [()]


@dataclass
class Query:
    """One engine prompt and what is read from it."""

    ids: tuple[int, ...]
    #: read the prompt log-probabilities (the prompt ends with a continuation)
    prompt_logprobs: bool = False
    #: first prompt position whose log-probability is read (the shortest context it continues);
    #: earlier positions may come from the prefix cache, whose entries are not read
    start: int = 0
    #: candidate token ids whose next-token log-probabilities are read (empty: none)
    candidates: tuple[int, ...] = ()
    #: filled from the engine's output: log-probabilities of ids[start:], and of the candidates after ids
    token_logprobs: Any = field(default=None, repr=False)
    next_logprobs: Any = field(default=None, repr=False)


def plan_queries(requests: Sequence[ScoreRequest]) -> list[Query]:
    """The distinct engine prompts that answer `requests`, sorted by token ids (see module docstring)."""
    queries: dict[tuple[int, ...], Query] = {}

    def query(ids: tuple[int, ...]) -> Query:
        if ids not in queries:
            queries[ids] = Query(ids)
        return queries[ids]

    for r in requests:
        for cont in r.continuations:
            q = query(r.context + cont)
            q.start = min(q.start, len(r.context)) if q.prompt_logprobs else len(r.context)
            q.prompt_logprobs = True
        if r.candidates:
            prefixes = {r.context} | {r.context + c[:k] for c in r.continuations for k in range(1, len(c) + 1)}
            for ids in prefixes:
                q = query(ids)
                if q.candidates and q.candidates != r.candidates:
                    # two requests share a prompt but want different candidates: ask for both sets
                    q.candidates = tuple(dict.fromkeys(q.candidates + r.candidates))
                else:
                    q.candidates = r.candidates
    return [queries[ids] for ids in sorted(queries)]


def assemble(requests: Sequence[ScoreRequest], queries: Sequence[Query]) -> list[ScoreResult]:
    """`ScoreResult`s of `requests` from the filled `queries` of `plan_queries(requests)`."""
    by_ids = {q.ids: q for q in queries}
    results = []
    for r in requests:

        def next_of(ids: tuple[int, ...], r: ScoreRequest = r) -> np.ndarray:
            q = by_ids[ids]
            index = [q.candidates.index(c) for c in r.candidates]
            return np.asarray(q.next_logprobs, dtype=np.float64)[index]

        conts = []
        for cont in r.continuations:
            full = by_ids[r.context + cont]
            token_lp = np.asarray(full.token_logprobs, dtype=np.float64)[len(r.context) - full.start :]
            if r.candidates:
                nxt = np.stack([next_of(r.context + cont[:k]) for k in range(1, len(cont) + 1)])
            else:
                nxt = np.empty((len(cont), 0), dtype=np.float64)
            conts.append(ContinuationScore(token_lp, nxt))
        after = next_of(r.context) if r.candidates else np.empty(0, dtype=np.float64)
        results.append(ScoreResult(tuple(conts), after, len(r.context)))
    return results
