"""Paths that only matter at scale, checked on the CPU: batched hf generation, and the digit tokens computed once.

- Greedy generation runs left-padded batches through `model.generate`; every request's text
  and tokens equal those of the same request generated alone (and the step-by-step greedy
  reference of tests/runners/test_rows.py checks the batched path against argmax decoding).
- `digit_start_ids` decodes the whole vocabulary: a run computes it once per tokenizer, not
  once per batch of items.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runners.backends import load as models
from runners.backends.load import LoadOptions
from runners.exchange import GenerateRequest
from runners.prompts import load_prompt_config
from runners.run import local_driver
from runners.run.request import RunRequest
from runners.scoring.tokenize import encode_context
from runners_fixtures import number_items, tiny_llama_folder, write_prompt_folder

CONTEXTS = [
    "Write one word about the sea:",
    "Question: what is the capital of France?\nAnswer:",
    "Count with me: one, two, three,",
    "A",
    "Here is a short story about a cat who liked to sleep in the sun all day long. Once upon a time,",
]


@pytest.mark.slow
def test_batched_greedy_generation_equals_one_request_at_a_time(smollm2_model: Any, smollm2_tokenizer: Any) -> None:
    from runners.backends.hf.backend import HFBackend

    requests = [
        GenerateRequest(context=encode_context(smollm2_tokenizer, c), max_tokens=12, stop=stop)
        for c in CONTEXTS
        for stop in ((), (",",))
    ]
    batched = HFBackend(smollm2_model, model_id="m", tokenizer=smollm2_tokenizer)
    calls = []
    generate = smollm2_model.generate

    class _Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(smollm2_model, name)

        def eval(self) -> Any:
            return self

        def generate(self, **kwargs: Any) -> Any:
            calls.append(kwargs["input_ids"].shape[0])
            return generate(**kwargs)

    batched.model = _Counting()
    alone = HFBackend(smollm2_model, model_id="m", tokenizer=smollm2_tokenizer, max_batch_tokens=1)
    got, want = batched.generate(requests), alone.generate(requests)
    assert sorted(calls) == [5, 5]  # two groups (with and without a stop string), each one batch
    assert got == want
    assert {g.finish_reason for g in got} <= {"stop", "length"} and any(g.text.endswith(",") for g in got)


@pytest.mark.slow
def test_sampled_requests_run_alone_with_their_seed(smollm2_model: Any, smollm2_tokenizer: Any) -> None:
    from runners.backends.hf.backend import HFBackend

    backend = HFBackend(smollm2_model, model_id="m", tokenizer=smollm2_tokenizer)
    context = encode_context(smollm2_tokenizer, CONTEXTS[0])
    request = GenerateRequest(context=context, max_tokens=8, temperature=1.0, seed=11)
    other = GenerateRequest(context=encode_context(smollm2_tokenizer, CONTEXTS[1]), max_tokens=8, temperature=1.0)
    (alone,) = backend.generate([request])
    together = backend.generate([other, request, other])
    assert together[1] == alone  # its text depends on its seed, not on the requests beside it


@pytest.fixture(scope="module")
def prompts_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_prompt_folder(tmp_path_factory.mktemp("prompts"), number_items(6))


def test_digit_start_ids_runs_once_per_run(prompts_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    from runners import rows as run

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets")
    calls = []
    real = run.digit_start_ids

    def counting(tokenizer: Any) -> tuple[int, ...]:
        calls.append(tokenizer)
        return real(tokenizer)

    monkeypatch.setattr(run, "digit_start_ids", counting)
    folder = tiny_llama_folder("float32")
    backend, tokenizer, revision, _ = models.load_backend(str(folder), LoadOptions.of(backend="hf", device="cpu"))
    prompts = load_prompt_config(str(prompts_dir), "items")

    def request(out: str, batch_size: int) -> RunRequest:
        return RunRequest(prompts_dir, "items", str(folder), tmp_path / out, batch_size=batch_size)

    summary = local_driver.run_config(prompts, backend, tokenizer, request("a", 2), model_revision=revision)
    assert summary.items == 6 and len(calls) == 1  # three batches, one vocabulary pass
    local_driver.run_config(prompts, backend, tokenizer, request("b", 2), model_revision=revision)
    assert len(calls) == 1  # the same tokenizer in a later run: still cached
    _, other, _, _ = models.load_backend(str(folder), LoadOptions.of(backend="hf", device="cpu"))
    local_driver.run_config(prompts, backend, other, request("c", 3), model_revision=revision)
    assert len(calls) == 2 and calls[1] is other  # another tokenizer object: computed for it


def test_a_request_s_end_of_turn_id_ends_its_row_in_a_padded_batch() -> None:
    """`stop_token_ids` (Llama-3's <|eot_id|> beside its EOS) end a row as the model's EOS does.

    The reference is the same batch without stop ids: the row is that text cut before the
    first stop id, marked "stop", while the other rows of the batch come out unchanged.
    """
    folder = tiny_llama_folder("float32")
    backend, tokenizer, _, _ = models.load_backend(str(folder), LoadOptions.of(backend="hf", device="cpu"))
    contexts = [encode_context(tokenizer, c) for c in CONTEXTS]
    free = backend.generate([GenerateRequest(context=c, max_tokens=10) for c in contexts])
    assert all(g.finish_reason == "length" and len(g.token_ids) == 10 for g in free)
    # a token that one row generates after its first step and no other row generates at all
    row, stop = next(
        (i, t)
        for i, g in enumerate(free)
        for t in g.token_ids[1:]
        if t != g.token_ids[0] and all(t not in h.token_ids for j, h in enumerate(free) if j != i)
    )
    cut = free[row].token_ids.index(stop)
    requests = [GenerateRequest(context=c, max_tokens=10, stop_token_ids=(stop,)) for c in contexts]
    stopped = backend.generate(requests)
    assert stopped[row].token_ids == free[row].token_ids[:cut] and stopped[row].finish_reason == "stop"
    assert stopped[row].text == tokenizer.decode(list(free[row].token_ids[:cut]), skip_special_tokens=True)
    assert [g for i, g in enumerate(stopped) if i != row] == [g for i, g in enumerate(free) if i != row]
