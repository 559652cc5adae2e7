"""Per-row prompt scores (`runners.vllm_rows`) against a fake engine that computes them by brute force.

The fake engine is a known table of logits (one random vector per prefix) and does what
vLLM's `prompt_logprob_token_ids` does: row r of a prompt scores its ids as the next token
after the prompt's first `start + r + 1` tokens, -inf in the padding, and the last prompt row
(the dummy token's) is not scored. Number items built with `number_row_queries`, scored by
it, parsed and assembled, must give the number distribution that a direct product of
token probabilities gives, and the same `ScoreResult` as today's per-prefix path
(`runners.vllm_logprobs`) fed by the same table, on three tokenizer shapes.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from runners.backend import ScoreRequest
from runners.distributions import build_number_trie, number_distribution, number_request
from runners.vllm_logprobs import assemble, plan_queries
from runners.vllm_rows import (
    DUMMY_TOKEN,
    RowQuery,
    assemble_number_result,
    number_row_queries,
    parse_row_scores,
    row_params_fields,
)

VOCAB = 420


def _logsoftmax(prefix: Sequence[int]) -> np.ndarray:
    """The fake model: next-token log-probabilities after `prefix` (a fixed random vector per prefix)."""
    seed = zlib.crc32(np.asarray(prefix, dtype=np.int64).tobytes())
    logits = np.random.default_rng(seed).normal(0.0, 2.0, VOCAB)
    return logits - np.logaddexp.reduce(logits)


def _fake_engine(fields: dict[str, Any]) -> np.ndarray:
    """`prompt_token_id_logprobs` as vLLM computes it (float32, -inf in the padding)."""
    prompt, start, table = (
        fields["prompt_token_ids"],
        fields["prompt_logprob_start"],
        fields["prompt_logprob_token_ids"],
    )
    assert table.shape[0] == len(prompt) - 1 - start  # the last prompt row is not scored
    out = np.full(table.shape, -np.inf, dtype=np.float32)
    for r in range(table.shape[0]):
        row = _logsoftmax(prompt[: start + r + 1])
        used = table[r] >= 0
        out[r, used] = row[table[r, used]]
    return out


def _digit_by_digit() -> tuple[dict[int, list[tuple[int, ...]]], tuple[int, ...]]:
    """Qwen2 / Llama-2 shape: one token per digit (ids 10..19), a separate space token (5)."""
    paths = {n: [tuple(10 + int(d) for d in str(n)), (5, *(10 + int(d) for d in str(n)))] for n in range(101)}
    return paths, tuple(range(10, 20))


def _one_token_numbers() -> tuple[dict[int, list[tuple[int, ...]]], tuple[int, ...]]:
    """Llama-3 shape: one token per number (ids 100..200) after an optional space token (5), more digit tokens."""
    paths = {n: [(100 + n,), (5, 100 + n)] for n in range(101)}
    return paths, (*range(100, 201), *range(300, 400))


def _spaced_tokens() -> tuple[dict[int, list[tuple[int, ...]]], tuple[int, ...]]:
    """GPT-2 shape: `57` and ` 57` are single tokens; 100 is `10` + `0`."""
    paths = {n: [(100 + n,), (250 + n,)] for n in range(100)}
    paths[100] = [(110, 100), (260, 100)]
    return paths, tuple(range(100, 200))


SHAPES = {"digit-by-digit": _digit_by_digit, "one-token": _one_token_numbers, "spaced": _spaced_tokens}
CONTEXT = (1, 7, 3, 9, 2, 8)


def _brute_force_raw(paths: dict[int, list[tuple[int, ...]]], digits: Sequence[int]) -> np.ndarray:
    """P(n) before renormalising: each form's token probabilities times the mass that ends it."""
    raw = np.zeros(len(paths))
    for n, forms in paths.items():
        for form in forms:
            path = sum(_logsoftmax(CONTEXT + form[:k])[form[k]] for k in range(len(form)))
            after = np.exp(_logsoftmax(CONTEXT + form)[list(digits)]).sum()
            raw[n] += np.exp(path) * (1 - after)
    return raw


def _score_rows(queries: Sequence[RowQuery]) -> list[list[np.ndarray]]:
    return [parse_row_scores(q, _fake_engine(row_params_fields(q))) for q in queries]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_number_rows_round_trip_equals_brute_force_and_the_per_prefix_path(shape: str) -> None:
    paths, digits = SHAPES[shape]()
    trie = build_number_trie(paths)
    request = number_request(CONTEXT, trie, digits)
    queries = number_row_queries(request)
    assert [q.ids for q in queries] == [CONTEXT + leaf for leaf in trie.leaves]  # one prompt per leaf
    result = assemble_number_result(request, queries, _score_rows(queries))

    got = number_distribution(trie, result)
    want = _brute_force_raw(paths, digits)
    # float32 scores, as the engine returns them
    np.testing.assert_allclose(got.raw, want, rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(got.probs, want / want.sum(), rtol=1e-5, atol=1e-9)
    assert np.ptp(want) > 1e-3 * want.max()  # the numbers do differ: a row read in the wrong place would show

    # today's path (one prompt per trie node) fed by the same table gives the same ScoreResult
    old = plan_queries([request])
    for q in old:
        if q.prompt_logprobs:
            q.token_logprobs = np.array([_logsoftmax(q.ids[:p])[q.ids[p]] for p in range(q.start, len(q.ids))])
        if q.candidates:
            q.next_logprobs = _logsoftmax(q.ids)[list(q.candidates)]
    (ref,) = assemble([request], old)
    np.testing.assert_allclose(result.next_logprobs, ref.next_logprobs, rtol=1e-6)
    assert len(result.continuations) == len(ref.continuations)
    for a, b in zip(result.continuations, ref.continuations, strict=True):
        np.testing.assert_allclose(a.token_logprobs, b.token_logprobs, rtol=1e-6)
        assert a.next_logprobs.shape == b.next_logprobs.shape == (a.n_tokens, len(digits))
        np.testing.assert_allclose(a.next_logprobs, b.next_logprobs, rtol=1e-6)


def test_number_row_queries_ask_each_node_and_the_candidates_once_per_row() -> None:
    request = ScoreRequest((4, 5, 6), ((7, 8), (9,), (7, 3)), (8, 3, 20))
    queries = number_row_queries(request)
    assert [(q.ids, q.start) for q in queries] == [((4, 5, 6, 7, 8), 2), ((4, 5, 6, 9), 2), ((4, 5, 6, 7, 3), 2)]
    first = (7, 9, 8, 3, 20)  # every leaf's first token, then the candidates, without repeats
    assert queries[0].row_ids == (first, (8, 3, 20), (8, 3, 20))  # the node 8 is a candidate: asked once
    assert queries[1].row_ids == (first, (8, 3, 20))
    assert queries[2].row_ids == (first, (3, 8, 20), (8, 3, 20))
    with pytest.raises(ValueError, match=r"continuations .* and candidates"):
        number_row_queries(ScoreRequest((4,), ((7,),)))


def test_row_params_fields_append_a_dummy_and_pad_with_minus_one() -> None:
    query = RowQuery((11, 12, 13, 14), 1, ((5, 6, 7), (), (8,)))
    fields = row_params_fields(query)
    assert fields["prompt_token_ids"] == [11, 12, 13, 14, DUMMY_TOKEN]
    assert fields["prompt_logprob_start"] == 1
    table = fields["prompt_logprob_token_ids"]
    assert table.dtype.kind == "i" and table.tolist() == [[5, 6, 7], [-1, -1, -1], [8, -1, -1]]
    # rows with nothing to score still make a non-empty array (the engine refuses an empty one)
    empty = RowQuery((11, 12), 0, ((), ()))
    assert row_params_fields(empty)["prompt_logprob_token_ids"].tolist() == [[-1], [-1]]
    assert parse_row_scores(empty, np.full((2, 1), -np.inf)) == [pytest.approx([]), pytest.approx([])]


def test_parse_row_scores_reads_each_row_in_order() -> None:
    query = RowQuery((11, 12, 13, 14), 1, ((5, 6, 7), (), (8,)))
    scores = _fake_engine(row_params_fields(query))
    got = parse_row_scores(query, scores)
    want = [_logsoftmax((11, 12))[[5, 6, 7]], np.empty(0), _logsoftmax((11, 12, 13, 14))[[8]]]
    assert [g.dtype for g in got] == [np.float64] * 3
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6)


@pytest.mark.parametrize(
    "returned, message",
    [
        (None, "no prompt_token_id_logprobs"),
        (np.zeros((2, 3)), r"shape \(2, 3\), the request asked for \(3, 3\)"),
        (np.zeros((3, 4)), r"shape \(3, 4\)"),
        (np.zeros(9), r"shape \(9,\)"),
        (np.array([[0.0, np.nan, -1.0], [-np.inf] * 3, [-2.0, -np.inf, -np.inf]]), "1 invalid scores .* token id 6"),
        (np.array([[0.0, -1.0, -1.0], [-np.inf] * 3, [np.inf, -np.inf, -np.inf]]), "first at row 2, token id 8"),
    ],
)
def test_parse_row_scores_rejects_what_was_not_asked(returned: Any, message: str) -> None:
    query = RowQuery((11, 12, 13, 14), 1, ((5, 6, 7), (), (8,)))
    with pytest.raises(ValueError, match=message):
        parse_row_scores(query, returned)
    # NaN in the padding is not read, so it is no error
    padded = np.array([[-1.0, -1.0, -1.0], [np.nan] * 3, [-2.0, np.nan, np.nan]])
    assert parse_row_scores(query, padded)[2].tolist() == [-2.0]


@pytest.mark.parametrize(
    "ids, start, rows, message",
    [
        ((), 0, (), "non-empty prompt"),
        ((1, 2), 2, (), "outside the prompt"),
        ((1, 2), -1, ((), (), ()), "outside the prompt"),
        ((1, 2, 3), 1, ((),), "1 rows of ids for 2 prompt rows"),
        ((1, 2), 1, ((-1,),), "non-negative"),
    ],
)
def test_row_query_checks_its_shape(ids: tuple, start: int, rows: tuple, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RowQuery(ids, start, rows)


def test_assemble_refuses_queries_of_another_request() -> None:
    paths, digits = _digit_by_digit()
    request = number_request(CONTEXT, build_number_trie(paths), digits)
    queries = number_row_queries(request)
    scores = _score_rows(queries)
    with pytest.raises(ValueError, match="queries and"):
        assemble_number_result(request, queries[1:], scores[1:])
    swapped = [queries[1], queries[0], *queries[2:]]
    with pytest.raises(ValueError, match="not this request's number_row_queries"):
        assemble_number_result(request, swapped, scores)
    other = ScoreRequest(CONTEXT, request.continuations, (*digits, 30))  # a candidate no row asked for
    with pytest.raises(ValueError, match="did not ask for token ids \\[30\\]"):
        assemble_number_result(other, queries, scores)
