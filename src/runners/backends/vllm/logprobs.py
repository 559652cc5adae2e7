"""Reading vLLM's log-probability outputs, and planning the engine queries of a score batch. Pure.

vLLM has no "score these continuations" call: it generates. Scoring is read off two of its
outputs (docs/DESIGN.md section 6):

- `RequestOutput.prompt_logprobs`: one entry per prompt position, `None` for the first,
  otherwise a dict `{token_id: Logprob}` that always holds the prompt's own token there
  (plus the top-k others when asked). A continuation's token log-probabilities are the
  entries of its last `n` positions.
- `CompletionOutput.logprobs[0]`: the next-token log-probabilities after the whole prompt,
  for the token ids named in `SamplingParams.logprob_token_ids` (or the whole vocabulary
  with `logprobs=-1`), plus the sampled token.

Both are parsed here, and checked: a missing position or token id is an error naming it,
never a silent zero or -inf. Nothing here imports vllm, so it is tested without it.

`plan_queries` turns `ScoreRequest`s into the engine prompts that answer them: each
context+continuation once with prompt log-probabilities, and, when candidates are asked
for, every prefix whose next-token candidates are needed (the context, and the context
plus each leading part of each continuation; a number trie's inner nodes). Identical
prompts are asked once, and the queries are sorted by token ids so prompts that share a
prefix are adjacent (what prefix caching can reuse).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from runners.backends.protocol import ContinuationScore, ScoreRequest, ScoreResult
from runners.results.rules import checked_logprob


def _value(entry: Any, where: str) -> float:
    """A vLLM `Logprob` (has `.logprob`) or a plain float, checked to be a log-probability
    (`runners.results.rules.checked_logprob`: NaN, +inf or a positive number is `BadLogprob` naming `where`)."""
    return checked_logprob(getattr(entry, "logprob", entry), where)


def continuation_logprobs(
    prompt_logprobs: Sequence[Mapping[int, Any] | None] | None, prompt_ids: Sequence[int], n: int
) -> np.ndarray:
    """Log-probabilities of the last `n` tokens of `prompt_ids`, read from `prompt_logprobs`.

    `prompt_logprobs[i]` scores `prompt_ids[i]` given `prompt_ids[:i]`. Raises ValueError when
    the output does not cover the prompt or lacks a prompt token at a scored position.
    """
    if n < 1 or n >= len(prompt_ids):
        raise ValueError(f"cannot score the last {n} of {len(prompt_ids)} prompt tokens (the first has no context)")
    if prompt_logprobs is None:
        raise ValueError("the output has no prompt_logprobs (were they requested?)")
    if len(prompt_logprobs) != len(prompt_ids):
        raise ValueError(f"prompt_logprobs has {len(prompt_logprobs)} positions, the prompt {len(prompt_ids)} tokens")
    out = np.empty(n, dtype=np.float64)
    for k, pos in enumerate(range(len(prompt_ids) - n, len(prompt_ids))):
        entry = prompt_logprobs[pos]
        token = prompt_ids[pos]
        if entry is None or token not in entry:
            raise ValueError(f"prompt_logprobs at position {pos} lacks the prompt token {token}")
        out[k] = _value(entry[token], f"prompt_logprobs at position {pos} (token {token})")
    return out


def candidate_logprobs(sample_logprobs: Mapping[int, Any] | None, candidates: Sequence[int]) -> np.ndarray:
    """Next-token log-probabilities of `candidates`, read from one position of the sample logprobs."""
    if sample_logprobs is None:
        raise ValueError("the output has no sample logprobs (were logprob_token_ids requested?)")
    missing = [c for c in candidates if c not in sample_logprobs]
    if missing:
        raise ValueError(f"sample logprobs lack candidate token ids {missing[:10]}")
    where = "the next-token log-probability after the prompt of token id {}"
    return np.array([_value(sample_logprobs[c], where.format(c)) for c in candidates], dtype=np.float64)


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
