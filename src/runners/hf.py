"""The transformers backend: `Backend.score` with one context pass reused by all continuations.

This is the only runners module that imports torch or transformers, and it does so inside
functions, so `import runners` works without the `hf` extra.

How a batch of requests is scored (`runners.token_accounting` plans every step, so
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

Each pass takes its pasts from the pool into a fresh buffer that the pass fills in place
(`_prefilled_layer_class`), and its logits are released before the next pass is built. A
request's numbers do not depend on the batch around it beyond float32 round-off (padding
and batch shapes change the order of sums: ~1e-7 in probabilities). The custom 4D mask
replaces transformers' own, so models whose layers need more than a causal mask (sliding
windows) are not supported by this path.

Out of memory, a batch is retried with half the token budget (down to one request), and
the smaller budget is kept for later batches. The retry runs after the failed attempt's
memory is released (outside the `except` block), and each pass's cache and logits are
released before the next pass's are built, so the peak is one pass's, not two.

Log-probabilities come without a float64 copy of the logits (`_LogSoftmax`): each position's
log-sum-exp is the max plus the log of the sum of the float32 `exp(logit - max)` terms,
summed in fixed blocks of 128 vocabulary entries in float32 and the block sums in float64
(~1e-7 nats, the float32 exponentials' rounding; and, unlike one float32 sum over the
vocabulary, the same whatever the batch around a row: results must not depend on batching).
The exponentials go through one reusable scratch buffer of a few rows at a time, not a fresh
tensor the size of the logits: on the CPU, fresh tensors that large cost more in page faults
than the arithmetic. The
scored logits are gathered in float64 and the log-sum-exp subtracted. torch's float32
`log_softmax` is off by ~2e-5 nats per token with a consistent sign, which adds up over an
option's tokens. Only the scored entries move to the CPU. Everything runs under
`torch.inference_mode()`.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .backend import ContinuationScore, GenerateRequest, Generation, ScoreRequest, ScoreResult, cut_at_stop
from .token_accounting import (
    DEFAULT_MAX_BATCH_TOKENS,
    MIN_SHARED_PREFIX,
    context_radix,
    continuation_nodes,
    hf_batches,
    radix_attribution,
)

#: default cap on logit rows (rows x fed positions) of one continuation pass: bounds the
#: (rows, positions, vocabulary) logits tensor and the log-sum-exp pass over it
DEFAULT_MAX_LOGIT_ROWS = 512
#: vocabulary entries whose exponentials are summed in float32 before the float64 sum
_LSE_BLOCK = 128
#: size (elements) of the log-sum-exp scratch buffer per device type: a few rows at a time on
#: the CPU, where it stays in reused memory; large on accelerators, where launches cost more
_SCRATCH_ELEMENTS = {"cpu": 1 << 22, "cuda": 1 << 28}


def shared_prefix_length(contexts: Sequence[Sequence[int]]) -> int:
    """Length of the longest prefix all `contexts` share, short of the shortest one's last token.

    The last token of every context must run in the per-request pass: its logits are the
    next-token distribution after that context.
    """
    limit = min(len(c) for c in contexts) - 1
    first = contexts[0]
    n = 0
    while n < limit and all(c[n] == first[n] for c in contexts):
        n += 1
    return n


class _LogSoftmax:
    """log_softmax(logits) over the last axis, read at chosen entries only, in float64.

    `[index]` works like indexing the log-softmax tensor: it gathers the float32 logits there
    and subtracts the float64 log-sum-exp of their positions.
    """

    def __init__(self, logits: Any) -> None:
        import torch

        if logits.dtype in (torch.float16, torch.bfloat16):
            logits = logits.float()  # a half-precision exp would round every term to 3 digits
        self.logits = logits
        vocab = logits.shape[-1]
        flat = logits.reshape(-1, vocab)
        peak = flat.max(dim=-1).values
        lse = torch.empty(flat.shape[0], dtype=torch.float64, device=flat.device)
        step = max(1, _SCRATCH_ELEMENTS.get(flat.device.type, _SCRATCH_ELEMENTS["cuda"]) // vocab)
        scratch = torch.empty((min(step, flat.shape[0]), vocab), dtype=flat.dtype, device=flat.device)
        whole = vocab - vocab % _LSE_BLOCK
        for start in range(0, flat.shape[0], step):
            rows = slice(start, start + step)
            terms = scratch[: len(flat[rows])]
            torch.sub(flat[rows], peak[rows, None], out=terms).exp_()
            # fixed blocks summed in float32, their sums in float64: the same bits in any batch
            total = terms[:, :whole].reshape(len(terms), -1, _LSE_BLOCK).sum(-1).sum(-1, dtype=torch.float64)
            if whole < vocab:
                total += terms[:, whole:].sum(-1, dtype=torch.float64)
            lse[rows] = peak[rows].double() + torch.log(total)
        self.lse = lse.reshape(logits.shape[:-1])

    def __getitem__(self, index: Any) -> Any:
        index = index if isinstance(index, tuple) else (index,)
        picked = self.logits[index].double()
        # an index that reaches the vocabulary axis addresses positions with all but its last part
        lse = self.lse[index[:-1] if len(index) == self.logits.dim() else index]
        while lse.dim() < picked.dim():
            lse = lse.unsqueeze(-1)
        return picked - lse


def _chunks(items: list, cost, budget: int) -> Iterator[list]:
    """Consecutive groups whose cost (rows x the group's largest per-row cost) stays within budget."""
    group: list = []
    worst = 0
    for item in items:
        c = cost(item)
        if group and (len(group) + 1) * max(worst, c) > budget:
            yield group
            group, worst = [], 0
        group.append(item)
        worst = max(worst, c)
    if group:
        yield group


def _gather(logprobs: _LogSoftmax, device: Any, *axes: Sequence[int]) -> np.ndarray:
    """`logprobs[axes[0][i], axes[1][i], ...]` for every i, as one float64 array moved in one transfer."""
    import torch

    index = tuple(torch.tensor(list(axis), dtype=torch.long, device=device) for axis in axes)
    if not index or not len(index[0]):
        return np.zeros(0)
    return logprobs[index].cpu().numpy()


def _candidate_logprobs(
    logprobs: _LogSoftmax, device: Any, wanted: dict[int, tuple[int, ...]]
) -> dict[int, np.ndarray]:
    """{row: log-probabilities of its candidate ids at every position of that row} (float64).

    Rows asking for the same candidates (a config's are all the same) are read together: one
    gather and one transfer per distinct candidate set, not one per row.
    """
    import torch

    groups: dict[tuple[int, ...], list[int]] = {}
    for row, candidates in wanted.items():
        if candidates:
            groups.setdefault(candidates, []).append(row)
    out: dict[int, np.ndarray] = {}
    for candidates, members in groups.items():
        rows = torch.tensor(members, dtype=torch.long, device=device)
        cands = torch.tensor(candidates, dtype=torch.long, device=device)
        if logprobs.logits.dim() == 2:  # (rows, vocabulary): one position per row
            values = logprobs[rows[:, None], cands[None, :]]
        else:  # (rows, positions, vocabulary)
            positions = torch.arange(logprobs.logits.shape[1], device=device)
            values = logprobs[rows[:, None, None], positions[None, :, None], cands[None, None, :]]
        for member, value in zip(members, values.cpu().numpy(), strict=True):
            out[member] = value
    return out


@dataclass
class _TreeRow:
    """One row of a tree pass: tokens fed over a past taken from the pool (`HFBackend._tree_pass`)."""

    #: pool slots of the tokens before this row's (seen in full by every token of the row)
    past: Sequence[int]
    #: the token ids fed
    tokens: Sequence[int]
    #: per token, the index of its parent among this row's tokens; -1: it follows the past directly
    parents: Sequence[int]
    #: per token, its position id
    positions: Sequence[int]
    #: pool slots where the tokens' keys and values are kept (context passes), else None
    slots: Sequence[int] | None = None


def _ancestry(parents: Sequence[int]) -> np.ndarray:
    """(n, n) booleans: token q sees token k when k is q or one of its ancestors (parents come first)."""
    n = len(parents)
    if list(parents) == list(range(-1, n - 1)):  # a chain: causal
        return np.tril(np.ones((n, n), dtype=bool))
    seen = np.zeros((n, n), dtype=bool)
    for q, p in enumerate(parents):
        if p >= q:
            raise ValueError(f"token {q}'s parent {p} does not come before it")
        if p >= 0:
            seen[q] = seen[p]
        seen[q, q] = True
    return seen


_PREFILLED: list[type] = []


def _prefilled_layer_class() -> type:
    """A transformers `DynamicLayer` whose buffer already holds the past: `update` writes the new tokens in place.

    Made on first use (transformers is imported inside functions so `import runners` needs no
    torch). The pass's keys and values then cost one copy of the past, not two.
    """
    if not _PREFILLED:
        from transformers.cache_utils import DynamicLayer

        class _PrefilledLayer(DynamicLayer):
            def __init__(self, keys: Any, values: Any, past_len: int) -> None:
                super().__init__()
                self.keys, self.values = keys, values
                self.dtype, self.device = keys.dtype, keys.device
                self.is_initialized = True
                self.filled = past_len

            def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
                end = self.filled + key_states.shape[-2]
                self.keys[:, :, self.filled : end] = key_states
                self.values[:, :, self.filled : end] = value_states
                self.filled = end
                return self.keys[:, :, :end], self.values[:, :, :end]

            def get_seq_length(self) -> int:
                return self.filled

        _PREFILLED.append(_PrefilledLayer)
    return _PREFILLED[0]


class _Pool:
    """The keys and values of a batch's context tokens, by slot (one slot per radix-tree token).

    A pass's past is gathered from here into one row per request, so each context token is
    computed once however many contexts and continuations read it. Zero-filled, so a padding
    slot under the mask never holds NaN (0 x NaN would still reach the output).
    """

    def __init__(self, size: int, config: Any) -> None:
        self.size = size
        self.config = config
        self.keys: list[Any] = []
        self.values: list[Any] = []

    def cache(self, index: Any, new_tokens: int) -> Any:
        """A cache holding the slots `index` (rows, positions) per row, with room for `new_tokens` more.

        The past is copied once into a buffer that the pass then fills in place
        (`_prefilled_layer`), not concatenated with the new keys and values on every layer:
        that `torch.cat` copied the gathered (strided) past a second time. None: no past.
        """
        from transformers import DynamicCache

        cache = DynamicCache(config=self.config)
        if index is None:
            return cache
        layer_class = _prefilled_layer_class()
        rows, past_len = index.shape
        for n, (keys, values) in enumerate(zip(self.keys, self.values, strict=True)):
            shape = (rows, keys.shape[1], past_len + new_tokens, keys.shape[2])
            k = keys.new_empty(shape)
            v = values.new_empty(shape)
            k[:, :, :past_len] = keys[index].permute(0, 2, 1, 3)  # (rows, positions, heads, dim) -> heads first
            v[:, :, :past_len] = values[index].permute(0, 2, 1, 3)
            cache.layers[n] = layer_class(k, v, past_len)
        return cache

    def store(self, cache: Any, past_len: int, slots: Any) -> None:
        """Keep the new tokens' keys and values (after `past_len` cached positions) at `slots` (-1: padding)."""
        import torch

        keep = slots >= 0
        where = slots[keep]
        for n, layer in enumerate(cache.layers):
            new_k = layer.keys[:, :, past_len:].permute(0, 2, 1, 3)[keep]
            new_v = layer.values[:, :, past_len:].permute(0, 2, 1, 3)[keep]
            if len(self.keys) <= n:
                shape = (self.size, *new_k.shape[1:])
                self.keys.append(torch.zeros(shape, dtype=new_k.dtype, device=new_k.device))
                self.values.append(torch.zeros(shape, dtype=new_v.dtype, device=new_v.device))
            self.keys[n][where] = new_k
            self.values[n][where] = new_v


class HFBackend:
    """Scores token ids with a transformers causal LM (see the module docstring)."""

    name = "hf"

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
        *,
        revision: str | None = None,
        dtype: str = "float32",
        device: str = "cpu",
        device_map: str | None = None,
        gguf_file: str | None = None,
        max_batch_tokens: int | None = None,
        max_logit_rows: int | None = None,
        **kwargs: Any,
    ) -> HFBackend:
        """Load `model_id` (Hub id or local folder; with `gguf_file`, that GGUF file in it) in `dtype` on `device`.

        The weights are loaded straight onto `device` (transformers' `device_map`), never first
        into host memory and then moved: an 8B bf16 model is 16 GB. `device_map="auto"` spreads
        the layers over every visible GPU (accelerate's placement), for models one GPU cannot
        hold. Unset budgets get the device's defaults (`runners.device`): on CUDA the token
        budget follows the free memory left after loading.
        """
        import torch
        from transformers import AutoModelForCausalLM

        from .device import MAX_LOGIT_ROWS, cuda_token_budget, device_type, free_cuda_memory

        extra: dict[str, Any] = {"gguf_file": gguf_file} if gguf_file else {}
        if device_map is not None:
            extra["device_map"] = device_map
        elif device_type(device) != "cpu":
            extra["device_map"] = device  # on the CPU, where weights are created anyway, no accelerate hooks
        model = AutoModelForCausalLM.from_pretrained(model_id, revision=revision, dtype=getattr(torch, dtype), **extra)
        kind = model.device.type
        rows = max_logit_rows or MAX_LOGIT_ROWS.get(kind, MAX_LOGIT_ROWS["cuda"])
        if max_batch_tokens is None:
            max_batch_tokens = DEFAULT_MAX_BATCH_TOKENS
            if kind == "cuda":
                max_batch_tokens = cuda_token_budget(model.config, dtype, free_cuda_memory(str(model.device)), rows)
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
        """The dtype the weights were loaded in (what the numbers depend on)."""
        return str(self.model.dtype).removeprefix("torch.")

    @property
    def device(self) -> str:
        """The device of the model's first parameters (inputs go there)."""
        return str(self.model.device)

    def hardware(self) -> dict[str, Any]:
        """What the run loaded, with which memory settings, on which torch (recorded in the manifest)."""
        import torch

        info: dict[str, Any] = {
            "dtype": self.dtype,
            "device": self.device,
            "max_batch_tokens": self.max_batch_tokens,  # after any out-of-memory halving
            "max_logit_rows": self.max_logit_rows,
        }
        placement = getattr(self.model, "hf_device_map", None)
        if placement:
            info["device_map"] = sorted({str(d) for d in placement.values()})
        if self.model.device.type == "cuda":
            info["gpu"] = torch.cuda.get_device_name(self.model.device)
            info["gpus"] = sorted(
                {torch.cuda.get_device_name(d) for d in (placement or {}).values() if str(d) not in ("cpu", "disk")}
            ) or [info["gpu"]]
        # float32 matmuls' last bits depend on the thread count
        info.update(torch=torch.__version__, threads=torch.get_num_threads())
        return info

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
        ran out. Out of memory is what `runners.device.is_out_of_memory` says it is: torch's
        OutOfMemoryError, and cuBLAS or allocator failures that arrive as a plain RuntimeError.
        """
        import torch

        from .device import is_out_of_memory

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
                chunks = _chunks(part, lambda i: len(requests[i].context), self.max_batch_tokens)
                halves = list(chunks) if self.max_batch_tokens > 1 else [[i] for i in part]
                if len(halves) == 1:
                    halves = [part[: len(part) // 2], part[len(part) // 2 :]]
            todo[:0] = halves
        return done

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        """Greedy requests in left-padded batches (under the token budget); sampled ones one at a time.

        A batch shares one generation config, so greedy requests are grouped by `max_tokens`
        and stop strings. Sampling draws from torch's global generator, seeded per request, so
        a sampled request runs alone: its text then depends on its seed only, not its batch.
        """
        import torch

        if self.tokenizer is None:
            raise ValueError("HFBackend.generate needs the tokenizer (HFBackend(..., tokenizer=...))")
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else eos
        # left padding is masked out, so any id will do when the tokenizer names none
        pad = 0 if pad is None else pad if isinstance(pad, int) else pad[0]
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            groups.setdefault(("sampled", i) if r.temperature > 0 else ("greedy", r.max_tokens, r.stop), []).append(i)
        out: list[Generation | None] = [None] * len(requests)
        with torch.inference_mode():
            for members in groups.values():
                members.sort(key=lambda i: len(requests[i].context))
                cost = lambda i: len(requests[i].context) + requests[i].max_tokens  # noqa: E731
                for chunk in _chunks(members, cost, self.max_batch_tokens):
                    for i, gen in zip(chunk, self._generate_batch([requests[i] for i in chunk], eos, pad), strict=True):
                        out[i] = gen
        return [g for g in out if g is not None]

    def _generate_batch(self, requests: list[GenerateRequest], eos: Any, pad: int) -> list[Generation]:
        """One `model.generate` call over requests that share every sampling setting, left-padded."""
        import torch
        from transformers import GenerationConfig

        r = requests[0]
        sampled = r.temperature > 0
        # every field that changes the output is stated: None would inherit the model's config
        config = GenerationConfig(
            max_new_tokens=r.max_tokens,
            min_new_tokens=0,
            do_sample=sampled,
            temperature=r.temperature if sampled else 1.0,
            top_p=r.top_p if sampled else 1.0,
            top_k=0,
            min_p=None,
            num_beams=1,
            repetition_penalty=1.0,
            no_repeat_ngram_size=0,
            eos_token_id=eos,
            pad_token_id=pad,
            stop_strings=list(r.stop) or None,
        )
        if sampled and r.seed is not None:
            torch.manual_seed(r.seed)
        width = max(len(q.context) for q in requests)
        ids = torch.full((len(requests), width), pad, dtype=torch.long)
        mask = torch.zeros((len(requests), width), dtype=torch.long)
        for b, q in enumerate(requests):
            ids[b, width - len(q.context) :] = torch.tensor(q.context)
            mask[b, width - len(q.context) :] = 1
        device = self.model.device
        rows = self.model.generate(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            generation_config=config,
            tokenizer=self.tokenizer,
        )[:, width:].tolist()
        del ids, mask
        eos_ids = {eos} if isinstance(eos, int) else set(eos or ())
        generations = []
        for q, new in zip(requests, rows, strict=True):
            # a row that finished early is filled with `pad` up to the longest row: cut it where it ended
            end = next((k for k, t in enumerate(new) if t in eos_ids), None)
            if end is not None:
                new = new[: end + 1]
            else:
                while len(requests) > 1 and new and new[-1] == pad:
                    new.pop()
            ended = bool(new) and new[-1] in eos_ids
            if ended:
                new = new[:-1]
            text, stopped = cut_at_stop(self.tokenizer.decode(new, skip_special_tokens=True), q.stop)
            generations.append(Generation(text, tuple(new), "stop" if (ended or stopped) else "length"))
        return generations

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
        pool = _Pool(used, self.model.config)
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
            for chunk in _chunks(members, lambda k: len(paths[k]), self.max_batch_tokens):
                rows = [
                    _TreeRow(
                        past=paths[k][: nodes[k].start],
                        tokens=nodes[k].tokens,
                        parents=range(-1, len(nodes[k].tokens) - 1),
                        positions=range(nodes[k].start, nodes[k].start + len(nodes[k].tokens)),
                        slots=paths[k][nodes[k].start :],
                    )
                    for k in chunk
                ]
                logits = self._tree_pass(pool, rows, all_logits=False)
                ends = [(b, i) for b, k in enumerate(chunk) for i in nodes[k].ends]
                if ends:
                    logprobs = _LogSoftmax(logits[:, -1, :])
                    spots = [(b, t) for b, i in ends for t in wanted[i]]
                    values = _gather(logprobs, device, *zip(*spots, strict=True)) if spots else np.zeros(0)
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
        for i, r in enumerate(requests):
            token_lp.append(
                [np.array([after[i][c[0]]] + [np.nan] * (len(c) - 1), dtype=np.float64) for c in r.continuations]
            )
            next_lp.append([np.full((len(c), len(r.candidates)), np.nan) for c in r.continuations])
            fed.append(continuation_nodes(r.continuations, bool(r.candidates)) if r.continuations else [])
        todo = [i for i in range(len(requests)) if fed[i]]
        cost = lambda i: len(contexts[i]) + len(fed[i])  # noqa: E731
        for group in _chunks(todo, cost, self.max_batch_tokens):
            for chunk in _chunks(group, lambda i: len(fed[i]), self.max_logit_rows):
                self._continuation_pass(pool, requests, chunk, fed, paths, end_node, token_lp, next_lp)

        results = []
        for i, r in enumerate(requests):
            conts = tuple(ContinuationScore(token_lp[i][j], next_lp[i][j]) for j in range(len(r.continuations)))
            cands = np.array([after[i][c] for c in r.candidates], dtype=np.float64)
            results.append(ScoreResult(conts, cands, len(r.context), computed[i] + len(fed[i])))
        return results

    def _continuation_pass(
        self,
        pool: _Pool,
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
                _TreeRow(
                    past=paths[end_node[i]],
                    tokens=[node[-1] for node in fed[i]],
                    parents=[index[node[:-1]] if len(node) > 1 else -1 for node in fed[i]],
                    positions=[n + len(node) - 1 for node in fed[i]],
                )
            )
        width = max(len(row.tokens) for row in rows)
        logits = self._tree_pass(pool, rows, all_logits=True)
        logprobs = _LogSoftmax(logits)
        # tokens after the first: the one at depth m is read at the node of its first m tokens
        spots = []
        for b, i in enumerate(chunk):
            pad = width - len(fed[i])
            for cont in requests[i].continuations:
                spots.extend((b, pad + where[b][cont[:m]], cont[m]) for m in range(1, len(cont)))
        later = _gather(logprobs, device, *zip(*spots, strict=True)) if spots else np.zeros(0)
        at = 0
        for i in chunk:
            for j, cont in enumerate(requests[i].continuations):
                token_lp[i][j][1:] = later[at : at + len(cont) - 1]
                at += len(cont) - 1
        candidates = _candidate_logprobs(logprobs, device, {b: requests[i].candidates for b, i in enumerate(chunk)})
        for b, values in candidates.items():
            i = chunk[b]
            pad = width - len(fed[i])
            for j, cont in enumerate(requests[i].continuations):
                next_lp[i][j] = values[[pad + where[b][cont[: m + 1]] for m in range(len(cont))]]
        # this chunk's logits and log-sum-exps go before the next chunk's are built
        del logits, logprobs

    def _tree_pass(self, pool: _Pool, rows: list[_TreeRow], *, all_logits: bool) -> Any:
        """One forward pass of token trees over pooled caches (see `_TreeRow`); the logits, last or all positions.

        Each row's tokens are LEFT-padded (so the last position is every row's last token) and
        see, through a 4D float mask, the row's past in full and, among the row's own tokens,
        their ancestors and themselves only; position ids are explicit. A padding token sees
        only itself (a query that sees nothing would be NaN). Pasts are gathered from the pool
        into one row each, padded with slot 0 under the mask. Tokens with slots have their
        keys and values stored into the pool.
        """
        import torch

        device = self.model.device
        dtype = self.model.dtype
        n_rows = len(rows)
        past_len = max(len(r.past) for r in rows)
        width = max(len(r.tokens) for r in rows)
        ids = np.zeros((n_rows, width), dtype=np.int64)
        positions = np.zeros((n_rows, width), dtype=np.int64)
        past = np.zeros((n_rows, past_len), dtype=np.int64)
        allowed = np.zeros((n_rows, width, past_len + width), dtype=bool)
        slots = np.full((n_rows, width), -1, dtype=np.int64)
        for b, r in enumerate(rows):
            n = len(r.tokens)
            pad = width - n
            ids[b, pad:] = r.tokens
            positions[b, pad:] = r.positions
            past[b, : len(r.past)] = r.past
            allowed[b, pad:, : len(r.past)] = True
            allowed[b, pad:, past_len + pad :] = _ancestry(r.parents)
            allowed[b, np.arange(pad), past_len + np.arange(pad)] = True
            if r.slots is not None:
                slots[b, pad:] = r.slots
        mask = torch.zeros((n_rows, 1, width, past_len + width), dtype=dtype, device=device)
        mask.masked_fill_(~torch.from_numpy(allowed).to(device)[:, None], torch.finfo(dtype).min)
        cache = pool.cache(torch.from_numpy(past).to(device) if past_len else None, width)
        out = self.model(
            input_ids=torch.from_numpy(ids).to(device),
            attention_mask=mask,
            position_ids=torch.from_numpy(positions).to(device),
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=0 if all_logits else 1,
        )
        if (slots >= 0).any():
            pool.store(out.past_key_values, past_len, torch.from_numpy(slots).to(device))
        logits = out.logits
        del out, cache, mask
        return logits
