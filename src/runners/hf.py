"""The transformers backend: `Backend.score` with one context pass reused by all continuations.

This is the only runners module that imports torch or transformers, and it does so inside
functions, so `import runners` works without the `hf` extra.

How a batch of requests is scored:

1. Contexts, sorted by length and grouped under a token budget, run once each, LEFT-padded,
   with explicit position ids (so padding never shifts positions) and only the last
   position's logits kept: that row is the next-token distribution after each context. It
   gives every continuation's first-token log-probability and the candidates after the
   context.
2. The KV cache of that pass is then expanded by row selection: one row per continuation
   that still needs a pass, cut into chunks under the token budget (sorted by length, so
   little padding). Each chunk feeds its continuations' tokens, RIGHT-padded; the attention
   mask is the context's mask (left padding) followed by the continuation's. A continuation
   feeds all its tokens but the last (whose logits score nothing) unless candidates are
   asked for, when the logits after its last token are needed too. One-token continuations
   without candidates need no second pass at all.

Out of memory, a batch is retried with half the token budget (down to one request), and
the smaller budget is kept for later batches.

Log-probabilities come without a float64 copy of the logits (`_LogSoftmax`): each position's
log-sum-exp is the max plus the log of the float32 `exp(logit - max)` terms summed in float64
(~1e-8 nats from float64, and, unlike a float32 sum, the same whatever the batch around a
row: results must not depend on batching); the scored logits are gathered in float64
and the log-sum-exp subtracted. torch's float32 `log_softmax` is off by ~2e-5 nats per token
with a consistent sign, which adds up over an option's tokens; a float64 copy of every logit
cost 7% of scoring time. Only the scored entries move to the CPU. Everything runs under
`torch.inference_mode()`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .backend import ContinuationScore, GenerateRequest, Generation, ScoreRequest, ScoreResult, cut_at_stop

#: default budget of tokens (rows x padded length, cache included) in one forward pass
DEFAULT_MAX_BATCH_TOKENS = 8192
#: default cap on logit rows (rows x fed positions) of one continuation pass: bounds the
#: (rows, positions, vocabulary) logits tensor and its float64 log-softmax
DEFAULT_MAX_LOGIT_ROWS = 512


class _LogSoftmax:
    """log_softmax(logits) over the last axis, read at chosen entries only, in float64.

    `[index]` works like indexing the log-softmax tensor: it gathers the float32 logits there
    and subtracts the float64 log-sum-exp of their positions.
    """

    def __init__(self, logits: Any) -> None:
        import torch

        self.logits = logits
        peak = logits.max(dim=-1, keepdim=True).values
        total = torch.exp(logits - peak).sum(dim=-1, dtype=torch.float64)  # float64: the same bits in any batch
        self.lse = peak.squeeze(-1).double() + torch.log(total)

    def __getitem__(self, index: Any) -> Any:
        index = index if isinstance(index, tuple) else (index,)
        picked = self.logits[index].double()
        # an index that reaches the vocabulary axis addresses positions with all but its last part
        lse = self.lse[index[:-1] if len(index) == self.logits.dim() else index]
        while lse.dim() < picked.dim():
            lse = lse.unsqueeze(-1)
        return picked - lse


@dataclass
class _Row:
    request: int  # index into the context batch
    continuation: int
    feed: tuple[int, ...]  # tokens fed in the continuation pass


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


def _select_cache(cache: Any, index: Any) -> Any:
    """A new cache holding the rows `index` of `cache` (rows may repeat); `cache` is left intact."""
    new = copy.copy(cache)
    new.layers = [copy.copy(layer) for layer in cache.layers]
    for layer in new.layers:
        layer.batch_select_indices(index)
    return new


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
        tokenizer: Any = None,
    ) -> None:
        self.model = model.eval()
        #: needed only by `generate` (decoding and stop strings)
        self.tokenizer = tokenizer
        self.model_id = model_id or str(getattr(model.config, "name_or_path", "") or type(model).__name__)
        self.model_revision = model_revision or getattr(model.config, "_commit_hash", None)
        self.max_batch_tokens = max_batch_tokens
        self.max_logit_rows = max_logit_rows

    @classmethod
    def from_pretrained(
        cls,
        model_id: str,
        *,
        revision: str | None = None,
        dtype: str = "float32",
        device: str = "cpu",
        gguf_file: str | None = None,
        **kwargs: Any,
    ) -> HFBackend:
        """Load `model_id` (Hub id or local folder; with `gguf_file`, that GGUF file in it) in `dtype` on `device`."""
        import torch
        from transformers import AutoModelForCausalLM

        extra = {"gguf_file": gguf_file} if gguf_file else {}
        model = AutoModelForCausalLM.from_pretrained(model_id, revision=revision, dtype=getattr(torch, dtype), **extra)
        model.to(device)
        return cls(model, model_id=model_id, model_revision=revision, **kwargs)

    @property
    def dtype(self) -> str:
        return str(self.model.dtype).removeprefix("torch.")

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        import torch

        results: list[ScoreResult | None] = [None] * len(requests)
        order = sorted(range(len(requests)), key=lambda i: len(requests[i].context))
        with torch.inference_mode():
            for batch in list(_chunks(order, lambda i: len(requests[i].context), self.max_batch_tokens)):
                for i, result in self._score_backing_off(requests, batch):
                    results[i] = result
        return [r for r in results if r is not None]

    def _score_backing_off(self, requests: Sequence[ScoreRequest], batch: list[int]) -> list[tuple[int, ScoreResult]]:
        """Score `batch`; out of memory, halve the token budget and retry it in smaller chunks."""
        import torch

        try:
            return list(zip(batch, self._score_batch([requests[i] for i in batch]), strict=True))
        except torch.OutOfMemoryError:
            if len(batch) == 1 and self.max_batch_tokens <= 1:
                raise
            self.max_batch_tokens = max(1, self.max_batch_tokens // 2)
            self.max_logit_rows = max(1, self.max_logit_rows // 2)
            if self.model.device.type == "cuda":
                torch.cuda.empty_cache()
            if len(batch) == 1:
                return self._score_backing_off(requests, batch)
            chunks = _chunks(batch, lambda i: len(requests[i].context), self.max_batch_tokens)
            halves = list(chunks) if self.max_batch_tokens > 1 else [[i] for i in batch]
            if len(halves) == 1:
                halves = [batch[: len(batch) // 2], batch[len(batch) // 2 :]]
            return [pair for part in halves for pair in self._score_backing_off(requests, part)]

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        """Greedy or sampled generation, one request at a time (a request's text never depends on its batch)."""
        import torch
        from transformers import GenerationConfig

        if self.tokenizer is None:
            raise ValueError("HFBackend.generate needs the tokenizer (HFBackend(..., tokenizer=...))")
        out: list[Generation] = []
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else eos
        with torch.inference_mode():
            for r in requests:
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
                ids = torch.tensor([r.context], device=self.model.device)
                new = self.model.generate(
                    input_ids=ids,
                    attention_mask=torch.ones_like(ids),
                    generation_config=config,
                    tokenizer=self.tokenizer,
                )[0, len(r.context) :].tolist()
                eos_ids = {eos} if isinstance(eos, int) else set(eos or ())
                ended = bool(new) and new[-1] in eos_ids
                if ended:
                    new = new[:-1]
                text, stopped = cut_at_stop(self.tokenizer.decode(new, skip_special_tokens=True), r.stop)
                reason = "stop" if (ended or stopped) else "length"
                out.append(Generation(text, tuple(new), reason))
        return out

    def _score_batch(self, requests: list[ScoreRequest]) -> list[ScoreResult]:
        import torch

        device = self.model.device
        from transformers import DynamicCache

        # 1. contexts, left-padded
        width = max(len(r.context) for r in requests)
        ids = torch.zeros((len(requests), width), dtype=torch.long)
        mask = torch.zeros((len(requests), width), dtype=torch.long)
        for b, r in enumerate(requests):
            ids[b, width - len(r.context) :] = torch.tensor(r.context)
            mask[b, width - len(r.context) :] = 1
        ids, mask = ids.to(device), mask.to(device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=DynamicCache(config=self.model.config),
            use_cache=True,
            logits_to_keep=1,
        )
        after_context = _LogSoftmax(out.logits[:, -1, :])
        cache = out.past_key_values
        context_len = mask.sum(-1)

        token_lp: list[list[np.ndarray]] = []
        next_lp: list[list[np.ndarray]] = []
        rows: list[_Row] = []
        for b, r in enumerate(requests):
            first = after_context[b, [c[0] for c in r.continuations]].cpu().numpy() if r.continuations else []
            token_lp.append([np.array([first[j]], dtype=np.float64) for j in range(len(r.continuations))])
            # filled by the continuation pass when there are candidates (every continuation then has one)
            next_lp.append([np.full((len(c), len(r.candidates)), np.nan) for c in r.continuations])
            for j, cont in enumerate(r.continuations):
                feed = cont if r.candidates else cont[:-1]
                if feed:
                    rows.append(_Row(b, j, feed))

        # 2. continuations over the selected cache rows, right-padded
        rows.sort(key=lambda row: len(row.feed))
        budget_rows = _chunks(rows, lambda row: width + len(row.feed), self.max_batch_tokens)
        for chunk in (
            c for group in budget_rows for c in _chunks(group, lambda row: len(row.feed), self.max_logit_rows)
        ):
            index = torch.tensor([row.request for row in chunk], device=device)
            length = max(len(row.feed) for row in chunk)
            feed = torch.zeros((len(chunk), length), dtype=torch.long)
            feed_mask = torch.zeros((len(chunk), length), dtype=torch.long)
            for k, row in enumerate(chunk):
                feed[k, : len(row.feed)] = torch.tensor(row.feed)
                feed_mask[k, : len(row.feed)] = 1
            feed, feed_mask = feed.to(device), feed_mask.to(device)
            out = self.model(
                input_ids=feed,
                attention_mask=torch.cat([mask[index], feed_mask], dim=-1),
                position_ids=context_len[index, None] + torch.arange(length, device=device)[None, :],
                past_key_values=_select_cache(cache, index),
                use_cache=True,
            )
            logprobs = _LogSoftmax(out.logits)
            for k, row in enumerate(chunk):
                r = requests[row.request]
                cont = r.continuations[row.continuation]
                rest = torch.tensor(cont[1:], dtype=torch.long, device=device)
                later = logprobs[k, torch.arange(len(cont) - 1, device=device), rest].cpu().numpy()
                token_lp[row.request][row.continuation] = np.concatenate(
                    [token_lp[row.request][row.continuation], later.astype(np.float64)]
                )
                if r.candidates:
                    cands = torch.tensor(r.candidates, dtype=torch.long, device=device)
                    next_lp[row.request][row.continuation] = (
                        logprobs[k, : len(cont)][:, cands].cpu().numpy().astype(np.float64)
                    )

        results = []
        for b, r in enumerate(requests):
            after = after_context[b, list(r.candidates)].cpu().numpy().astype(np.float64)
            conts = tuple(ContinuationScore(token_lp[b][j], next_lp[b][j]) for j in range(len(r.continuations)))
            results.append(ScoreResult(conts, after, len(r.context)))
        return results
