"""The transformers backend (runners.backends.hf.backend) against full forward passes, on SmolLM2-135M.

The backend runs each context once and reuses its KV cache for every continuation; the
reference runs every context + continuation from scratch. They must give the same
log-probabilities up to float32 round-off.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from runners.backends.protocol import Backend
from runners.exchange import ScoreRequest
from runners.scoring.tokenize import encode_context, encode_continuations, render_chat
from runners_fixtures import full_forward_logprobs, require_extra

#: the float32 forward passes of a 30-layer model differ between batch shapes by up to ~1.5e-5
#: nats per token (measured); sums over an option's tokens stay within the same bound
LOGPROB_ATOL = 5e-5


@pytest.fixture(scope="module")
def backend(smollm2_model: Any) -> Any:
    from runners.backends.hf.backend import HFBackend

    return HFBackend(smollm2_model, model_id="smollm2-test")


@pytest.fixture(scope="module")
def requests_(smollm2_tokenizer: Any) -> list[ScoreRequest]:
    tok = smollm2_tokenizer
    cases = [
        ("### Statement:\nMaria passed the exam.\n### Response:\n", ["She studied hard.", "She was lucky.", "Easy."]),
        ("Hi", [" there", " you all, how are you", "!"]),
        (render_chat(tok, [{"role": "user", "content": "What is 2+2?"}]), ["4", "Four.", "The answer is 4."]),
        ("The capital of France is", [" Paris"]),
    ]
    digits = tuple(tok.convert_tokens_to_ids(list("0123456789")))
    out = []
    for k, (context, conts) in enumerate(cases):
        ctx, ids = encode_continuations(tok, context, conts)
        out.append(ScoreRequest(ctx, tuple(ids), digits if k % 2 == 0 else ()))
    out.append(ScoreRequest(encode_context(tok, "Pick a number:"), (), digits))  # candidates only
    return out


def reference(model: Any, request: ScoreRequest) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """(token logprobs, candidate logprobs after each token, candidates after the context) from full passes."""
    n = len(request.context)
    seqs = [list(request.context) + list(c) for c in request.continuations] or [list(request.context)]
    rows = full_forward_logprobs(model, seqs, [list(range(n - 1, len(s))) for s in seqs])
    cands = list(request.candidates)
    tokens = [
        row[np.arange(len(c)), list(c)]
        for row, c in zip(rows[: len(request.continuations)], request.continuations, strict=True)
    ]
    after = [row[1:, cands] for row in rows[: len(request.continuations)]]
    return tokens, after, rows[0][0, cands]


@pytest.mark.slow
def test_backend_satisfies_the_protocol(backend: Any) -> None:
    assert isinstance(backend, Backend)
    assert backend.name == "hf" and backend.model_id == "smollm2-test" and backend.dtype == "float32"


@pytest.mark.slow
def test_kv_reuse_matches_full_forward_passes(backend: Any, smollm2_model: Any, requests_: list) -> None:
    results = backend.score(requests_)
    assert len(results) == len(requests_)
    worst = 0.0
    for request, result in zip(requests_, results, strict=True):
        tokens, after, first = reference(smollm2_model, request)
        assert result.context_tokens == len(request.context)
        assert result.next_logprobs.shape == (len(request.candidates),)
        worst = max(worst, float(np.max(np.abs(result.next_logprobs - first), initial=0)))
        for cont, score, ref_tokens, ref_after in zip(
            request.continuations, result.continuations, tokens, after, strict=True
        ):
            assert score.n_tokens == len(cont)
            assert score.next_logprobs.shape == (len(cont), len(request.candidates))
            worst = max(worst, float(np.max(np.abs(score.token_logprobs - ref_tokens))))
            assert score.logprob == pytest.approx(float(ref_tokens.sum()), abs=LOGPROB_ATOL)
            if request.candidates:
                worst = max(worst, float(np.max(np.abs(score.next_logprobs - ref_after))))
    assert worst < LOGPROB_ATOL, worst


@pytest.mark.slow
def test_results_do_not_depend_on_batching_or_order(smollm2_model: Any, requests_: list) -> None:
    from runners.backends.hf.backend import HFBackend

    baseline = HFBackend(smollm2_model, max_batch_tokens=1, max_logit_rows=1).score(requests_)  # one row per pass
    shuffled = list(range(len(requests_)))
    random.Random(0).shuffle(shuffled)
    batched = HFBackend(smollm2_model, max_batch_tokens=100_000).score([requests_[i] for i in shuffled])
    for k, i in enumerate(shuffled):
        a, b = baseline[i], batched[k]
        np.testing.assert_allclose(a.next_logprobs, b.next_logprobs, atol=LOGPROB_ATOL)
        for x, y in zip(a.continuations, b.continuations, strict=True):
            np.testing.assert_allclose(x.token_logprobs, y.token_logprobs, atol=LOGPROB_ATOL)
            np.testing.assert_allclose(x.next_logprobs, y.next_logprobs, atol=LOGPROB_ATOL)


def test_requests_are_validated() -> None:
    with pytest.raises(ValueError, match="non-empty context"):
        ScoreRequest((), ((1,),))
    with pytest.raises(ValueError, match="non-empty"):
        ScoreRequest((1,), ((),))
    with pytest.raises(ValueError, match="continuations, candidates or both"):
        ScoreRequest((1,))


def test_log_softmax_reads_float64_values_without_a_float64_copy() -> None:
    require_extra("hf")
    import torch

    from runners.backends.hf.logprobs import LogSoftmax

    torch.manual_seed(0)
    logits = torch.randn(3, 5, 49152) * 4
    exact = torch.log_softmax(logits.double(), dim=-1)
    lp = LogSoftmax(logits)
    rows, tokens = torch.arange(4), torch.tensor([1, 2, 3, 4])
    assert (lp[2, rows, tokens] - exact[2, rows, tokens]).abs().max() < 1e-6
    assert (lp[0, :3][:, [5, 6]] - exact[0, :3][:, [5, 6]]).abs().max() < 1e-6
    last = LogSoftmax(logits[:, -1, :])
    assert (last[1, [7, 9]] - exact[1, -1, [7, 9]]).abs().max() < 1e-6
    # torch's own float32 log-softmax is further off (which is why it is not used)
    assert (torch.log_softmax(logits, dim=-1).double() - exact).abs().max() > 1e-6


@pytest.mark.slow
def test_a_shared_prefix_runs_once_and_changes_nothing(smollm2_model: Any, smollm2_tokenizer: Any) -> None:
    """Contexts sharing an instruction: the prefix pass gives full-forward log-probabilities."""
    from runners.backends.hf.backend import HFBackend

    tok = smollm2_tokenizer
    head = "### Instruction:\nRead the statement and pick the most likely cause.\n### Statement:\n"
    stems = ["Maria passed the exam.", "Wei lost the race after months of training.", "Ali won."]
    options = [" Effort", " Ability", " The task was easy or hard", " Luck"]
    digits = tuple(tok.convert_tokens_to_ids(list("0123456789")))
    requests = []
    for k, stem in enumerate(stems):
        ctx, ids = encode_continuations(tok, f"{head}{stem}\n### Response:", options)
        requests.append(ScoreRequest(ctx, tuple(ids), digits if k == 1 else ()))
    calls: list[int] = []
    hook = smollm2_model.register_forward_pre_hook(
        lambda _m, _a, kw: calls.append(kw["input_ids"].numel()), with_kwargs=True
    )
    try:
        shared = HFBackend(smollm2_model, max_batch_tokens=100_000).score(requests)
        shared_tokens = list(calls)
        calls.clear()
        plain = HFBackend(smollm2_model, max_batch_tokens=100_000, min_shared_prefix=0).score(requests)
    finally:
        hook.remove()
    prefix = len(encode_context(tok, head)) - 1  # the tokens all three contexts share, at least
    assert len(shared_tokens) == len(calls) + 1  # one pass more: the prefix, once
    assert sum(shared_tokens) <= sum(calls) - 2 * prefix  # its tokens are not run once per context
    for request, a, b in zip(requests, shared, plain, strict=True):
        tokens, after, first = reference(smollm2_model, request)
        np.testing.assert_allclose(a.next_logprobs, first, atol=LOGPROB_ATOL)
        np.testing.assert_allclose(a.next_logprobs, b.next_logprobs, atol=LOGPROB_ATOL)
        for x, y, ref_tokens, ref_after in zip(a.continuations, b.continuations, tokens, after, strict=True):
            np.testing.assert_allclose(x.token_logprobs, ref_tokens, atol=LOGPROB_ATOL)
            np.testing.assert_allclose(x.token_logprobs, y.token_logprobs, atol=LOGPROB_ATOL)
            if request.candidates:
                np.testing.assert_allclose(x.next_logprobs, ref_after, atol=LOGPROB_ATOL)


# ----------------------------------------------------------------------------- number items: one packed pass

NUMBER_CONTEXTS = (
    "Rate how intense the anger was, from 0 (none) to 100 (extreme).\nIntensity:",
    "Rate how intense the joy was, from 0 (none) to 100 (extreme).\nIntensity:",
    "On a scale from 0 to 100, how sure are you?\nAnswer:",
)


def _number_item(tok: Any, context: str, lo: int = 0, hi: int = 100) -> tuple[Any, Any, Any]:
    """(token paths, trie, request) of a number item over lo..hi, tokenised as `run_items` does."""
    from runners.rows import cached_digit_start_ids
    from runners.scoring.distributions import build_number_trie, number_request
    from runners.scoring.tokenize import number_paths

    ctx, paths = number_paths(tok, context, lo, hi)
    trie = build_number_trie(paths)
    return paths, trie, number_request(ctx, trie, cached_digit_start_ids(tok))


def _bruteforce_number_raw(model: Any, request: ScoreRequest, paths: dict) -> np.ndarray:
    """P(n) before renormalising, every surface form from its own full forward pass of context + form."""
    ctx = list(request.context)
    forms = [(n, form) for n in sorted(paths) for form in paths[n]]
    seqs = [ctx + list(form) for _, form in forms]
    rows = full_forward_logprobs(model, seqs, [[len(ctx) - 1 + k for k in range(len(f) + 1)] for _, f in forms])
    lo = min(paths)
    raw = np.zeros(max(paths) - lo + 1)
    digits = list(request.candidates)
    for (n, form), row in zip(forms, rows, strict=True):
        path_lp = sum(row[k, t] for k, t in enumerate(form))
        raw[n - lo] += np.exp(path_lp) * max(0.0, 1.0 - np.exp(row[len(form), digits]).sum())
    return raw


@pytest.mark.slow
def test_a_number_trie_runs_in_one_packed_pass_and_equals_brute_force(
    smollm2_model: Any, smollm2_tokenizer: Any
) -> None:
    """Every node of every item's 0-100 trie in one row per item; P(n) as from full passes (fp32: 1e-6)."""
    from runners.backends.hf.backend import HFBackend
    from runners.scoring.distributions import number_distribution
    from runners.scoring.token_accounting import continuation_nodes

    items = [_number_item(smollm2_tokenizer, c) for c in NUMBER_CONTEXTS]
    widths: list[tuple[int, int]] = []
    hook = smollm2_model.register_forward_pre_hook(
        lambda _m, _a, kw: widths.append(tuple(kw["input_ids"].shape)), with_kwargs=True
    )
    try:
        results = HFBackend(smollm2_model, max_batch_tokens=100_000, max_logit_rows=100_000).score(
            [r for _, _, r in items]
        )
    finally:
        hook.remove()
    nodes = [len(continuation_nodes(r.continuations, True)) for _, _, r in items]
    assert nodes[0] > 150  # both surface forms of 0..100, one token per trie node
    assert widths[-1] == (len(items), max(nodes))  # one pass, one row per item, all its nodes
    assert sum(w[1] for w in widths[:-1]) < sum(len(r.context) for _, _, r in items)  # contexts shared a prefix
    # against full passes: the item that reuses the first one's prefix, and the unrelated one (the first is the
    # same computation as its sibling; its brute force was a third of this test's time)
    for (paths, trie, request), result in list(zip(items, results, strict=True))[1:]:
        dist = number_distribution(trie, result)
        want = _bruteforce_number_raw(smollm2_model, request, paths)
        np.testing.assert_allclose(dist.raw, want, atol=1e-6, rtol=0)  # P(n) itself
        assert dist.probs.sum() == pytest.approx(1.0, abs=1e-12)
        # renormalised over the valid mass, P(n)'s round-off is divided by it (and the mass's own added)
        np.testing.assert_allclose(dist.probs, want / want.sum(), atol=2e-6 / want.sum(), rtol=0)


@pytest.mark.slow
def test_an_item_gets_the_same_numbers_in_any_batch(smollm2_model: Any, smollm2_tokenizer: Any) -> None:
    """The same number item alone, beside items sharing its prefix, beside unrelated ones, under tight budgets."""
    from runners.backends.hf.backend import HFBackend
    from runners.scoring.distributions import number_distribution

    tok = smollm2_tokenizer
    paths, trie, request = _number_item(tok, NUMBER_CONTEXTS[0])
    _, _, sibling = _number_item(tok, NUMBER_CONTEXTS[1])
    _, _, other = _number_item(tok, NUMBER_CONTEXTS[2])
    _, _, short = _number_item(tok, "Pick a number from 0 to 100:")
    choice = ScoreRequest(*encode_continuations(tok, NUMBER_CONTEXTS[0][:-11], [" yes", " no, never"])[:1], ((5, 6),))
    batches = [
        ([request], {}),
        ([sibling, request, other], {}),
        ([other, short, request, choice, sibling], {}),
        ([short, request, sibling], {"max_batch_tokens": 300, "max_logit_rows": 50}),
        ([request, sibling], {"min_shared_prefix": 0}),
    ]
    got = []
    for batch, options in batches:
        results = HFBackend(smollm2_model, **options).score(batch)
        got.append(number_distribution(trie, results[batch.index(request)]))
    for dist in got[1:]:
        np.testing.assert_allclose(dist.raw, got[0].raw, atol=1e-6, rtol=0)
        np.testing.assert_allclose(dist.probs, got[0].probs, atol=2e-6 / got[0].valid_mass, rtol=0)
    np.testing.assert_allclose(got[0].raw, _bruteforce_number_raw(smollm2_model, request, paths), atol=1e-6, rtol=0)


@pytest.mark.slow
def test_reported_computed_tokens_are_the_token_accounting_counts(
    smollm2_model: Any, smollm2_tokenizer: Any, requests_: list
) -> None:
    """The backend's per-request `computed_tokens` are exactly what `runners.scoring.token_accounting` plans."""
    from runners.backends.hf.accounting import hf_token_counts
    from runners.backends.hf.backend import HFBackend

    numbers = [_number_item(smollm2_tokenizer, c)[2] for c in NUMBER_CONTEXTS]
    requests = [*numbers, *requests_]
    for options in ({}, {"max_batch_tokens": 400}, {"min_shared_prefix": 0}, {"min_shared_prefix": 1}):
        backend = HFBackend(smollm2_model, **options)
        results = backend.score(requests)
        counts = hf_token_counts(
            requests,
            max_batch_tokens=backend.max_batch_tokens,
            items_per_call=None,
            min_shared_prefix=backend.min_shared_prefix,
        )
        assert [r.computed_tokens for r in results] == list(counts.per_request)
        assert sum(r.computed_tokens for r in results) == counts.computed_tokens


@pytest.mark.slow
def test_first_token_mode_reads_the_next_token_distribution(smollm2_model: Any, smollm2_tokenizer: Any) -> None:
    """0-9 with SmolLM2 (one token per digit): P(n) = the digits' next-token probabilities, renormalised."""
    from runners.backends.hf.backend import HFBackend
    from runners.rows import run_items
    from runners.scoring.settings import ScoringSettings
    from runners.scoring.tokenize import number_paths

    prompt = "Question: How many dollars out of 9 will Ana pass?\nAnswer: Ana will pass $"
    item = {"id": "n", "task": "number", "prompt": prompt, "messages": None, "number_min": 0, "number_max": 9}
    backend = HFBackend(smollm2_model)
    (row,) = run_items([item], backend, smollm2_tokenizer, False, settings=ScoringSettings(number_mode="first-token"))
    ctx, paths = number_paths(smollm2_tokenizer, prompt, 0, 9)
    (after,) = full_forward_logprobs(smollm2_model, [list(ctx)], [[len(ctx) - 1]])
    mass = np.array([sum(np.exp(after[0, f[0]]) for f in paths[n] if len(f) == 1) for n in range(10)])
    # float32: the cached forward pass and the full one differ by ~1e-6 in a probability
    np.testing.assert_allclose(row["number_probs"], mass / mass.sum(), atol=1e-5)
    assert row["valid_mass"] == pytest.approx(mass.sum(), abs=1e-5)
    assert row["computed_tokens"] == len(ctx)  # nothing fed after the context
    exact = ScoringSettings()
    assert ScoringSettings(number_mode="first-token").key() != exact.key()
    assert "number_mode" not in exact.key()  # keys of exact runs made before the mode existed stay valid
    with pytest.raises(ValueError, match="the number 10 has no one-token form"):
        run_items(
            [{**item, "number_max": 100}],
            backend,
            smollm2_tokenizer,
            False,
            settings=ScoringSettings(number_mode="first-token"),
        )
