"""Choice and number scoring (runners.scoring.distributions) against independent computations.

Part 1 needs nothing but numpy: a toy language model whose next-token distribution is a
seeded function of the prefix, with a digit-by-digit vocabulary plus one two-digit token
(Llama-3 style), checked against brute-force enumeration.

Part 2 runs SmolLM2-135M through the transformers backend (KV cache reuse, trie leaves)
and compares with full forward passes of every context + option / number string.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from runners.backends.protocol import Backend, GeneratingBackend, Hardware
from runners.exchange import ContinuationScore, ScoreRequest, ScoreResult
from runners.scoring.distributions import (
    build_number_trie,
    letter_choice_probs,
    letter_distribution,
    letter_request,
    number_distribution,
    number_request,
    sentence_choice_probs,
)
from runners.scoring.token_accounting import DEFAULT_MAX_BATCH_TOKENS
from runners_fixtures import (
    full_forward_logprobs,
    reference_number_raw,
    reference_option_logprobs,
)

# ---------------------------------------------------------------------------- pure numpy part

#: toy vocabulary: ids 0-9 are the digits, then a space, a word, an end token and `12`
TOY_TEXT = [*"0123456789", " ", "a", "<eos>", "12"]
TOY_DIGITS = (*range(10), 13)  # the tokens that start with a digit


def toy_dist(prefix: Sequence[int]) -> np.ndarray:
    """The toy model's next-token distribution after `prefix`: a seeded function of the prefix."""
    seed = int.from_bytes(hashlib.sha256(repr(tuple(prefix)).encode()).digest()[:8], "little")
    logits = np.random.default_rng(seed).normal(0, 2, len(TOY_TEXT))
    return np.exp(logits) / np.exp(logits).sum()


class ToyBackend:
    """A `Backend` over `toy_dist`: the contract the real backends meet, computed naively."""

    name = "toy"
    model_id = "toy"
    model_revision = None
    dtype = None
    device = None
    max_batch_tokens = None

    def hardware(self) -> Hardware:
        return Hardware()

    def close(self) -> None:
        pass

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        results = []
        for r in requests:
            conts = []
            for cont in r.continuations:
                prefixes = [(*r.context, *cont[:k]) for k in range(len(cont) + 1)]
                tokens = np.log([toy_dist(prefixes[k])[t] for k, t in enumerate(cont)])
                after = np.log([toy_dist(p)[list(r.candidates)] for p in prefixes[1:]]).reshape(len(cont), -1)
                conts.append(ContinuationScore(tokens, after))
            results.append(ScoreResult(tuple(conts), np.log(toy_dist(r.context)[list(r.candidates)]), len(r.context)))
        return results


def toy_paths(lo: int, hi: int) -> dict[int, list[tuple[int, ...]]]:
    """Digit-by-digit forms with and without a leading space; 12 also as its own token."""
    paths = {}
    for n in range(lo, hi + 1):
        digits = tuple(int(c) for c in str(n))
        paths[n] = [digits, (10, *digits)] + ([(13,), (10, 13)] if n == 12 else [])
    return paths


def brute_force_number_probs(context: tuple[int, ...], paths: dict) -> np.ndarray:
    """P(n): every form's probability times the mass of the tokens that do not start with a digit."""
    ends = [i for i in range(len(TOY_TEXT)) if not TOY_TEXT[i][0].isdigit()]
    raw = []
    for n in sorted(paths):
        total = 0.0
        for form in paths[n]:
            p = np.prod([toy_dist((*context, *form[:k]))[t] for k, t in enumerate(form)])
            total += p * toy_dist((*context, *form))[ends].sum()
        raw.append(total)
    return np.array(raw)


def test_sentence_choice_probs() -> None:
    lp, n = [-3.0, -5.0, -4.0], [3, 10, 2]
    expected = np.exp(lp) / np.exp(lp).sum()
    np.testing.assert_allclose(sentence_choice_probs(lp, n), expected, rtol=1e-12)
    mean = np.array(lp) / np.array(n)
    np.testing.assert_allclose(sentence_choice_probs(lp, n, length_normalize=True), np.exp(mean) / np.exp(mean).sum())
    # large negative sums do not underflow
    np.testing.assert_allclose(sentence_choice_probs([-1000.0, -1001.0], [5, 5]), [1 / (1 + np.e**-1), 1 / (1 + np.e)])
    with pytest.raises(ValueError, match="positive"):
        sentence_choice_probs([-1.0], [0], length_normalize=True)


def test_letter_probs_sum_both_forms_and_report_valid_mass() -> None:
    dist = letter_choice_probs([np.log([0.2, 0.1]), np.log([0.05]), np.log([0.1, 0.05])])
    assert dist.valid_mass == pytest.approx(0.5)
    np.testing.assert_allclose(dist.probs, [0.6, 0.1, 0.3])
    context, label_ids = (11, 10), [(0, 1), (2,), (3, 4)]
    result = ToyBackend().score([letter_request(context, label_ids)])[0]
    p = toy_dist(context)
    mass = np.array([p[0] + p[1], p[2], p[3] + p[4]])
    dist = letter_distribution(label_ids, result)
    assert dist.valid_mass == pytest.approx(mass.sum())
    np.testing.assert_allclose(dist.probs, mass / mass.sum())


def test_trie_leaves_cover_every_form_once() -> None:
    trie = build_number_trie({0: [(0,)], 1: [(1,)], 10: [(1, 0)], 12: [(1, 2), (13,)], 100: [(1, 0, 0)]})
    assert trie.leaves == ((0,), (1, 0, 0), (1, 2), (13,))
    for form, leaf in zip(trie.forms, trie.leaf_of, strict=True):
        assert trie.leaves[leaf][: len(form)] == form
    assert trie.depth == 3
    with pytest.raises(ValueError, match="no token form"):
        build_number_trie({1: []})


@pytest.mark.parametrize(("lo", "hi"), [(0, 10), (0, 100), (5, 12)])
def test_number_distribution_equals_brute_force_on_a_toy_model(lo: int, hi: int) -> None:
    context = (11, 11, 10)
    paths = toy_paths(lo, hi)
    trie = build_number_trie(paths)
    result = ToyBackend().score([number_request(context, trie, TOY_DIGITS)])[0]
    dist = number_distribution(trie, result)
    raw = brute_force_number_probs(context, paths)
    np.testing.assert_allclose(dist.raw, raw, rtol=1e-10, atol=1e-15)
    assert dist.valid_mass == pytest.approx(raw.sum(), rel=1e-10)
    assert 0 < dist.valid_mass < 1
    assert dist.probs.sum() == pytest.approx(1.0)
    np.testing.assert_array_equal(dist.values, np.arange(lo, hi + 1))
    assert dist.expected_value == pytest.approx(float(np.dot(np.arange(lo, hi + 1), raw / raw.sum())))
    assert dist.argmax_value == lo + int(np.argmax(raw))


# ---------------------------------------------------------------------------- SmolLM2 part

CHOICE_CASES = [
    (
        "Respond by choosing one of the provided options as the reason to the statement.\n\n### Statement:\n"
        "Maria passed the exam.\n\nOptions:\nA. She worked hard.\nB. She is gifted.\nC. The exam was easy.\n"
        "D. She was lucky.\n### Response:\n",
        ["She worked hard.", "She is gifted.", "The exam was easy.", "She was lucky."],
    ),
    (None, ["True", "False"]),  # chat form, filled in below
]


@pytest.fixture(scope="module")
def backend(smollm2_model: Any) -> Any:
    from runners.backends.hf.backend import HFBackend

    return HFBackend(smollm2_model)


@pytest.mark.slow
def test_the_product_backends_meet_the_protocol(backend: Any) -> None:
    """Both real backends have every member the drivers use (`Backend`, and `generate`).

    The hf backend is a real one over the test model; the vLLM backend is made over a stand-in
    for `vllm.LLM` (nothing starts an engine), so its members are the class's own.
    """
    from runners.backends.vllm.backend import VLLMBackend

    vllm = VLLMBackend(object(), model_id="m")
    for made in (backend, vllm):
        assert isinstance(made, Backend) and isinstance(made, GeneratingBackend), type(made).__name__
    assert (backend.dtype, backend.device, backend.max_batch_tokens) == ("float32", "cpu", DEFAULT_MAX_BATCH_TOKENS)
    recorded = ["dtype", "device", "max_batch_tokens", "max_logit_rows", "torch", "threads"]
    assert list(backend.hardware().manifest()) == recorded
    assert (vllm.dtype, vllm.device, vllm.max_batch_tokens) == ("float32", None, None)


@pytest.mark.slow
def test_sentence_choice_probs_match_full_passes(backend: Any, smollm2_model: Any, smollm2_tokenizer: Any) -> None:
    from runners.scoring.tokenize import encode_continuations, render_chat

    tok = smollm2_tokenizer
    chat = render_chat(tok, [{"role": "user", "content": "True or False: Mr. Nguyen is Asian.\nAnswer:"}])
    cases = [(context or chat, options) for context, options in CHOICE_CASES]
    worst = 0.0
    for context, options in cases:
        ctx, conts = encode_continuations(tok, context, options)
        result = backend.score([ScoreRequest(ctx, tuple(conts))])[0]
        # slow reference: context + option from scratch, one option at a time
        ref_lp, counts = reference_option_logprobs(smollm2_model, tok, context, options)
        assert [c.n_tokens for c in result.continuations] == counts
        for normalize in (False, True):
            ref = np.exp(np.array(ref_lp) / (np.array(counts) if normalize else 1))
            got = sentence_choice_probs([c.logprob for c in result.continuations], counts, length_normalize=normalize)
            worst = max(worst, float(np.max(np.abs(got - ref / ref.sum()))))
    assert worst < 1e-5, worst


@pytest.mark.slow
def test_letter_probs_match_a_full_pass(backend: Any, smollm2_model: Any, smollm2_tokenizer: Any) -> None:
    from runners.scoring.tokenize import label_token_ids

    tok = smollm2_tokenizer
    context = CHOICE_CASES[0][0]
    ctx, label_ids = label_token_ids(tok, context, list("ABCD"))
    dist = letter_distribution(label_ids, backend.score([letter_request(ctx, label_ids)])[0])
    row = full_forward_logprobs(smollm2_model, [list(ctx)], [[len(ctx) - 1]], rows=1)[0][0]
    mass = np.array([np.exp(row[list(ids)]).sum() for ids in label_ids])
    np.testing.assert_allclose(dist.probs, mass / mass.sum(), atol=1e-5)
    assert dist.valid_mass == pytest.approx(mass.sum(), abs=1e-5)


@pytest.mark.parametrize(
    ("chat", "hi"),
    [
        (True, 10),
        (False, 100),
    ],
)
@pytest.mark.slow
def test_number_probs_match_brute_force(
    backend: Any, smollm2_model: Any, smollm2_tokenizer: Any, chat: bool, hi: int
) -> None:
    from runners.scoring.tokenize import digit_start_ids, number_paths, render_chat

    tok = smollm2_tokenizer
    task = f"Rate the intensity of the emotion from 0 to {hi}. Only give the number.\nEmotion intensity:"
    context = render_chat(tok, [{"role": "user", "content": task}]) if chat else "Intensity (0-100):"
    ctx, paths = number_paths(tok, context, 0, hi)
    trie = build_number_trie(paths)
    dist = number_distribution(trie, backend.score([number_request(ctx, trie, digit_start_ids(tok))])[0])

    # brute force: every full string (context + form) from scratch; P(end) summed over non-digit tokens
    ref = reference_number_raw(smollm2_model, tok, ctx, paths)
    raw = np.array([ref[n] for n in range(hi + 1)])

    assert dist.probs.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(dist.probs, raw / raw.sum(), atol=1e-5)
    np.testing.assert_allclose(dist.raw, raw, atol=1e-6)
    assert 0 < dist.valid_mass <= 1 and dist.valid_mass == pytest.approx(raw.sum(), rel=1e-4)
    assert dist.argmax_value == int(np.argmax(raw))
    # float32 logits through the KV cache against full passes: ~1e-5 per probability, 1e-3 on a 0-100 mean
    assert dist.expected_value == pytest.approx(float(np.dot(np.arange(hi + 1), raw / raw.sum())), abs=1e-3)
    assert len(trie.leaves) < len(trie.forms)  # numbers that prefix others are read off their leaves
