"""What the vllm and openai backends share (runners.backends.prompt_logprobs): output parsers and query planning.

The planner is checked against a fake engine whose log-probabilities are a known function
of (prefix, token): whatever queries it plans, the assembled results must equal that
function evaluated directly, request by request.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import pytest

from runners.backends.prompt_logprobs.queries import assemble, candidate_groups, plan_queries
from runners.backends.prompt_logprobs.read import candidate_logprobs, continuation_logprobs
from runners.exchange import ScoreRequest


@dataclass
class FakeLogprob:
    logprob: float


def true_logprob(prefix: tuple[int, ...], token: int) -> float:
    """A deterministic stand-in for log P(token | prefix)."""
    return -((sum(prefix) * 7 + len(prefix) * 3 + token * 11) % 97) / 10.0


def run_fake_engine(queries) -> None:
    """Fill queries the way VLLMBackend.score does, from vLLM-shaped outputs of `true_logprob`."""
    for q in queries:
        prompt_lp = [None] + [
            {q.ids[i]: FakeLogprob(true_logprob(q.ids[:i], q.ids[i])), 999: FakeLogprob(-0.1)}
            for i in range(1, len(q.ids))
        ]
        sample = {c: FakeLogprob(true_logprob(q.ids, c)) for c in q.candidates}
        if q.prompt_logprobs:
            q.token_logprobs = continuation_logprobs(prompt_lp, q.ids, len(q.ids) - q.start)
        if q.candidates:
            q.next_logprobs = candidate_logprobs(sample, q.candidates)


def test_continuation_logprobs_reads_the_prompt_tokens_at_the_end() -> None:
    ids = [5, 6, 7, 8]
    entries = [None, {6: FakeLogprob(-1.0)}, {7: FakeLogprob(-2.0), 1: FakeLogprob(-0.5)}, {8: -3.0}]
    np.testing.assert_array_equal(continuation_logprobs(entries, ids, 2), [-2.0, -3.0])
    np.testing.assert_array_equal(continuation_logprobs(entries, ids, 3), [-1.0, -2.0, -3.0])


@pytest.mark.parametrize(
    ("entries", "n", "message"),
    [
        ([None, {6: -1.0}, {1: -2.0}, {8: -3.0}], 2, "position 2 lacks the prompt token 7"),
        ([None, {6: -1.0}, {7: -2.0}], 2, "3 positions, the prompt 4 tokens"),
        (None, 2, "no prompt_logprobs"),
        ([None, {6: -1.0}, {7: -2.0}, {8: -3.0}], 4, "the first has no context"),
        ([None, {6: -1.0}, {7: -2.0}, {8: -3.0}], 0, "cannot score the last 0"),
    ],
)
def test_continuation_logprobs_errors(entries, n: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        continuation_logprobs(entries, [5, 6, 7, 8], n)


def test_candidate_logprobs() -> None:
    sample = {3: FakeLogprob(-0.2), 4: FakeLogprob(-1.5), 9: FakeLogprob(-7.0)}
    np.testing.assert_array_equal(candidate_logprobs(sample, [9, 3]), [-7.0, -0.2])
    with pytest.raises(ValueError, match=r"lack candidate token ids \[5\]"):
        candidate_logprobs(sample, [3, 5])
    with pytest.raises(ValueError, match="no sample logprobs"):
        candidate_logprobs(None, [3])


def test_candidate_groups() -> None:
    groups = candidate_groups(tuple(range(300)))
    assert [len(g) for g in groups] == [128, 128, 44] and sum(groups, ()) == tuple(range(300))
    assert candidate_groups(()) == [()]
    assert candidate_groups((5, 6)) == [(5, 6)]


def _requests(rng: random.Random) -> list[ScoreRequest]:
    shared = tuple(rng.randrange(50) for _ in range(6))
    reqs = []
    for k in range(12):
        context = shared + tuple(rng.randrange(50) for _ in range(rng.randrange(1, 4)))
        conts = tuple(tuple(rng.randrange(50) for _ in range(rng.randrange(1, 4))) for _ in range(rng.randrange(0, 4)))
        candidates = tuple(rng.sample(range(50), 3)) if (k % 3 or not conts) else ()
        reqs.append(ScoreRequest(context, conts, candidates))
    # the same context twice with different candidates, and a continuation that is another's prefix
    reqs.append(ScoreRequest((1, 2, 3), ((4,), (4, 5)), (7, 8)))
    reqs.append(ScoreRequest((1, 2, 3), ((4, 5, 6),), (8, 9)))
    reqs.append(ScoreRequest((1, 2), ((3, 4),)))  # the same prompt ids as above, split elsewhere
    return reqs


def test_plan_and_assemble_equal_direct_computation() -> None:
    reqs = _requests(random.Random(3))
    queries = plan_queries(reqs)
    assert [q.ids for q in queries] == sorted({q.ids for q in queries})  # distinct and sorted
    run_fake_engine(queries)
    for r, result in zip(reqs, assemble(reqs, queries), strict=True):
        assert result.context_tokens == len(r.context)
        want_after = [true_logprob(r.context, c) for c in r.candidates]
        np.testing.assert_allclose(result.next_logprobs, want_after)
        for cont, got in zip(r.continuations, result.continuations, strict=True):
            want = [true_logprob(r.context + cont[:k], cont[k]) for k in range(len(cont))]
            np.testing.assert_allclose(got.token_logprobs, want)
            want_next = [[true_logprob(r.context + cont[: k + 1], c) for c in r.candidates] for k in range(len(cont))]
            np.testing.assert_allclose(got.next_logprobs, np.array(want_next).reshape(len(cont), len(r.candidates)))


def test_plan_asks_each_prompt_once() -> None:
    reqs = [ScoreRequest((1, 2), ((3,), (3, 4)), (5,)), ScoreRequest((1, 2), ((3, 4),), (6,))]
    queries = {q.ids: q for q in plan_queries(reqs)}
    assert set(queries) == {(1, 2), (1, 2, 3), (1, 2, 3, 4)}
    assert queries[(1, 2, 3, 4)].prompt_logprobs and queries[(1, 2, 3)].prompt_logprobs
    assert not queries[(1, 2)].prompt_logprobs
    assert queries[(1, 2)].candidates == (5, 6)  # both requests' candidates, asked once
