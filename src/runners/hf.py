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

Logits are turned into log-softmax in float64 (a float32 log-sum-exp over a 50k-token
vocabulary is off by ~2e-5 nats per token, with a consistent sign, which adds up over an
option's tokens), and only the scored entries are gathered and moved to the CPU. Everything
runs under `torch.inference_mode()`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .backend import ContinuationScore, ScoreRequest, ScoreResult

#: default budget of tokens (rows x padded length, cache included) in one forward pass
DEFAULT_MAX_BATCH_TOKENS = 8192
#: default cap on logit rows (rows x fed positions) of one continuation pass: bounds the
#: (rows, positions, vocabulary) logits tensor and its float64 log-softmax
DEFAULT_MAX_LOGIT_ROWS = 512


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
    ) -> None:
        self.model = model.eval()
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
        **kwargs: Any,
    ) -> HFBackend:
        """Load `model_id` (a Hub id or a local folder) in `dtype` on `device`."""
        import torch
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(model_id, revision=revision, dtype=getattr(torch, dtype))
        model.to(device)
        return cls(model, model_id=model_id, model_revision=revision, **kwargs)

    @property
    def dtype(self) -> str:
        return str(self.model.dtype).removeprefix("torch.")

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        import torch

        results: list[ScoreResult | None] = [None] * len(requests)
        order = sorted(range(len(requests)), key=lambda i: len(requests[i].context))
        batches = _chunks(order, lambda i: len(requests[i].context), self.max_batch_tokens)
        with torch.inference_mode():
            for batch in batches:
                scored = self._score_batch([requests[i] for i in batch])
                for i, result in zip(batch, scored, strict=True):
                    results[i] = result
        return [r for r in results if r is not None]

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
        after_context = torch.log_softmax(out.logits[:, -1, :].double(), dim=-1)
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
            logprobs = torch.log_softmax(out.logits.double(), dim=-1)
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
