"""The transformers backend: `Backend.score` with one context pass reused by all continuations.

`HFBackend` loads a model, records what it loaded (`dtype`, `device`, `hardware`), and plans
and runs the passes of a scoring call; the pass itself over pooled keys and values is
`runners.backends.hf.tree_pass`, the float64 log-probabilities `runners.backends.hf.logprobs`, and generation
mode `runners.backends.hf.generate`. torch and transformers are imported inside functions, so
`import runners` works without the `hf` extra.

How a batch of requests is scored (`runners.scoring.token_accounting` plans every step, so
`probes plan` counts exactly the positions computed here):

1. Requests are sorted by their context token ids (`hf_batches`), so contexts that share a
   prefix (persona, instruction, narrative, ...) sit together, and cut into batches under the
   token budget (rows x longest context).
2. The batch's contexts form a radix tree (`context_radix`): an edge per run of tokens that the
   same contexts share, cut at every branching point and context end (shared segments shorter
   than `min_shared_prefix` are run with each branch instead). Edges run level by level, each
   over its ancestors' keys and values, so every distinct prefix is computed once. The keys
   and values of every computed context token stay in a pool (one slot per token); a pass
   gathers its rows' pasts from there. The last logits of an edge where a context ends are that
   context's next-token distribution: its candidates and the first token of each continuation.
3. Each request's continuations then run in ONE packed row: every node of their token trie
   (`continuation_nodes`: for a number item, every node of its digit trie) is one token that
   sees, through a 4D attention mask, the context and its own ancestors only, at position
   `len(context) + depth - 1` (explicit position ids). The logits at a node give the next token
   of every continuation through it and, with candidates, the candidates there (the digits that
   would continue a number; the rest is its end-of-number mass). Rows of several requests share
   a pass under the token budget and `max_logit_rows` (rows x fed positions).

Each pass's logits are released before the next pass is built. A request's numbers do not
depend on the batch around it beyond float32 round-off (padding and batch shapes change the
order of sums: ~1e-7 in probabilities).

Out of memory, a batch is retried with half the token budget (down to one request), and
the smaller budget is kept for later batches. The retry runs after the failed attempt's
memory is released (outside the `except` block), and each pass's cache and logits are
released before the next pass's are built, so the peak is one pass's, not two. Everything
runs under `torch.inference_mode()`.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from runners.backends.hf.accounting import MIN_SHARED_PREFIX, context_radix, hf_batches, radix_attribution
from runners.backends.hf.bounded import bounded_passes
from runners.backends.hf.generate import generate
from runners.backends.hf.logprobs import LogSoftmax, candidate_logprobs_by_row, gather_logprobs
from runners.backends.hf.spec import HF, HfOptions
from runners.backends.hf.tree_pass import KVPool, TreeRow, tree_pass
from runners.backends.protocol import Hardware
from runners.backends.registry import Resolved
from runners.exchange import ContinuationScore, GenerateRequest, Generation, ScoreRequest, ScoreResult
from runners.scoring.number_bound import TrieExpansion
from runners.scoring.token_accounting import DEFAULT_MAX_BATCH_TOKENS, budget_chunks, continuation_nodes

#: default cap on logit rows (rows x fed positions) of one continuation pass: bounds the
#: (rows, positions, vocabulary) logits tensor and the log-sum-exp pass over it
DEFAULT_MAX_LOGIT_ROWS = 512


def quantization_config(dtype: str) -> Any:
    """transformers' `BitsAndBytesConfig` of a quantised `--dtype`: for `bnb-4bit`, the release's own
    (`load_in_4bit=True`, float16 compute, bitsandbytes' default 4-bit type and no double quantisation)."""
    import torch
    from transformers import BitsAndBytesConfig

    from runners.model.device import QUANTIZED

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=getattr(torch, QUANTIZED[dtype]))


@dataclass(frozen=True, kw_only=True)
class HfHardware(Hardware):
    """What the hf backend loaded, with which memory settings, on which torch (`HFBackend.hardware`)."""

    dtype: str
    device: str
    #: after any out-of-memory halving
    max_batch_tokens: int
    max_logit_rows: int
    #: the devices accelerate spread the layers over (`--device-map auto`), sorted; None: not spread
    device_map: tuple[str, ...] | None = None
    #: the GPUs the model is on (on a GPU)
    gpus: tuple[str, ...] = ()
    torch: str
    #: float32 matmuls' last bits depend on the thread count
    threads: int

    def manifest(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "dtype": self.dtype,
            "device": self.device,
            "max_batch_tokens": self.max_batch_tokens,
            "max_logit_rows": self.max_logit_rows,
        }
        if self.device_map is not None:
            info["device_map"] = list(self.device_map)
        if self.gpu is not None:
            info["gpu"] = self.gpu
            info["gpus"] = list(self.gpus)
        info.update(torch=self.torch, threads=self.threads)
        return info


class HFBackend:
    """Scores token ids with a transformers causal LM (see the module docstring)."""

    name = HF.name

    def __init__(
        self,
        model: Any,
        *,
        model_id: str | None = None,
        model_revision: str | None = None,
        max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
        max_logit_rows: int = DEFAULT_MAX_LOGIT_ROWS,
        min_shared_prefix: int = MIN_SHARED_PREFIX,
        tokenizer: Any = None,
    ) -> None:
        self.model = model.eval()
        #: needed only by `generate` (decoding and stop strings)
        self.tokenizer = tokenizer
        self.model_id = model_id or str(getattr(model.config, "name_or_path", "") or type(model).__name__)
        self.model_revision = model_revision
        self.max_batch_tokens = max_batch_tokens
        self.max_logit_rows = max_logit_rows
        #: 0 turns the shared-prefix pass off
        self.min_shared_prefix = min_shared_prefix

    @classmethod
    def from_pretrained(
        cls,
        model_id: str,
        options: HfOptions | None = None,
        *,
        revision: str | None = None,
        dtype: str = "float32",
        device: str = "cpu",
        **kwargs: Any,
    ) -> HFBackend:
        """Load `model_id` (Hub id or local folder; with `options.gguf_file`, that GGUF file in it) in `dtype`
        on `device`, with the backend's own options (`HfOptions`, declared once in `spec`: `--device-map`,
        `--gguf-file`, `--max-batch-tokens`, `--max-logit-rows`; None: their defaults).

        The weights are loaded straight onto `device` (transformers' `device_map`), never first
        into host memory and then moved: an 8B bf16 model is 16 GB. `device_map="auto"` spreads
        the layers over every visible GPU (accelerate's placement), for models one GPU cannot
        hold. Unset budgets get the device's defaults (`runners.model.device`): on CUDA the token
        budget follows the free memory left after loading.
        """
        import torch
        from transformers import AutoModelForCausalLM

        from runners.model.device import (
            MAX_LOGIT_ROWS,
            QUANTIZED,
            compute_dtype,
            cuda_token_budget,
            device_type,
            free_cuda_memory,
        )

        options = options or HfOptions()
        device_map, max_batch_tokens = options.device_map, options.max_batch_tokens
        extra: dict[str, Any] = {"gguf_file": options.gguf_file} if options.gguf_file else {}
        if dtype in QUANTIZED:
            extra["quantization_config"] = quantization_config(dtype)
        if device_map is not None:
            extra["device_map"] = device_map
        elif device_type(device) != "cpu":
            extra["device_map"] = device  # on the CPU, where weights are created anyway, no accelerate hooks
        weights = getattr(torch, compute_dtype(dtype))
        model = AutoModelForCausalLM.from_pretrained(model_id, revision=revision, dtype=weights, **extra)
        kind = model.device.type
        rows = options.max_logit_rows or MAX_LOGIT_ROWS.get(kind, MAX_LOGIT_ROWS["cuda"])
        if max_batch_tokens is None:
            max_batch_tokens = DEFAULT_MAX_BATCH_TOKENS
            if kind == "cuda":
                max_batch_tokens = cuda_token_budget(
                    model.config, compute_dtype(dtype), free_cuda_memory(str(model.device)), rows
                )
        return cls(
            model,
            model_id=model_id,
            model_revision=revision,
            max_batch_tokens=max_batch_tokens,
            max_logit_rows=rows,
            **kwargs,
        )

    @property
    def dtype(self) -> str:
        """The dtype the weights were loaded in (what the numbers depend on); `bnb-4bit` for the release's load."""
        if getattr(self.model, "is_loaded_in_4bit", False):
            return "bnb-4bit"
        return str(self.model.dtype).removeprefix("torch.")

    @property
    def device(self) -> str:
        """The device of the model's first parameters (inputs go there)."""
        return str(self.model.device)

    def hardware(self) -> HfHardware:
        """What the run loaded, with which memory settings, on which torch (recorded in the manifest); its model,
        for a sweep to time on the CPU."""
        import torch

        placement = getattr(self.model, "hf_device_map", None)
        gpu: str | None = None
        gpus: tuple[str, ...] = ()
        if self.model.device.type == "cuda":
            gpu = torch.cuda.get_device_name(self.model.device)
            gpus = tuple(
                sorted(
                    {torch.cuda.get_device_name(d) for d in (placement or {}).values() if str(d) not in ("cpu", "disk")}
                )
            ) or (gpu,)
        return HfHardware(
            dtype=self.dtype,
            device=self.device,
            max_batch_tokens=self.max_batch_tokens,
            max_logit_rows=self.max_logit_rows,
            device_map=tuple(sorted({str(d) for d in placement.values()})) if placement else None,
            gpu=gpu,
            gpus=gpus,
            torch=torch.__version__,
            threads=torch.get_num_threads(),
            timed_model=self.model,
        )

    def close(self) -> None:
        """Nothing to shut down: no engine process; the weights are freed with the backend."""

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        import torch

        results: list[ScoreResult | None] = [None] * len(requests)
        with torch.inference_mode():
            for batch in hf_batches([r.context for r in requests], self.max_batch_tokens):
                for i, result in self._score_backing_off(requests, batch):
                    results[i] = result
        return [r for r in results if r is not None]

    def _score_backing_off(self, requests: Sequence[ScoreRequest], batch: list[int]) -> list[tuple[int, ScoreResult]]:
        """Score `batch`; out of memory, halve the token budget and retry it in smaller chunks.

        The retry runs after the `except` block, never inside it: inside, the exception's
        traceback (and with it every frame of the failed attempt, its KV caches and logits)
        would stay alive through the retry, so the retry would run beside the memory that just
        ran out. Out of memory is what `runners.model.device.is_out_of_memory` says it is: torch's
        OutOfMemoryError, and cuBLAS or allocator failures that arrive as a plain RuntimeError.
        """
        import torch

        from runners.model.device import is_out_of_memory

        done: list[tuple[int, ScoreResult]] = []
        todo = [batch]
        while todo:
            part = todo.pop(0)
            try:
                done.extend(zip(part, self._score_batch([requests[i] for i in part]), strict=True))
                continue
            except RuntimeError as exc:  # torch.OutOfMemoryError is a RuntimeError
                if not is_out_of_memory(exc) or (len(part) == 1 and self.max_batch_tokens <= 1):
                    raise
            # out of the except block: the failed attempt's frames are gone; collect any cycles among them
            gc.collect()
            self.max_batch_tokens = max(1, self.max_batch_tokens // 2)
            self.max_logit_rows = max(1, self.max_logit_rows // 2)
            if self.model.device.type == "cuda":
                torch.cuda.empty_cache()
            if len(part) == 1:
                halves = [part]
            else:
                chunks = budget_chunks(part, lambda i: len(requests[i].context), self.max_batch_tokens)
                halves = chunks if self.max_batch_tokens > 1 else [[i] for i in part]
                if len(halves) == 1:
                    halves = [part[: len(part) // 2], part[len(part) // 2 :]]
            todo[:0] = halves
        return done

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        """Generation mode (`runners.backends.hf.generate`): greedy requests batched, sampled ones alone."""
        if self.tokenizer is None:
            raise ValueError("HFBackend.generate needs the tokenizer (HFBackend(..., tokenizer=...))")
        return generate(self.model, self.tokenizer, requests, self.max_batch_tokens)

    def _score_batch(self, requests: list[ScoreRequest]) -> list[ScoreResult]:
        """Score one batch: its context radix tree level by level, then one packed continuation row per request."""
        device = self.model.device
        contexts = [r.context for r in requests]
        nodes = context_radix(contexts, self.min_shared_prefix)
        computed = radix_attribution(nodes, len(requests))
        # every node's tokens get pool slots; a node's path is its ancestors' slots, then its own
        paths: list[list[int]] = []
        used = 0
        for node in nodes:
            above = paths[node.parent] if node.parent >= 0 else []
            paths.append([*above, *range(used, used + len(node.tokens))])
            used += len(node.tokens)
        pool = KVPool(used, self.model.config)
        end_node = {i: k for k, node in enumerate(nodes) for i in node.ends}
        # the ids each request reads after its context: candidates, then its continuations' first tokens
        wanted = [tuple(dict.fromkeys((*r.candidates, *(c[0] for c in r.continuations)))) for r in requests]
        after: list[dict[int, float]] = [{} for _ in requests]

        # 1. the context tree, level by level: each node's tokens run once, over its ancestors' cache
        levels: dict[int, list[int]] = {}
        for k, node in enumerate(nodes):
            levels.setdefault(node.level, []).append(k)
        for level in sorted(levels):
            members = sorted(levels[level], key=lambda k: len(paths[k]))
            for chunk in budget_chunks(members, lambda k: len(paths[k]), self.max_batch_tokens):
                rows = [
                    TreeRow(
                        past=paths[k][: nodes[k].start],
                        tokens=nodes[k].tokens,
                        parents=range(-1, len(nodes[k].tokens) - 1),
                        positions=range(nodes[k].start, nodes[k].start + len(nodes[k].tokens)),
                        slots=paths[k][nodes[k].start :],
                    )
                    for k in chunk
                ]
                logits = tree_pass(self.model, pool, rows, all_logits=False)
                ends = [(b, i) for b, k in enumerate(chunk) for i in nodes[k].ends]
                if ends:
                    logprobs = LogSoftmax(logits[:, -1, :])
                    spots = [(b, t) for b, i in ends for t in wanted[i]]
                    values = gather_logprobs(logprobs, device, *zip(*spots, strict=True)) if spots else np.zeros(0)
                    at = 0
                    for _, i in ends:
                        after[i] = dict(zip(wanted[i], values[at : at + len(wanted[i])].tolist(), strict=True))
                        at += len(wanted[i])
                    del logprobs
                del logits

        # 2. each request's continuation trie in one packed row over its context's cache
        token_lp: list[list[np.ndarray]] = []
        next_lp: list[list[np.ndarray]] = []
        fed: list[list[tuple[int, ...]]] = []
        bounded = {i: TrieExpansion(r) for i, r in enumerate(requests) if r.bound is not None}
        for i, exp in bounded.items():
            exp.root(after[i])
        if bounded:
            bounded_passes(
                self.model,
                pool,
                bounded,
                {i: paths[end_node[i]] for i in bounded},
                max_batch_tokens=self.max_batch_tokens,
                max_logit_rows=self.max_logit_rows,
            )
        for i, r in enumerate(requests):
            if i in bounded:
                token_lp.append([])
                next_lp.append([])
                fed.append([])
                continue
            token_lp.append(
                [np.array([after[i][c[0]]] + [np.nan] * (len(c) - 1), dtype=np.float64) for c in r.continuations]
            )
            next_lp.append([np.full((len(c), len(r.candidates)), np.nan) for c in r.continuations])
            fed.append(continuation_nodes(r.continuations, bool(r.candidates)) if r.continuations else [])
        todo = [i for i in range(len(requests)) if fed[i]]
        cost = lambda i: len(contexts[i]) + len(fed[i])  # noqa: E731
        for group in budget_chunks(todo, cost, self.max_batch_tokens):
            for chunk in budget_chunks(group, lambda i: len(fed[i]), self.max_logit_rows):
                self._continuation_pass(pool, requests, chunk, fed, paths, end_node, token_lp, next_lp)

        results = []
        for i, r in enumerate(requests):
            if i in bounded:
                results.append(bounded[i].result(computed[i] + bounded[i].positions))
                continue
            conts = tuple(ContinuationScore(token_lp[i][j], next_lp[i][j]) for j in range(len(r.continuations)))
            cands = np.array([after[i][c] for c in r.candidates], dtype=np.float64)
            results.append(ScoreResult(conts, cands, len(r.context), computed[i] + len(fed[i])))
        return results

    def _continuation_pass(
        self,
        pool: KVPool,
        requests: list[ScoreRequest],
        chunk: list[int],
        fed: list[list[tuple[int, ...]]],
        paths: list[list[int]],
        end_node: dict[int, int],
        token_lp: list[list[np.ndarray]],
        next_lp: list[list[np.ndarray]],
    ) -> None:
        """One pass over `chunk`'s continuation tries, one row each; fills their token and candidate log-probs."""
        device = self.model.device
        rows = []
        where: list[dict[tuple[int, ...], int]] = []
        for i in chunk:
            index = {node: j for j, node in enumerate(fed[i])}
            where.append(index)
            n = len(requests[i].context)
            rows.append(
                TreeRow(
                    past=paths[end_node[i]],
                    tokens=[node[-1] for node in fed[i]],
                    parents=[index[node[:-1]] if len(node) > 1 else -1 for node in fed[i]],
                    positions=[n + len(node) - 1 for node in fed[i]],
                )
            )
        width = max(len(row.tokens) for row in rows)
        logits = tree_pass(self.model, pool, rows, all_logits=True)
        logprobs = LogSoftmax(logits)
        # tokens after the first: the one at depth m is read at the node of its first m tokens
        spots: list[tuple[int, int, int]] = []
        for b, i in enumerate(chunk):
            pad = width - len(fed[i])
            for cont in requests[i].continuations:
                spots.extend((b, pad + where[b][cont[:m]], cont[m]) for m in range(1, len(cont)))
        later = gather_logprobs(logprobs, device, *zip(*spots, strict=True)) if spots else np.zeros(0)
        at = 0
        for i in chunk:
            for j, cont in enumerate(requests[i].continuations):
                token_lp[i][j][1:] = later[at : at + len(cont) - 1]
                at += len(cont) - 1
        wanted = {b: requests[i].candidates for b, i in enumerate(chunk)}
        candidates = candidate_logprobs_by_row(logprobs, device, wanted)
        for b, values in candidates.items():
            i = chunk[b]
            pad = width - len(fed[i])
            for j, cont in enumerate(requests[i].continuations):
                next_lp[i][j] = values[[pad + where[b][cont[: m + 1]] for m in range(len(cont))]]
        # this chunk's logits and log-sum-exps go before the next chunk's are built
        del logits, logprobs


def load(model: str, options: HfOptions, resolved: Resolved) -> HFBackend:
    """The registry's loader (`runners.backends.hf.spec`): its own options and what `load_backend` settled."""
    on, tokenizer = resolved.device, resolved.tokenizer
    return HFBackend.from_pretrained(
        model, options, revision=resolved.revision, dtype=resolved.dtype, device=on, tokenizer=tokenizer
    )
