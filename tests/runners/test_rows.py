"""Items -> result rows (runners.rows) with SmolLM2 and the transformers backend, against full passes."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from runners.rows import run_items
from runners.scoring.settings import ScoringSettings
from runners.scoring.tokenize import encode_context, number_paths, render_chat
from runners_fixtures import reference_number_raw, reference_option_logprobs

pytestmark = pytest.mark.slow  # every test runs SmolLM2: the slow tier (pytest -m slow)
ATTRIBUTION = (
    "Respond by choosing one of the provided options as the reason to the statement.\n\n### Statement:\n"
    "Maria passed the exam.\n\nOptions:\nA. She worked hard.\nB. She is gifted.\nC. The exam was easy.\n"
    "D. She was lucky.\n### Response:\n"
)
OPTIONS = ["She worked hard.", "She is gifted.", "The exam was easy.", "She was lucky."]


def user_messages(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


TRUST = "Question: How much money will Mr. Smith pass to the banker?\nAnswer: Mr. Smith will pass to the banker $"

ITEMS = [
    {
        "id": "choice-1",
        "task": "choice",
        "prompt": ATTRIBUTION,
        "messages": user_messages(ATTRIBUTION),
        "choices": OPTIONS,
        "choice_labels": list("ABCD"),
    },
    {
        "id": "number-1",
        "task": "number",
        "prompt": TRUST,
        "messages": user_messages("How much money will Mr. Smith pass? Only give the number."),
        "number_min": 0,
        "number_max": 10,
    },
]


@pytest.fixture(scope="module")
def backend(smollm2_model: Any) -> Any:
    from runners.backends.hf.backend import HFBackend

    return HFBackend(smollm2_model, model_id="smollm2-135m-test")


def context_of(tok: Any, item: dict, chat: bool) -> str:
    return render_chat(tok, item["messages"]) if chat else item["prompt"]


@pytest.mark.parametrize("chat", [False, True])
def test_sentence_mode_rows(backend: Any, smollm2_model: Any, smollm2_tokenizer: Any, chat: bool) -> None:
    rows = run_items(ITEMS, backend, smollm2_tokenizer, chat)
    assert [r["id"] for r in rows] == ["choice-1", "number-1"]
    choice, number = rows
    assert choice["model"] == "smollm2-135m-test" and choice["backend"] == "hf"
    assert json.loads(choice["scoring"])["choice_mode"] == "sentence"

    ref_lp, counts = reference_option_logprobs(
        smollm2_model, smollm2_tokenizer, context_of(smollm2_tokenizer, ITEMS[0], chat), OPTIONS
    )
    ref = np.exp(np.array(ref_lp) - max(ref_lp))
    np.testing.assert_allclose(choice["choice_probs"], ref / ref.sum(), atol=1e-5)
    np.testing.assert_allclose(choice["choice_logprobs"], ref_lp, atol=1e-4)
    assert choice["choice_tokens"] == counts
    assert choice["chosen_index"] == int(np.argmax(ref_lp))
    assert math.isnan(choice["valid_mass"]) and choice["refused"] is False
    assert choice["number_probs"] is None and choice["expected_value"] is None
    assert choice["context_tokens"] == len(
        encode_context(smollm2_tokenizer, context_of(smollm2_tokenizer, ITEMS[0], chat))
    )

    ctx, paths = number_paths(smollm2_tokenizer, context_of(smollm2_tokenizer, ITEMS[1], chat), 0, 10)
    raw = np.array(list(reference_number_raw(smollm2_model, smollm2_tokenizer, ctx, paths).values()))
    np.testing.assert_allclose(number["number_probs"], raw / raw.sum(), atol=1e-5)
    assert sum(number["number_probs"]) == pytest.approx(1.0)
    assert number["valid_mass"] == pytest.approx(raw.sum(), rel=1e-4)
    assert number["expected_value"] == pytest.approx(float(np.dot(np.arange(11), raw / raw.sum())), abs=1e-4)
    assert number["argmax_value"] == int(np.argmax(raw))
    assert number["refused"] == (raw.sum() < 0.5)
    assert number["choice_probs"] is None and number["generated_text"] is None


def test_letter_mode_rows(backend: Any, smollm2_model: Any, smollm2_tokenizer: Any) -> None:
    from runners_fixtures import full_forward_logprobs

    settings = ScoringSettings(choice_mode="letter", refusal_threshold=0.0)
    (row,) = run_items(ITEMS[:1], backend, smollm2_tokenizer, chat=False, settings=settings)
    ctx = encode_context(smollm2_tokenizer, ATTRIBUTION)
    logprobs = full_forward_logprobs(smollm2_model, [list(ctx)], [[len(ctx) - 1]], rows=1)[0][0]
    forms = [[smollm2_tokenizer.convert_tokens_to_ids(t) for t in (label, "Ġ" + label)] for label in "ABCD"]
    mass = np.array([np.exp(logprobs[ids]).sum() for ids in forms])
    np.testing.assert_allclose(row["choice_probs"], mass / mass.sum(), atol=1e-5)
    np.testing.assert_allclose(np.exp(row["choice_logprobs"]), mass, atol=1e-6)
    assert row["valid_mass"] == pytest.approx(mass.sum(), abs=1e-5)
    assert row["choice_tokens"] == [1, 1, 1, 1] and row["refused"] is False
    assert json.loads(row["scoring"]) == json.loads(settings.key())


def test_bad_items_and_settings_are_errors(backend: Any, smollm2_tokenizer: Any) -> None:
    with pytest.raises(ValueError, match="task must be"):
        run_items([{**ITEMS[0], "task": "generate"}], backend, smollm2_tokenizer, chat=False)
    with pytest.raises(ValueError, match="one label per choice"):
        run_items(
            [{**ITEMS[0], "choice_labels": ["A"]}],
            backend,
            smollm2_tokenizer,
            False,
            settings=ScoringSettings("letter"),
        )
    with pytest.raises(ValueError, match="integer `number_min`"):
        run_items([{**ITEMS[1], "number_max": None}], backend, smollm2_tokenizer, chat=False)
    with pytest.raises(ValueError, match="choice_mode"):
        ScoringSettings(choice_mode="logits")


def test_generation_mode_greedy_text_is_parsed_and_reproducible(smollm2_model: Any, smollm2_tokenizer: Any) -> None:
    import torch

    from runners.backends.hf.backend import HFBackend
    from runners.exchange import GenerateRequest

    gen_backend = HFBackend(smollm2_model, model_id="smollm2-135m-test", tokenizer=smollm2_tokenizer)
    settings = ScoringSettings(mode="generate", max_new_tokens=8)
    rows = run_items(ITEMS, gen_backend, smollm2_tokenizer, True, settings=settings)
    again = run_items(ITEMS[::-1], gen_backend, smollm2_tokenizer, True, settings=settings)[::-1]
    for row, other, item in zip(rows, again, ITEMS, strict=True):
        assert row["generated_text"] and row["generated_text"] == other["generated_text"]  # greedy: same text
        assert row["parse_status"] in ("ok", "no_number", "out_of_range", "no_answer", "ambiguous")
        assert row["refused"] == (row["parse_status"] != "ok")
        assert math.isnan(row["valid_mass"]) and row["choice_probs"] is None and row["number_probs"] is None
        # the text is exactly what greedy decoding of the rendered context gives, token by token
        context = encode_context(smollm2_tokenizer, render_chat(smollm2_tokenizer, item["messages"]))
        ids = list(context)
        for _ in range(8):
            logits = smollm2_model(input_ids=torch.tensor([ids])).logits[0, -1]
            nxt = int(logits.argmax())
            if nxt == smollm2_tokenizer.eos_token_id:
                break
            ids.append(nxt)
        want = smollm2_tokenizer.decode(ids[len(context) :], skip_special_tokens=True)
        assert row["generated_text"] == want
    # a stop string cuts the text after its first occurrence, and finishes with reason "stop"
    (gen,) = gen_backend.generate([GenerateRequest(context=tuple(context), max_tokens=8, stop=(" ",))])
    assert gen.text.count(" ") <= 1 and (gen.text.endswith(" ") or gen.finish_reason == "length")
