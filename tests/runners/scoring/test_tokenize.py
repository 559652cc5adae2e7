"""The one context/continuation tokenisation path (runners.scoring.tokenize), on SmolLM2's real tokenizer."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from runners.scoring.tokenize import (
    bos_ids,
    digit_start_ids,
    encode_context,
    encode_continuations,
    encode_pair,
    label_token_ids,
    number_paths,
    render_chat,
)
from runners_fixtures import load_tokenizer


@pytest.fixture(scope="module")
def tok_() -> Any:
    return load_tokenizer()


CHAT = [{"role": "user", "content": "Rate it.\nEmotion intensity:"}]
SMOL_CHAT = (
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nRate it.\nEmotion intensity:<|im_end|>\n<|im_start|>assistant\n"
)


def toks(tokenizer: Any, ids: tuple[int, ...]) -> list[str]:
    return tokenizer.convert_ids_to_tokens(list(ids))


@pytest.fixture(scope="module")
def bos_tokenizer(tok_: Any) -> Any:
    """SmolLM2's tokenizer made to add its BOS (`<|im_start|>`) before any text, like Llama's."""
    from tokenizers.processors import TemplateProcessing

    tokenizer = copy.deepcopy(tok_)
    bos = tokenizer.bos_token_id
    tokenizer.backend_tokenizer.post_processor = TemplateProcessing(
        single=f"{tokenizer.bos_token} $A", special_tokens=[(tokenizer.bos_token, bos)]
    )
    assert tokenizer("hi").input_ids[0] == bos
    return tokenizer


def test_whole_string_is_encoded_once_and_split(tok_: Any) -> None:
    tok = tok_
    for context, continuation in [("Hello", " world"), ("Answer:", " 42"), ("### Response:\n", "She studied hard.")]:
        enc = encode_pair(tok, context, continuation)
        assert (
            list(enc.context_ids + enc.continuation_ids)
            == tok(context + continuation, add_special_tokens=False)["input_ids"]
        )
        assert tok.decode(list(enc.context_ids)) == context
        assert tok.decode(list(enc.continuation_ids)) == continuation
        assert not enc.straddles


def test_leading_whitespace_belongs_to_the_continuation(tok_: Any) -> None:
    enc = encode_pair(tok_, "Hello", " world")
    assert toks(tok_, enc.context_ids) == ["Hello"]
    assert toks(tok_, enc.continuation_ids) == ["Ġworld"]
    enc = encode_pair(tok_, "Answer:", " 42")  # SmolLM2: the space is its own token before digits
    assert toks(tok_, enc.continuation_ids) == ["Ġ", "4", "2"]


def test_a_straddling_token_belongs_to_the_continuation(tok_: Any) -> None:
    tok = tok_
    # the context's trailing space and the continuation's first word are one token, ` world`
    enc = encode_pair(tok, "Hello ", "world")
    assert enc.straddles
    assert toks(tok, enc.context_ids) == ["Hello"]
    assert toks(tok, enc.continuation_ids) == ["Ġworld"]
    assert tok.decode(list(enc.continuation_ids)) == " world"  # covers the context's last character
    # a split inside a word: the whole token `Ġcaf` ... goes where its end lies
    enc = encode_pair(tok, "Say caf", "é au lait")
    assert enc.straddles and tok.decode(list(enc.context_ids)) == "Say"
    # when the only token straddles there is no context left to condition on
    with pytest.raises(ValueError, match="empty context"):
        encode_pair(tok, "Sa", "y")


def test_a_straddling_continuation_cuts_the_shared_context_back(tok_: Any) -> None:
    context, conts = encode_continuations(tok_, "Q: who?\nA:", [" Ann", " Bob and Carl"])
    assert context == encode_context(tok_, "Q: who?\nA:")
    assert [tok_.decode(list(c)) for c in conts] == [" Ann", " Bob and Carl"]
    # "A: " + "Ann" merges the space into ` Ann`; " Bob" does not straddle
    text, options = "Q: who?\nA: ", ["Ann", " Bob"]
    assert encode_pair(tok_, text, options[0]).straddles
    context, conts = encode_continuations(tok_, text, options)
    own = encode_context(tok_, text)
    assert len(context) < len(own) and own[: len(context)] == context
    for option, cont in zip(options, conts, strict=True):
        # each option is scored on exactly the tokens of its full text
        whole = encode_pair(tok_, text, option)
        assert context + cont == whole.context_ids + whole.continuation_ids
        assert tok_.decode(list(context + cont)) == text + option


def test_bos_policy_follows_the_tokenizer(tok_: Any, bos_tokenizer: Any) -> None:
    # SmolLM2 adds no BOS: none is invented
    assert bos_ids(tok_) == ()
    assert encode_context(tok_, "Hello")[0] != tok_.bos_token_id
    # a tokenizer that adds one: a plain prompt gets exactly one
    bos = bos_tokenizer.bos_token_id
    assert bos_ids(bos_tokenizer) == (bos,)
    ids = encode_context(bos_tokenizer, "Hello")
    assert ids[0] == bos and ids.count(bos) == 1
    enc = encode_pair(bos_tokenizer, "Hello", " world")
    assert enc.context_ids == (bos, *encode_context(tok_, "Hello"))


def test_chat_template_bos_is_never_doubled(tok_: Any, bos_tokenizer: Any) -> None:
    for tok in (tok_, bos_tokenizer):
        text = render_chat(tok, CHAT)
        assert text == SMOL_CHAT  # add_generation_prompt=True: ends at the assistant's turn
        ids = encode_context(tok, text)
        # the template writes `<|im_start|>` (= BOS) itself; the tokenizer's own BOS is not added again
        assert ids[:2] == (tok.bos_token_id, tok("system", add_special_tokens=False)["input_ids"][0])
        assert list(ids) == tok(text, add_special_tokens=False)["input_ids"]
        enc = encode_pair(tok, text, "42")
        assert enc.context_ids == ids and toks(tok, enc.continuation_ids) == ["4", "2"]


def test_render_chat_needs_a_template(tok_: Any) -> None:
    tok = copy.deepcopy(tok_)
    tok.chat_template = None
    with pytest.raises(ValueError, match="no chat template"):
        render_chat(tok, CHAT)


def test_label_token_ids(tok_: Any) -> None:
    tok = tok_
    context, ids = label_token_ids(tok, "### Response:\n", ["A", "B", "C", "D"])
    assert context == encode_context(tok, "### Response:\n")
    assert [toks(tok, i) for i in ids] == [["A", "ĠA"], ["B", "ĠB"], ["C", "ĠC"], ["D", "ĠD"]]
    with pytest.raises(ValueError, match="not a single token"):
        label_token_ids(tok, "### Response:\n", ["A", "Banana split"])


def test_number_paths_and_digit_tokens(tok_: Any) -> None:
    tok = tok_
    context, paths = number_paths(tok, "Answer:", 0, 12)
    assert context == encode_context(tok, "Answer:")
    assert [toks(tok, p) for p in paths[7]] == [["7"], ["Ġ", "7"]]
    assert [toks(tok, p) for p in paths[12]] == [["1", "2"], ["Ġ", "1", "2"]]
    # SmolLM2 splits every digit: exactly the ten single-digit tokens start with a digit
    digits = digit_start_ids(tok)
    assert sorted(toks(tok, digits)) == list("0123456789")
    vocab = tok.convert_ids_to_tokens(list(range(len(tok))))
    assert digits == tuple(i for i, t in enumerate(vocab) if t[0] in "0123456789")
    with pytest.raises(ValueError, match="empty number range"):
        number_paths(tok, "Answer:", 3, 2)
