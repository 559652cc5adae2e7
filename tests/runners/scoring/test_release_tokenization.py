"""The `*_release` configs are scored on the token ids the release's scorer (cappr) used (issue "Fidelity").

cappr tokenises a prompt and each option on its own: the prompt as the tokenizer encodes any
text (its BOS added), each option with the BOS disabled and no EOS (`end_of_prompt=""`, as the
release called it). The project's default (joint) split differs on Llama-3 and Qwen2, where a
token such as `>The` spans the actor-actor prompt's end and the option, and on SentencePiece,
whose options lose their word-start `▁`. The datasets' protocol for the `*_release` configs says
`tokenization: separate`; here the ids a run makes for them are compared, on a 1,000-row sample
of each config and each test vocabulary, with cappr's rule applied through another entry point
of the tokenizer (`add_special_tokens=True`, then the BOS and EOS it added taken off), and the
probabilities of a few rows with a full forward pass of every prompt + option on a tiny random
model of each vocabulary, softmax of the mean option log-probability.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runners_fixtures import full_forward_logprobs, vocab_model, vocab_tokenizer

pytestmark = pytest.mark.slow  # the default talent-or-luck build (2 min) and four tokenizers
FAMILIES = ("llama-bpe", "qwen2", "gpt-2", "llama-spm")
RELEASE_CONFIGS = ("single_actor_release", "actor_actor_release", "actor_observer_release")
SAMPLE = 1000  # rows of each config, drawn over its row groups


def _sample(dataset: Path, config: str, n: int = SAMPLE, seed: int = 0) -> list[dict[str, Any]]:
    """`n` rows spread over the config: whole row groups drawn at random (a 2.97 M-row config is not loaded)."""
    from promptgen.hub.read import config_files
    from runners.plan.configs import ConfigRows

    rows = ConfigRows(config_files(dataset, config, required=True))
    rng = np.random.default_rng(seed)
    out: list[dict[str, Any]] = []
    for k in rng.permutation(len(rows.groups)):
        _, _, first, count = rows.groups[k]
        out += rows.read(first, first + min(count, n - len(out)))
        if len(out) >= n:
            break
    return out


def _cappr_ids(tokenizer: Any, prompt: str, options: list[str]) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """cappr's rule: the prompt with the tokenizer's special tokens but no EOS; each option without its BOS or EOS."""
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    plain = tokenizer("x", add_special_tokens=False)["input_ids"]
    with_special = tokenizer("x", add_special_tokens=True)["input_ids"]

    def strip(ids: list[int], keep_bos: bool) -> tuple[int, ...]:
        ids = list(ids)
        if eos is not None and with_special[-1] == eos and plain[-1] != eos and ids and ids[-1] == eos:
            ids = ids[:-1]
        if not keep_bos and bos is not None and with_special[0] == bos and plain[0] != bos and ids and ids[0] == bos:
            ids = ids[1:]
        return tuple(ids)

    prompt_ids = strip(tokenizer(prompt, add_special_tokens=True)["input_ids"], keep_bos=True)
    return prompt_ids, [strip(tokenizer(o, add_special_tokens=True)["input_ids"], keep_bos=False) for o in options]


@pytest.mark.parametrize("config", RELEASE_CONFIGS)
def test_release_options_are_tokenised_as_cappr_did(built_default: Path, config: str) -> None:
    from promptgen.hub.read import read_build_manifest
    from promptgen.protocols import manifest_protocol
    from runners.rows import cached_digit_start_ids, prepare_request
    from runners.scoring.settings import resolve_scoring

    declared = manifest_protocol(read_build_manifest(built_default), config, "manifest")
    assert declared is not None and declared.scoring.get("tokenization") == "separate"
    settings = resolve_scoring(declared, None, None).settings
    assert settings.tokenization == "separate" and '"tokenization":"separate"' in settings.key()
    rows = _sample(built_default, config)
    assert len(rows) == SAMPLE
    differs_from_joint = {}
    for family in FAMILIES:
        tokenizer = vocab_tokenizer(family)
        digits = cached_digit_start_ids(tokenizer)
        joint = resolve_scoring(declared, {"tokenization": "joint"}, None).settings
        changed = 0
        for row in rows:
            request = prepare_request(row, tokenizer, False, settings, digits)
            prompt_ids, option_ids = _cappr_ids(tokenizer, row["prompt"], row["choices"])
            assert request.context == prompt_ids, (family, row["id"])
            assert list(request.continuations) == option_ids, (family, row["id"])
            changed += prepare_request(row, tokenizer, False, joint, digits).continuations != request.continuations
        differs_from_joint[family] = changed
    # where the two tokenizations part (the table): SentencePiece always, BPE never on GPT-2
    assert differs_from_joint["llama-spm"] == SAMPLE and differs_from_joint["gpt-2"] == 0, differs_from_joint
    if config == "actor_actor_release":
        assert differs_from_joint["llama-bpe"] > SAMPLE // 2 and differs_from_joint["qwen2"] > SAMPLE // 2


@pytest.mark.parametrize("family", FAMILIES)
def test_release_probabilities_equal_a_cappr_way_forward_pass(built_default: Path, family: str) -> None:
    from runners.backends.hf.backend import HFBackend
    from runners.rows import run_items
    from runners.scoring.settings import scoring_settings

    tokenizer, model = vocab_tokenizer(family), vocab_model(family)
    backend = HFBackend(model, model_id=family, max_batch_tokens=4096)
    settings = scoring_settings("sentence", length_normalize=True, tokenization="separate")
    for config in RELEASE_CONFIGS:
        rows = _sample(built_default, config, n=4, seed=1)
        got = run_items(rows, backend, tokenizer, chat=False, settings=settings)
        for row, result in zip(rows, got, strict=True):
            prompt_ids, option_ids = _cappr_ids(tokenizer, row["prompt"], row["choices"])
            sequences = [list(prompt_ids) + list(o) for o in option_ids]
            positions = [list(range(len(prompt_ids) - 1, len(s) - 1)) for s in sequences]
            logprobs = full_forward_logprobs(model, sequences, positions)
            means = np.array(
                [float(lp[np.arange(len(o)), list(o)].mean()) for lp, o in zip(logprobs, option_ids, strict=True)]
            )
            want = np.exp(means - means.max()) / np.exp(means - means.max()).sum()
            np.testing.assert_allclose(result["choice_probs"], want, rtol=0, atol=1e-5, err_msg=f"{family} {row['id']}")
