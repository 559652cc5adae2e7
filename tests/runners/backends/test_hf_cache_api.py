"""The hf backend uses transformers' cache objects, with no deprecated argument on any forward pass.

A GPU image with a newer transformers printed a `past_key_values` deprecation on every pass;
the backend passes a `DynamicCache` (the cache API transformers keeps), never the legacy tuple.
This runs a scoring call (choices, a number trie) and a generation with every Python warning
and transformers' own logger recorded, and fails on any deprecation among them.
"""

from __future__ import annotations

import logging
import warnings

import pytest

from runners.exchange import GenerateRequest, ScoreRequest
from runners_fixtures import tiny_llama_folder


def test_scoring_and_generation_warn_of_no_deprecated_cache_argument(caplog: pytest.LogCaptureFixture) -> None:
    import transformers
    from transformers import AutoTokenizer

    from runners.backends.hf.backend import HFBackend

    folder = str(tiny_llama_folder("float32"))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    backend = HFBackend.from_pretrained(folder, dtype="float32", device="cpu", tokenizer=tokenizer)
    transformers.logging.enable_propagation()
    try:
        with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
            warnings.simplefilter("always")
            scored = backend.score(
                [
                    ScoreRequest((1, 2, 3, 4, 5), ((6,), (7, 8)), (9, 10)),
                    ScoreRequest((1, 2, 3, 11), ((12, 13), (12, 14), (15,)), (9, 10)),
                ]
            )
            generated = backend.generate([GenerateRequest((1, 2, 3), max_tokens=4)])
    finally:
        transformers.logging.disable_propagation()
        backend.close()
    assert len(scored) == 2 and len(scored[1].continuations) == 3 and len(generated) == 1
    said = [str(w.message) for w in caught] + [record.getMessage() for record in caplog.records]
    assert not [s for s in said if "past_key_values" in s or "deprecat" in s.lower()], said
