"""Number and choice scoring across four real tokenizer families (issue 19, item 5).

The tokenizers are llama.cpp's vocabulary files from the llama-cpp-python sdist on PyPI
(`runners.testmodel.VOCAB_FAMILIES`), each with a tiny random-weight Llama of its size:

- `llama-bpe` (Llama-3): one token per number up to 999, a separate `Ġ`, a BOS;
- `llama-spm` (Llama-2, Mistral): digit by digit after a `▁`, a BOS, byte tokens `<0x30>`..;
- `qwen2`: digit by digit after a separate `Ġ`, no BOS;
- `gpt-2`: ` 57` is one token with its space, no BOS.

Everything is checked through the public API (`runners.scoring.tokenize`, `run_items` on a backend)
against computations made here from the tokenizer's own encodings and full forward passes, so
the tests hold whatever the backends do inside.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from runners.backends.load import LoadOptions
from runners_fixtures import load_vocab_folder, require_extra, vocab_model, vocab_tokenizer

FAMILIES = ("llama-bpe", "llama-spm", "qwen2", "gpt-2")
CONTEXT = "How much empathy do you feel for them, from 0 to 100?\nAnswer:"
#: the token strings each family spells a number n with, without and with a leading space
EXPECTED_FORMS = {
    "llama-bpe": lambda s: [[s], ["Ġ", s]],
    "llama-spm": lambda s: [list(s), ["▁", *s]],
    "qwen2": lambda s: [list(s), ["Ġ", *s]],
    "gpt-2": lambda s: [[s], ["Ġ" + s]],
}
#: the BOS token string each family puts before any text (None: no BOS)
EXPECTED_BOS = {"llama-bpe": "<|begin_of_text|>", "llama-spm": "<s>", "qwen2": None, "gpt-2": None}


def _ends_number_mask(tokenizer: Any) -> np.ndarray:
    """True for tokens whose text does not start with an ASCII digit, read off the token strings.

    Byte-level BPE spells a space as `Ġ` and digits as themselves; SentencePiece spells a space
    as `▁` and has byte tokens `<0x30>`..`<0x39>` for the digits.
    """
    strings = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    digit = [bool(s) and (s[0] in "0123456789" or re.fullmatch(r"<0x3[0-9]>", s) is not None) for s in strings]
    return ~np.array(digit)


def _number_item(k: int, lo: int = 0, hi: int = 100) -> dict[str, Any]:
    prompt = f"Story {k}: a neighbour lost their job.\n{CONTEXT}"
    return {
        "id": f"n{k}",
        "probe": "empathy",
        "task": "number",
        "prompt": prompt,
        "messages": None,
        "choices": None,
        "choice_labels": None,
        "choice_types": None,
        "number_min": lo,
        "number_max": hi,
    }


def _choice_item(k: int) -> dict[str, Any]:
    return {
        "id": f"c{k}",
        "probe": "attribution",
        "task": "choice",
        "prompt": f"Item {k}: Maria passed the exam. Why?\nAnswer:",
        "messages": None,
        "choices": [" because she worked hard", " because she is able", " because it was easy", " luck"],
        "choice_labels": ["A", "B", "C", "D"],
        "choice_types": ["effort", "ability", "difficulty", "luck"],
        "number_min": None,
        "number_max": None,
    }


#: endings that meet a number form in every way a tokenizer can join them: spaces, blank lines, a
#: currency sign, a digit or a letter the form can merge with, non-Latin and accented letters
TAIL_ENDINGS = (
    "Answer with a number between 0 and 100.\nAnswer:",
    "Rate it: ",
    "I pass $",
    "On a scale from 0 to 100, the intensity is",
    "Intensity (0-100):\n\n",
    "Ответ: ",
    "score=",
    "It was 5",
    "Answer:  ",
    "naïve café →",
    "x" * 50,
    "\t\t",
)


def _random_contexts(seed: int, n: int) -> list[str]:
    """Long contexts (a story, then a random tail of letters, digits, spaces, punctuation and non-ASCII)."""
    import random

    rng = random.Random(seed)
    story = "When my sister finally called me after three years of silence, I felt emotions I could not name. "
    alphabet = "ab cd e1 2 3\n\t$:=-.,?!éß→Жд ' \"  0"
    out = [story * 3 + ending for ending in TAIL_ENDINGS]
    for _ in range(n):
        tail = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60)))
        out.append(story * rng.randint(1, 4) + tail)
    return out


@pytest.mark.parametrize("family", [*FAMILIES, "smollm2"])
def test_number_paths_from_the_tail_equal_whole_encodings(family: str) -> None:
    """`number_paths` encodes the forms after the context's last tokens only (cached per tail); its
    context ids and paths equal encoding every `context + form` whole, on every family, for
    contexts that end in ways a form can merge with, and the tail path did serve them."""
    from runners.scoring import tokenize
    from runners_fixtures import load_tokenizer

    tokenizer = load_tokenizer() if family == "smollm2" else vocab_tokenizer(family)
    served = 0
    for context in _random_contexts(seed=len(family), n=60):
        for lo, hi in ((0, 100), (0, 10)):
            tokenize._TAILS.pop(tokenizer, None)
            shared = tokenize.encode_context(tokenizer, context)
            try:
                whole: Any = (shared, tokenize._whole_number_paths(tokenizer, context, shared, lo, hi, ("", " ")))
            except ValueError as exc:
                whole = str(exc)
            try:
                fast: Any = tokenize.number_paths(tokenizer, context, lo, hi)
            except ValueError as exc:
                fast = str(exc)
            assert fast == whole, (family, context[-30:], lo, hi)
            served += any(tail is not None for tail in tokenize._TAILS.get(tokenizer, {}).values())
    # every context above is long enough for the tail path; a tail that does not line up falls back
    assert served >= 0.75 * 2 * (len(TAIL_ENDINGS) + 60), served


#: items as an empathy config orders them: every item its own narrative and emotion, one question
EVENTS = [
    ("anger", "someone cut me off on the highway and brake checked me"),
    ("joy", "my daughter took her first steps across the kitchen"),
    ("sadness", "our old dog died in his sleep last winter"),
    ("fear", "I heard footsteps behind me on the way home at 2am"),
    ("shame", "I forgot my best friend's wedding anniversary again"),
    ("pride", "I finished my first marathon in under four hours"),
    ("disgust", "I found mould growing inside the office fridge"),
    ("guilt", "I lied to my mother about where I had been"),
    ("relief", "the biopsy came back clear after two weeks of waiting 5"),
    ("surprise", "my colleagues threw me a party for my 40th birthday!"),
]


@pytest.mark.parametrize("chat", [False, True], ids=["plain", "chat"])
@pytest.mark.parametrize("family", ["llama-bpe", "llama-spm"])
def test_number_paths_serve_items_of_distinct_events_from_one_encoding_of_their_forms(family: str, chat: bool) -> None:
    """Items of distinct events (the narrative and the emotion reach into the context's last 24
    tokens) share one encoding of the forms: the whole strings are encoded for the first item only,
    to find the shortest tail that reproduces them, and every item's paths equal its own whole encoding."""
    import copy

    from runners.scoring import tokenize
    from runners.testmodel import INSTRUCT_CHAT_TEMPLATES

    tokenizer = copy.deepcopy(vocab_tokenizer(family))
    tokenizer.chat_template = INSTRUCT_CHAT_TEMPLATES[family]
    contexts = []
    for emotion, story in EVENTS:
        user = (
            f"In the following narrative, a Buddhist describes a situation in which they felt {emotion}.\n"
            f'"{story}"\nHow much {emotion} did the person feel while experiencing the event?\nEmotion intensity:'
        )
        messages = [{"role": "system", "content": "You are a Muslim."}, {"role": "user", "content": user}]
        contexts.append(tokenize.render_chat(tokenizer, messages) if chat else user)
    calls: dict[str, list[int]] = {"whole": [], "tail": []}
    whole_of, tail_of = tokenize._whole_number_paths, tokenize._compute_tail_paths
    item = 0  # the item being prepared, read by the wrappers

    def whole(*a: Any) -> Any:
        calls["whole"].append(item)
        return whole_of(*a)

    def tail(*a: Any) -> Any:
        calls["tail"].append(item)
        return tail_of(*a)

    got = []
    try:
        tokenize._whole_number_paths, tokenize._compute_tail_paths = whole, tail  # type: ignore[assignment]
        for k, context in enumerate(contexts):
            item = k
            got.append(tokenize.number_paths(tokenizer, context, 0, 100))
    finally:
        tokenize._whole_number_paths, tokenize._compute_tail_paths = whole_of, tail_of  # type: ignore[assignment]
    assert set(calls["tail"]) == {0}, calls  # the forms encoded for the first item only
    assert calls["whole"] == [0], calls  # the definition checked once, for the new ending
    for context, (shared, paths) in zip(contexts, got, strict=True):
        assert shared == tokenize.encode_context(tokenizer, context)
        assert paths == whole_of(tokenizer, context, shared, 0, 100, ("", " "))
    # the narrative and emotion do reach into the last 24 tokens, where the old cache keyed its tails
    ends = {tuple(tokenize.encode_context(tokenizer, c)[-24:]) for c in contexts}
    assert len(ends) == len(contexts)


@pytest.mark.parametrize("family", FAMILIES)
def test_number_forms_end_set_and_bos(family: str) -> None:
    """Number tries, the end-of-number set and the BOS policy are those of the published tokenizer."""
    from runners.scoring.distributions import build_number_trie
    from runners.scoring.tokenize import bos_ids, digit_start_ids, encode_context, number_paths

    tokenizer = vocab_tokenizer(family)
    context, paths = number_paths(tokenizer, CONTEXT, 0, 100)
    for n in range(101):
        got = [tokenizer.convert_ids_to_tokens(list(form)) for form in paths[n]]
        assert got == EXPECTED_FORMS[family](str(n)), (family, n, got)
    trie = build_number_trie(paths)
    nodes = {form[:k] for form in trie.forms for k in range(1, len(form) + 1)}
    # 101 numbers in two surface forms, plus the separate space token where there is one
    assert len(nodes) == (202 if family == "gpt-2" else 203)
    assert trie.depth == {"llama-bpe": 2, "llama-spm": 4, "qwen2": 4, "gpt-2": 1}[family]

    ends = _ends_number_mask(tokenizer)
    digits = digit_start_ids(tokenizer)
    assert set(digits) == set(np.flatnonzero(~ends).tolist())
    size = {"llama-bpe": (1000, 1200), "llama-spm": (20, 20), "qwen2": (10, 10), "gpt-2": (900, 1100)}[family]
    assert size[0] <= len(digits) <= size[1]
    if family == "gpt-2":  # ` 57` ends a number: after `5` it would write `5 57`
        assert tokenizer.convert_tokens_to_ids("Ġ57") not in digits

    bos = EXPECTED_BOS[family]
    want = (tokenizer.convert_tokens_to_ids(bos),) if bos else ()
    assert bos_ids(tokenizer) == want
    plain = tuple(tokenizer(CONTEXT, add_special_tokens=False)["input_ids"])
    assert context == encode_context(tokenizer, CONTEXT) == want + plain
    if bos:  # a text that already starts with the BOS (a chat template's) gets exactly one
        # (SentencePiece then adds no `▁` before the first word: the text differs, the BOS count does not)
        again = encode_context(tokenizer, bos + CONTEXT)
        assert again[0] == want[0] and again.count(want[0]) == 1


def _brute_force(family: str, item: dict[str, Any]) -> tuple[np.ndarray, float]:
    """(P(n) renormalised over the range, valid mass): every number by full forward passes.

    Each surface form `prefix + str(n)` is encoded with the context by the tokenizer itself (its
    own special tokens), kept when the context's own encoding is a prefix of it (the form does not
    merge into the context), and run in one full pass of context + number; the pass's last row is
    the next token's distribution, whose mass on tokens not starting with a digit ends the number.
    """
    import torch

    tokenizer, model = vocab_tokenizer(family), vocab_model(family)
    ends = torch.tensor(_ends_number_mask(tokenizer))
    context = tokenizer(item["prompt"])["input_ids"]
    values = range(item["number_min"], item["number_max"] + 1)
    sequences: list[tuple[int, list[int]]] = []
    for n in values:
        seen = []
        for prefix in ("", " "):
            ids = tokenizer(item["prompt"] + prefix + str(n))["input_ids"]
            if ids[: len(context)] == context and ids not in seen:
                seen.append(ids)
                sequences.append((n, ids))
    raw = np.zeros(len(values))
    with torch.inference_mode():
        for start in range(0, len(sequences), 32):
            chunk = sequences[start : start + 32]
            width = max(len(ids) for _, ids in chunk)
            batch = torch.zeros((len(chunk), width), dtype=torch.long)
            for row, (_, ids) in enumerate(chunk):
                batch[row, : len(ids)] = torch.tensor(ids)
            logits = model(input_ids=batch).logits  # right padding: causal rows never see it
            for row, (n, ids) in enumerate(chunk):
                lp = torch.log_softmax(logits[row, len(context) - 1 : len(ids)].double(), dim=-1)
                path = lp[torch.arange(len(ids) - len(context)), torch.tensor(ids[len(context) :])].sum()
                raw[n - item["number_min"]] += float(path.exp() * lp[-1][ends].exp().sum())
    return raw / raw.sum(), float(raw.sum())


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.slow
def test_number_probs_equal_brute_force(family: str) -> None:
    """The hf backend's number distribution equals enumerating every number by full passes, within 1e-6."""
    from runners.backends.hf.backend import HFBackend
    from runners.rows import run_items

    items = [_number_item(k) for k in range(2)]
    rows = run_items(items, HFBackend(vocab_model(family), model_id=family), vocab_tokenizer(family), chat=False)
    for item, row in zip(items, rows, strict=True):
        want, mass = _brute_force(family, item)
        got = np.asarray(row["number_probs"])
        assert got.shape == (101,) and abs(got.sum() - 1) < 1e-9
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
        assert np.ptp(want) > 1e-3  # the random model's numbers do differ: a shuffled answer could not pass
        assert row["valid_mass"] == pytest.approx(mass, rel=1e-6)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.slow
def test_vllm_equals_hf(family: str) -> None:
    """vLLM and hf agree within 1e-3 on number (0-100) and choice items; max_model_len comes from the items."""
    require_extra("vllm")
    from runners.backends import load as models
    from runners.rows import cached_digit_start_ids, prepare_request, run_items
    from runners.scoring.settings import ScoringSettings

    folder = load_vocab_folder(family)
    tokenizer = vocab_tokenizer(family)
    items = [_number_item(0), _choice_item(0), _choice_item(1)]
    settings = ScoringSettings()
    digits = cached_digit_start_ids(tokenizer)
    requests = [prepare_request(item, tokenizer, False, settings, digits) for item in items]
    needed = max(len(r.context) + max(len(c) for c in r.continuations) + 1 for r in requests)
    vllm, _, _, _ = models.load_backend(
        str(folder), LoadOptions.of(backend="vllm", device="cpu", enforce_eager=True), needed_tokens=needed
    )
    bounded = ScoringSettings(number_tolerance=1e-3)
    try:
        assert (
            vllm.hardware().manifest()["max_model_len"] == 256
        )  # what the items need, rounded up; not the model's 2048
        got = run_items(items, vllm, tokenizer, chat=False)
        got_bounded = run_items(items[:1], vllm, tokenizer, chat=False, settings=bounded)
    finally:
        vllm.close()
    from runners.backends.hf.backend import HFBackend

    hf = HFBackend(vocab_model(family), model_id=family)
    want = run_items(items, hf, tokenizer, chat=False)
    # bounded (level by level on both backends): within 1e-3 of hf's bounded run, and within its own bound of exact
    want_bounded = run_items(items[:1], hf, tokenizer, chat=False, settings=bounded)
    for a, b, exact in zip(got_bounded, want_bounded, want[:1], strict=True):
        np.testing.assert_allclose(a["number_probs"], b["number_probs"], rtol=0, atol=1e-3)
        distance = np.abs(np.asarray(a["number_probs"]) - np.asarray(exact["number_probs"])).sum()
        assert distance <= a["number_bound"] + 1e-3 and a["number_bound"] <= 1e-3
        assert abs(a["trie_positions"] - b["trie_positions"]) <= 0.05 * b["trie_positions"]
    for a, b in zip(got, want, strict=True):
        key = "number_probs" if a["id"].startswith("n") else "choice_probs"
        np.testing.assert_allclose(a[key], b[key], rtol=0, atol=1e-3)
        if key == "choice_probs":
            np.testing.assert_allclose(a["choice_logprobs"], b["choice_logprobs"], rtol=0, atol=1e-3)
    assert np.ptp(want[0]["number_probs"]) > 1e-3


def _one_token_answers(
    model: Any, digit: np.ndarray, pieces: Sequence[int], blocked_first: Sequence[int], goes_on: Sequence[int] = ()
) -> Any:
    """`model` whose answers are one-token numbers with nothing after them (end-of-number mass 1).

    Its logits are the random model's, except that after a number piece (a digit-start token,
    or one of `pieces`: GPT-2's ` 57` starts with its space) no digit-start token may follow,
    and after any other token no token that only begins a longer form (`blocked_first`, e.g.
    Llama-3's separate `Ġ`) may follow. Then first-token
    mode must give exact mode's distribution. After the tokens in `goes_on`, digit-start
    tokens get a large logit instead: those numbers usually go on, so exact mode differs.
    """
    import torch

    digit_ids = torch.from_numpy(np.flatnonzero(digit))
    piece_ids = torch.tensor(sorted({*digit_ids.tolist(), *pieces}), dtype=torch.long)
    blocked = torch.tensor(list(blocked_first), dtype=torch.long)
    going = torch.tensor(list(goes_on), dtype=torch.long)

    class OneTokenAnswers(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model
            self.config = model.config

        @property
        def device(self) -> Any:
            return self.inner.device

        @property
        def dtype(self) -> Any:
            return self.inner.dtype

        def forward(self, input_ids: Any, logits_to_keep: int = 0, **kwargs: Any) -> Any:
            out = self.inner(input_ids=input_ids, logits_to_keep=logits_to_keep, **kwargs)
            logits = out.logits.clone()
            fed = input_ids[:, -logits.shape[1] :]  # the token each row of logits follows
            for where, value in (
                (torch.isin(fed, piece_ids) & ~torch.isin(fed, going), -1e4),
                (torch.isin(fed, going), 12.0),
            ):
                rows = logits[where]
                rows[:, digit_ids] = value
                logits[where] = rows
            if len(blocked):
                where = ~torch.isin(fed, piece_ids)
                rows = logits[where]
                rows[:, blocked] = -1e4
                logits[where] = rows
            out.logits = logits
            return out

    return OneTokenAnswers().eval()


@pytest.mark.parametrize("family", FAMILIES)
def test_first_token_equals_exact_where_numbers_are_one_token(family: str) -> None:
    """first-token = exact within 1e-6 when the end-of-number mass is 1; an error where 0-100 is digit by digit."""
    from runners.backends.hf.backend import HFBackend
    from runners.rows import run_items
    from runners.scoring.distributions import first_token_ids
    from runners.scoring.settings import ScoringSettings
    from runners.scoring.tokenize import number_paths

    tokenizer = vocab_tokenizer(family)
    items = [_number_item(k) for k in range(2)]
    first = ScoringSettings(number_mode="first-token")
    _, paths = number_paths(tokenizer, items[0]["prompt"], 0, 100)
    one_token = {f[0] for forms in paths.values() for f in forms if len(f) == 1}
    if any(all(len(f) > 1 for f in forms) for forms in paths.values()):  # some number needs two tokens
        backend = HFBackend(vocab_model(family), model_id=family)
        with pytest.raises(ValueError, match="has no one-token form for this tokenizer"):
            run_items(items, backend, tokenizer, chat=False, settings=first)
        assert family in ("llama-spm", "qwen2")  # the digit-by-digit families
        return
    blocked = sorted({f[0] for forms in paths.values() for f in forms if len(f) > 1} - one_token)
    digit = ~_ends_number_mask(tokenizer)
    pieces = sorted(one_token)
    backend = HFBackend(_one_token_answers(vocab_model(family), digit, pieces, blocked), model_id=family)
    exact = run_items(items, backend, tokenizer, chat=False)
    fast = run_items(items, backend, tokenizer, chat=False, settings=first)
    for a, b in zip(exact, fast, strict=True):
        np.testing.assert_allclose(b["number_probs"], a["number_probs"], rtol=0, atol=1e-6)
        assert np.ptp(a["number_probs"]) > 1e-4  # a real distribution, not a flat one
        assert b["computed_tokens"] < a["computed_tokens"]  # first-token feeds nothing after the context
    # where numbers usually go on after their first token, exact mode differs: the check above can fail
    evens = [ids[0] for n, ids in first_token_ids(paths).items() if n % 2 == 0]
    going_on = HFBackend(_one_token_answers(vocab_model(family), digit, pieces, blocked, evens), model_id=family)
    other = run_items(items[:1], going_on, tokenizer, chat=False)
    assert np.max(np.abs(np.asarray(other[0]["number_probs"]) - np.asarray(fast[0]["number_probs"]))) > 1e-3
    assert family in ("llama-bpe", "gpt-2")
