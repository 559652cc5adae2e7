"""Where greedy generation stops: EOS and the chat template's end-of-turn token (`end_of_turn_ids`).

The empathy authors stop vLLM at `[tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|eot_id|>")]`;
the expected ids here are computed by those calls on real vocabularies, not written out.
"""

from __future__ import annotations

import copy

import pytest

from runners.scoring.tokenize import end_of_turn_ids, find_end_of_turn_ids
from runners_fixtures import vocab_tokenizer

#: the Llama-3 instruct template's shape: each message closed by <|eot_id|>
LLAMA3_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
    "{{ m['content'] }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def test_llama3_stops_where_the_authors_stopped() -> None:
    tokenizer = copy.deepcopy(vocab_tokenizer("llama-bpe"))
    tokenizer.chat_template = LLAMA3_TEMPLATE
    eot = tokenizer.convert_tokens_to_ids("<|eot_id|>")
    assert isinstance(eot, int) and eot != tokenizer.unk_token_id
    ids = find_end_of_turn_ids(tokenizer)
    assert set(ids) == {tokenizer.eos_token_id, eot}


def test_smollm2_ends_its_turn_with_im_end(smollm2_tokenizer) -> None:
    tokenizer = smollm2_tokenizer
    ids = end_of_turn_ids(tokenizer)
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in ids
    assert tokenizer.eos_token_id in ids
    assert end_of_turn_ids(tokenizer) is ids  # computed once per tokenizer


def test_a_template_that_cannot_render_a_turn_leaves_eos_only() -> None:
    tokenizer = copy.deepcopy(vocab_tokenizer("llama-spm"))
    tokenizer.chat_template = "{{ raise_exception('no assistant turns') }}"
    assert find_end_of_turn_ids(tokenizer) == (tokenizer.eos_token_id,)


@pytest.mark.parametrize("family", ["llama-spm", "llama-bpe"])
def test_without_a_template_eos_and_a_known_eot(family: str) -> None:
    tokenizer = copy.deepcopy(vocab_tokenizer(family))
    tokenizer.chat_template = None
    vocab = tokenizer.get_vocab()
    expected = {tokenizer.eos_token_id} | ({vocab["<|eot_id|>"]} if "<|eot_id|>" in vocab else set())
    assert set(find_end_of_turn_ids(tokenizer)) == expected
