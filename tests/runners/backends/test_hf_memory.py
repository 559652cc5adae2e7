"""Memory discipline of the transformers backend (runners.backends.hf.backend), checked on the CPU with weak references.

On a GPU, memory that stays referenced is memory the next attempt cannot use. Two rules are
checked by watching the tensors a real forward pass makes (SmolLM2) through weak references:

- after an out-of-memory error, nothing from the failed attempt is alive when the retry runs
  (the retry happens outside the `except` block, whose traceback would hold every frame);
- no earlier pass's cache or logits are alive when the next pass's cache is built from the pool.

Out-of-memory errors are simulated: torch's own `OutOfMemoryError`, and the cuBLAS / allocator
failures that arrive as a plain `RuntimeError`.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from runners.exchange import ScoreRequest
from runners.scoring.tokenize import encode_continuations

pytestmark = pytest.mark.slow  # every test runs SmolLM2: the slow tier (pytest -m slow)
LOGPROB_ATOL = 5e-5  # as tests/runners/backends/test_hf.py: batch shapes change float32 sums by ~1e-5


class _Spy:
    """The model, called through a wrapper that keeps weak references to what each pass returns.

    `fail_at` names the call (1-based) that raises `error()` after computing its output, so that
    output is exactly what a failed attempt's frames hold. The error is made at the raise and
    not kept: a kept exception would keep its traceback, and with it the frames under test.
    """

    def __init__(self, model: Any, fail_at: int | None = None, error: Callable[[], Exception] | None = None) -> None:
        self._model = model
        self.fail_at, self.error = fail_at, error
        self.calls = 0
        self.watched: list[list[weakref.ref]] = []  # per call: the tensors it returned
        self.alive_at_call: list[int] = []  # per call: how many watched tensors of failed calls were alive

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def eval(self) -> _Spy:
        return self

    def _failed_tensors_alive(self) -> int:
        if self.fail_at is None or self.calls < self.fail_at:
            return 0
        refs = [r for k in range(self.fail_at) for r in self.watched[k]]  # the failed attempt's passes
        return sum(r() is not None for r in refs)

    def __call__(self, **kwargs: Any) -> Any:
        self.alive_at_call.append(self._failed_tensors_alive())
        self.calls += 1
        out = self._model(**kwargs)
        tensors = [out.logits]
        for layer in out.past_key_values.layers:
            tensors += [layer.keys, layer.values]
        self.watched.append([weakref.ref(t) for t in tensors])
        if self.calls == self.fail_at:
            raise self.error()
        return out


@pytest.fixture(scope="module")
def requests_(smollm2_tokenizer: Any) -> list[ScoreRequest]:
    tok = smollm2_tokenizer
    cases = [
        ("Maria passed the exam because", [" she studied hard.", " she was lucky today.", " it was easy."]),
        ("The weather today is", [" sunny and warm", " cold", " rainy, with wind from the west"]),
        ("My favourite colour is", [" blue", " dark green, like a forest", " red"]),
    ]
    digits = tuple(tok.convert_tokens_to_ids(list("0123456789")))
    out = []
    for context, conts in cases:
        ctx, ids = encode_continuations(tok, context, conts)
        out.append(ScoreRequest(ctx, tuple(ids), digits))
    return out


def _assert_same(got: list, want: list) -> None:
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a.next_logprobs, b.next_logprobs, atol=LOGPROB_ATOL)
        for x, y in zip(a.continuations, b.continuations, strict=True):
            np.testing.assert_allclose(x.token_logprobs, y.token_logprobs, atol=LOGPROB_ATOL)
            np.testing.assert_allclose(x.next_logprobs, y.next_logprobs, atol=LOGPROB_ATOL)


def _errors() -> list[Callable[[], Exception]]:
    import torch

    return [
        lambda: torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (simulated)"),
        lambda: RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)` (simulated)"),
        lambda: RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: not enough memory"),
    ]


@pytest.mark.parametrize("which", [0, 1, 2], ids=["OutOfMemoryError", "cuBLAS", "allocator"])
def test_nothing_of_a_failed_attempt_is_alive_at_the_retry(
    smollm2_model: Any, requests_: list[ScoreRequest], which: int
) -> None:
    from runners.backends.hf.backend import HFBackend

    reference = HFBackend(smollm2_model, model_id="m").score(requests_)
    # call 1 is the context pass; call 2, the first continuation chunk, fails
    spy = _Spy(smollm2_model, fail_at=2, error=_errors()[which])
    backend = HFBackend(spy, model_id="m", max_logit_rows=64)
    results = backend.score(requests_)
    assert spy.calls > 2 and backend.max_batch_tokens < 8192  # it did back off and retry
    assert sum(r() is not None for k in range(2) for r in spy.watched[k]) == 0
    assert spy.alive_at_call[2:] == [0] * (spy.calls - 2), spy.alive_at_call  # not one tensor at any retry pass
    _assert_same(results, reference)


def test_other_runtime_errors_are_not_taken_for_out_of_memory(
    smollm2_model: Any, requests_: list[ScoreRequest]
) -> None:
    from runners.backends.hf.backend import HFBackend

    spy = _Spy(smollm2_model, fail_at=1, error=lambda: RuntimeError("shape mismatch: [3, 8] vs [3, 9]"))
    backend = HFBackend(spy, model_id="m")
    with pytest.raises(RuntimeError, match="shape mismatch"):
        backend.score(requests_)
    assert spy.calls == 1 and backend.max_batch_tokens == 8192  # no retry, no halving


def test_no_earlier_chunk_is_alive_when_the_next_is_built(
    smollm2_model: Any, requests_: list[ScoreRequest], monkeypatch: pytest.MonkeyPatch
) -> None:
    from runners.backends.hf import backend as hf
    from runners.backends.hf import tree_pass as hf_tree_pass

    spy = _Spy(smollm2_model)
    built: list[int] = []  # per pass cache built from the pool: tensors of earlier passes still alive
    cache = hf_tree_pass.KVPool.cache

    def watched_cache(self: Any, index: Any, new_tokens: int) -> Any:
        # every pass builds its cache from the pool; what earlier passes returned (their caches with
        # the appended keys and values, their logits) must be gone by then: the pool holds copies
        earlier = [r for refs in spy.watched for r in refs]
        built.append(sum(r() is not None for r in earlier))
        return cache(self, index, new_tokens)

    monkeypatch.setattr(hf_tree_pass.KVPool, "cache", watched_cache)
    backend = hf.HFBackend(spy, model_id="m", max_logit_rows=12)  # a few rows per chunk: many chunks
    results = backend.score(requests_)
    assert len(built) >= 4, built  # the requests took several chunks
    assert built == [0] * len(built), built
    _assert_same(results, hf.HFBackend(smollm2_model, model_id="m").score(requests_))
