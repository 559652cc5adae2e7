"""Reading vLLM's log-probability outputs. Pure.

Scoring is read off two of vLLM's outputs (docs/DESIGN.md section 6):

- `RequestOutput.prompt_logprobs`: one entry per prompt position, `None` for the first,
  otherwise a dict `{token_id: Logprob}` that always holds the prompt's own token there
  (plus the top-k others when asked). A continuation's token log-probabilities are the
  entries of its last `n` positions.
- `CompletionOutput.logprobs[0]`: the next-token log-probabilities after the whole prompt,
  for the token ids named in `SamplingParams.logprob_token_ids` (or the whole vocabulary
  with `logprobs=-1`), plus the sampled token.

Both are parsed here, and checked: a missing position or token id is an error naming it,
never a silent zero or -inf; `may_be_cached` says when a prompt's scored rows came from the
prefix cache, where vLLM leaves them unset. A server's answers (`runners.backends.openai`) are
read as the same shapes, with plain floats for `Logprob`s. Nothing here imports vllm, so it is
tested without it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

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


def may_be_cached(num_cached_tokens: int | None, start: int) -> bool:
    """Whether a prompt's positions from `start` on may have been served from vLLM's prefix cache.

    vLLM computes prompt log-probabilities only where it computes the prompt: the rows of a
    prefix-cache hit are left as they were in a fresh, uninitialised buffer, not `None`. Such a
    row may even hold the prompt's own token id with another prompt's log-probability (a freed
    buffer reused), so the token check of `continuation_logprobs` cannot tell it apart. Position
    p is scored from the hidden state at p - 1, so positions from `start` on were all computed
    when fewer than `start` tokens came from the cache (`RequestOutput.num_cached_tokens`).
    An unknown count (`None`) may be cached.
    """
    return num_cached_tokens is None or num_cached_tokens >= start


def candidate_logprobs(sample_logprobs: Mapping[int, Any] | None, candidates: Sequence[int]) -> np.ndarray:
    """Next-token log-probabilities of `candidates`, read from one position of the sample logprobs."""
    if sample_logprobs is None:
        raise ValueError("the output has no sample logprobs (were logprob_token_ids requested?)")
    missing = [c for c in candidates if c not in sample_logprobs]
    if missing:
        raise ValueError(f"sample logprobs lack candidate token ids {missing[:10]}")
    where = "the next-token log-probability after the prompt of token id {}"
    return np.array([_value(sample_logprobs[c], where.format(c)) for c in candidates], dtype=np.float64)
