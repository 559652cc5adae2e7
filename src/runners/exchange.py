"""What a backend and its callers exchange: requests in, results out (docs/DESIGN.md section 6).

A backend (`runners.backends.protocol.Backend`) gets token ids (made by `runners.scoring.tokenize`, never by the
backend) and returns log-probabilities, one result per request, in request order. Everything above it (choice
and number probabilities, renormalisation, refusals) is computed once in `runners.scoring.distributions`
from these raw numbers, so backends cannot disagree on anything but the numbers themselves.

A request is a context and any number of continuations of it: the backend runs the
context once and reuses that work for every continuation (KV cache in transformers, prefix
caching in vLLM). Optionally it also reports, for a fixed list of candidate token ids, the
next-token log-probabilities after the context and after every token of every
continuation: letter-mode choices read the first, the number trie reads both.

Generation mode (docs/DESIGN.md section 6) is the second primitive: token ids in, text out, with
every sampling setting spelled out in the request (greedy when `temperature` is 0), so no
backend falls back on a model's own generation config.

These types import nothing of the project, so scoring (which makes the requests and reads the results) sits
below the backends that answer them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class NumberBound:
    """A number request scored to a tolerance (`runners.scoring.number_bound`), not over its whole trie."""

    #: the certified L1 bound the expansion stops at (relative to the resolved mass), in (0, 1)
    tolerance: float
    #: the token paths at which a number in range ends (the trie's surface forms)
    ends: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class ScoreRequest:
    context: tuple[int, ...]
    continuations: tuple[tuple[int, ...], ...] = ()
    #: token ids whose next-token log-probabilities are wanted (after the context and, if
    #: there are continuations, after each of their tokens)
    candidates: tuple[int, ...] = ()
    #: None: every continuation token is scored. Set (number items with a tolerance): the
    #: backend expands the continuation trie only as far as the bound needs, and the result
    #: holds NaN for every token and candidate row it did not compute
    bound: NumberBound | None = None

    def __post_init__(self) -> None:
        if not self.context:
            raise ValueError("a request needs a non-empty context")
        if any(not c for c in self.continuations):
            raise ValueError("continuations must be non-empty")
        if not self.continuations and not self.candidates:
            raise ValueError("a request asks for continuations, candidates or both")
        if self.bound is not None and not (self.continuations and self.candidates):
            raise ValueError("a bounded request needs continuations (the trie's leaves) and candidates")


@dataclass(frozen=True)
class ContinuationScore:
    #: log P(token_k | context, continuation[:k]) for each token
    token_logprobs: np.ndarray
    #: shape (n_tokens, n_candidates): candidate log-probabilities after each continuation
    #: token; shape (n_tokens, 0) when the request has no candidates
    next_logprobs: np.ndarray

    @property
    def logprob(self) -> float:
        """Summed log-probability of the continuation given the context."""
        return float(np.sum(self.token_logprobs))

    @property
    def n_tokens(self) -> int:
        return len(self.token_logprobs)


@dataclass(frozen=True)
class ScoreResult:
    continuations: tuple[ContinuationScore, ...]
    #: candidate log-probabilities for the token right after the context (length n_candidates)
    next_logprobs: np.ndarray
    context_tokens: int
    #: token positions the backend computed for this request (its share of shared context
    #: prefixes plus its continuation positions, `runners.scoring.token_accounting`); None when the
    #: backend does not say
    computed_tokens: int | None = None


@dataclass(frozen=True)
class GenerateRequest:
    context: tuple[int, ...]
    max_tokens: int = 32
    #: 0 is greedy decoding; above 0, sampling with `top_p` and `seed`
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = 0
    #: generation stops after the first of these strings, which is kept in the text
    stop: tuple[str, ...] = ()
    #: generation also stops at these token ids (EOS and the chat template's end of turn:
    #: `runners.scoring.tokenize.end_of_turn_ids`), which are not part of the text
    stop_token_ids: tuple[int, ...] = ()
    #: the chat messages `context` was rendered from (empty for a plain prompt): what a server's chat API
    #: takes instead of token ids (`runners.backends.openai`); in-process backends read `context` only
    messages: tuple[Mapping[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if not self.context:
            raise ValueError("a generation request needs a non-empty context")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be positive, got {self.max_tokens}")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ValueError(f"need temperature >= 0 and 0 < top_p <= 1, got {self.temperature}, {self.top_p}")


@dataclass(frozen=True)
class Generation:
    text: str
    token_ids: tuple[int, ...]
    #: "stop" (a stop string or the end-of-sequence token) or "length" (max_tokens reached)
    finish_reason: str


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """`text` up to and including the first stop string, and whether one was found."""
    ends = [text.find(s) + len(s) for s in stop if s and s in text]
    return (text[: min(ends)], True) if ends else (text, False)
