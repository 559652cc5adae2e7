"""The backend contract (`runners.backends.protocol.Backend`: `score`, and `generate`), one suite run on every backend.

Like cappr's `_base.py`: each backend is handed the same requests, and every number it returns is
checked against an oracle that does not use it: the fake backend's and the scripted server's known
functions of the tokens, and for the real model (SmolLM2-135M-Instruct, hf and vLLM) full forward
passes from the first token (`runners_fixtures.full_forward_logprobs`, no cache, no prefix tree).
The contract: one result per request, in order; a log-probability per continuation token and a row
of candidate log-probabilities after the context and after each continuation token; the context's
length; numbers that do not depend on which other requests share the call; a `Hardware` with a
JSON-able `manifest()`; a name the registry knows. Generation, on the backends that decode a model (hf,
vLLM): greedy tokens equal to argmax decoding by those full passes, up to `max_tokens`, a stop
token id (left out of the text) or the first stop string (kept, the text cut after it), with the
finish reason each gives. vLLM's engine is the slow tier's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

import numpy as np
import pytest

from runners.backends import backend_spec
from runners.backends.protocol import Hardware
from runners.backends.vllm.spec import VllmOptions
from runners.exchange import ScoreRequest
from runners_fixtures import full_forward_logprobs, load_folder, load_tokenizer, require_extra

#: every shape a request takes: continuations and candidates, continuations only, candidates only
REQUESTS = (
    ScoreRequest((5, 9, 2), ((4, 11), (6,), (8, 1, 3)), (10, 12, 14)),
    ScoreRequest((7, 3), ((2,), (30, 31))),
    ScoreRequest((1, 2, 3, 4), candidates=(20, 21)),
)

#: log P(token | prefix) for each token, the oracle's answer
Oracle = Callable[[tuple[int, ...], tuple[int, ...]], np.ndarray]


def _fake() -> Iterator[tuple[Any, Oracle, float]]:
    from fake_backend import FakeBackend, token_logprob

    yield FakeBackend("m"), lambda _prefix, tokens: np.array([token_logprob(t) for t in tokens]), 0.0


def _served() -> Iterator[tuple[Any, Oracle, float]]:
    require_extra("openai")
    from openai_fake_server import FakeServer, fake_logprob, load_served

    with FakeServer() as server:
        yield load_served(server), lambda prefix, tokens: np.array([fake_logprob(prefix, t) for t in tokens]), 0.0


def _model_oracle(model: Any) -> Oracle:
    @cache
    def row(prefix: tuple[int, ...]) -> np.ndarray:
        return full_forward_logprobs(model, [list(prefix)], [[len(prefix) - 1]])[0][0]

    return lambda prefix, tokens: row(tuple(prefix))[list(tokens)]


def _hf(model: Any) -> Iterator[tuple[Any, Oracle, float]]:
    from runners.backends.hf.backend import HFBackend

    yield HFBackend(model, model_id="m", tokenizer=load_tokenizer()), _model_oracle(model), 2e-4


def _vllm(model: Any) -> Iterator[tuple[Any, Oracle, float]]:
    require_extra("vllm")
    from runners.backends.vllm.backend import VLLMBackend

    backend = VLLMBackend.from_pretrained(
        str(load_folder()), VllmOptions(enforce_eager=True), dtype="float32", max_model_len=512
    )
    yield backend, _model_oracle(model), 1e-3


@pytest.fixture(scope="module", params=["fake", "openai", "hf", pytest.param("vllm", marks=pytest.mark.slow)])
def contract(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Oracle, float]]:
    """(a backend, its oracle, the tolerance of its numbers against the oracle's), one per module; closed after."""
    if request.param in ("hf", "vllm"):
        pytest.importorskip("torch")
        model = request.getfixturevalue("smollm2_model")
        made = _hf(model) if request.param == "hf" else _vllm(model)
    else:
        made = _fake() if request.param == "fake" else _served()
    backend, oracle, atol = next(made)
    try:
        yield backend, oracle, atol
    finally:
        backend.close()
        made.close()


def _expected(request: ScoreRequest, oracle: Oracle) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """What a backend must return for `request`, from the oracle alone."""
    context, candidates = request.context, request.candidates
    first = oracle(context, candidates) if candidates else np.zeros(0)
    conts = []
    for cont in request.continuations:
        tokens = np.array([oracle(context + cont[:k], (cont[k],))[0] for k in range(len(cont))])
        rows = np.array([oracle(context + cont[: k + 1], candidates) for k in range(len(cont))]).reshape(
            len(cont), len(candidates)
        )
        conts.append((tokens, rows))
    return first, conts


def test_a_backend_scores_every_request_as_its_oracle_does(contract: tuple[Any, Oracle, float]) -> None:
    backend, oracle, atol = contract
    results = backend.score(list(REQUESTS))
    assert len(results) == len(REQUESTS)
    for request, result in zip(REQUESTS, results, strict=True):
        assert result.context_tokens == len(request.context)
        assert len(result.continuations) == len(request.continuations)
        first, conts = _expected(request, oracle)
        assert result.next_logprobs.shape == (len(request.candidates),)
        np.testing.assert_allclose(result.next_logprobs, first, rtol=0, atol=atol)
        for cont, score, (tokens, rows) in zip(request.continuations, result.continuations, conts, strict=True):
            assert score.token_logprobs.shape == (len(cont),)
            assert score.next_logprobs.shape == (len(cont), len(request.candidates))
            np.testing.assert_allclose(score.token_logprobs, tokens, rtol=0, atol=atol)
            np.testing.assert_allclose(score.next_logprobs, rows, rtol=0, atol=atol)
            assert np.isfinite(score.token_logprobs).all() and (score.token_logprobs <= 0).all()


def test_a_request_scores_the_same_alone_as_beside_others(contract: tuple[Any, Oracle, float]) -> None:
    backend, _, atol = contract
    together = backend.score(list(REQUESTS))
    alone = [backend.score([request])[0] for request in reversed(REQUESTS)][::-1]
    for a, b in zip(together, alone, strict=True):
        np.testing.assert_allclose(a.next_logprobs, b.next_logprobs, rtol=0, atol=atol)
        for x, y in zip(a.continuations, b.continuations, strict=True):
            np.testing.assert_allclose(x.token_logprobs, y.token_logprobs, rtol=0, atol=atol)
            np.testing.assert_allclose(x.next_logprobs, y.next_logprobs, rtol=0, atol=atol)


def test_a_backend_says_what_it_ran_on_under_a_registered_name(contract: tuple[Any, Oracle, float]) -> None:
    backend, _, _ = contract
    assert backend_spec(backend.name).name == backend.name
    hardware = backend.hardware()
    assert isinstance(hardware, Hardware)  # what a sweep's price reads
    record = hardware.manifest()
    assert isinstance(record, dict) and json.dumps(record)  # recorded in every result folder's manifest


#: contexts to continue greedily, and how many tokens at the most
GENERATE_CONTEXTS = ("The capital of France is", "Once upon a time, a small cat")
GENERATE_TOKENS = 8


def _greedy(model: Any, context: tuple[int, ...], max_tokens: int, stop_ids: tuple[int, ...] = ()) -> list[int]:
    """Argmax decoding by full forward passes from the first token (no cache), stopping before a stop id."""
    tokens: list[int] = []
    while len(tokens) < max_tokens:
        prefix = [*context, *tokens]
        (row,) = full_forward_logprobs(model, [prefix], [[len(prefix) - 1]])[0:1]
        token = int(np.argmax(row[0]))
        if token in stop_ids:
            break
        tokens.append(token)
    return tokens


def test_greedy_generation_is_argmax_decoding_with_its_stops(contract: tuple[Any, Oracle, float], request) -> None:
    """One call of three shapes per context: to `max_tokens` ("length"), to a stop token id ("stop", the id left out)
    and to a stop string ("stop", the text cut after its first occurrence); all against the model's own argmax."""
    from runners.exchange import GenerateRequest

    backend = contract[0]
    if getattr(backend, "name", None) not in ("hf", "vllm"):
        pytest.skip(
            f"{backend.name} decodes no model to compare with (the server's scripted answers: test_openai_backend)"
        )
    model, tokenizer = request.getfixturevalue("smollm2_model"), load_tokenizer()
    asked, expected = [], []
    for text in GENERATE_CONTEXTS:
        context = tuple(tokenizer(text, add_special_tokens=False)["input_ids"])
        greedy = _greedy(model, context, GENERATE_TOKENS)
        full = tokenizer.decode(greedy)
        asked.append(GenerateRequest(context, max_tokens=GENERATE_TOKENS))
        expected.append((full, greedy, "length"))
        stop_id = greedy[3]  # the 4th greedy token, as a stop id: generation ends before its first occurrence
        upto = greedy[: greedy.index(stop_id)]
        asked.append(GenerateRequest(context, max_tokens=GENERATE_TOKENS, stop_token_ids=(stop_id,)))
        expected.append((tokenizer.decode(upto), upto, "stop"))
        stop = full.split()[1][:3]  # a string the greedy text holds, after its first word
        assert stop in full[1:], (stop, full)
        cut = full[: full.index(stop) + len(stop)]
        asked.append(GenerateRequest(context, max_tokens=GENERATE_TOKENS, stop=(stop,)))
        expected.append((cut, None, "stop"))
    answers = backend.generate(asked)
    assert len(answers) == len(asked)
    for question, answer, (text, tokens, finish) in zip(asked, answers, expected, strict=True):
        assert (answer.text, answer.finish_reason) == (text, finish), question
        if tokens is not None:
            assert list(answer.token_ids) == tokens, question
        else:  # a stop string ends in the token that completes it: a prefix of the greedy tokens, decoding past it
            greedy = expected[asked.index(question) - 2][1]
            assert list(answer.token_ids) == greedy[: len(answer.token_ids)]
            assert tokenizer.decode(list(answer.token_ids)).startswith(text), question
