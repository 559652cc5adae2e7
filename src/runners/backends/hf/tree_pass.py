"""The hf backend's forward pass: token trees over a pool of cached context keys and values.

A batch's context tokens are computed once each (`runners.backends.hf.accounting.context_radix`),
and their keys and values kept in a `KVPool`, one slot per token. A pass (`tree_pass`) runs
rows of tokens (`TreeRow`): each row's past is gathered from the pool, and its own tokens
form a tree (a radix edge is a chain; a continuation trie branches) whose shape goes to the
model as a 4D attention mask with explicit position ids. The custom 4D mask replaces
transformers' own, so models whose layers need more than a causal mask (sliding windows)
are not supported by this path.

Each pass takes its pasts from the pool into a fresh buffer that the pass fills in place
(`_prefilled_layer_class`), so the past is copied once, not twice; the caller releases a
pass's logits before the next pass is built, so the peak is one pass's memory.

torch and transformers are imported inside functions, so `import runners` works without the
`hf` extra.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class TreeRow:
    """One row of a tree pass: tokens fed over a past taken from the pool (`tree_pass`)."""

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
    #: (tokens, len(past)) booleans: which past slots each token sees; None: all of them. A
    #: bounded number trie (`runners.backends.hf.bounded`) keeps every computed node in the past, and
    #: each new node sees the context and its own ancestors only
    sees: np.ndarray | None = None


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
                assert self.keys is not None and self.values is not None  # the buffers given to __init__
                end = self.filled + key_states.shape[-2]
                self.keys[:, :, self.filled : end] = key_states
                self.values[:, :, self.filled : end] = value_states
                self.filled = end
                return self.keys[:, :, :end], self.values[:, :, :end]

            def get_seq_length(self) -> int:
                return self.filled

        _PREFILLED.append(_PrefilledLayer)
    return _PREFILLED[0]


class KVPool:
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

    def reserve(self, n: int) -> list[int]:
        """`n` more slots at the end (a bounded trie's nodes, kept between its passes); their indices.

        Storage grows by doubling, so a batch's passes copy the pool a logarithmic number of times.
        """
        import torch

        start = self.size
        self.size += n
        for layer in range(len(self.keys)):
            held = self.keys[layer].shape[0]
            if self.size > held:
                grown = max(self.size, 2 * held)
                for store in (self.keys, self.values):
                    old = store[layer]
                    store[layer] = torch.zeros((grown, *old.shape[1:]), dtype=old.dtype, device=old.device)
                    store[layer][:held] = old
        return list(range(start, start + n))

    def cache(self, index: Any, new_tokens: int) -> Any:
        """A cache holding the slots `index` (rows, positions) per row, with room for `new_tokens` more.

        The past is copied once into a buffer that the pass then fills in place
        (`_prefilled_layer_class`), not concatenated with the new keys and values on every layer:
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


def tree_pass(model: Any, pool: KVPool, rows: list[TreeRow], *, all_logits: bool) -> Any:
    """One forward pass of `model` over token trees and pooled pasts (see `TreeRow`); the logits, last or all positions.

    Each row's tokens are LEFT-padded (so the last position is every row's last token) and
    see, through a 4D float mask, the row's past in full and, among the row's own tokens,
    their ancestors and themselves only; position ids are explicit. A padding token sees
    only itself (a query that sees nothing would be NaN). Pasts are gathered from the pool
    into one row each, padded with slot 0 under the mask. Tokens with slots have their
    keys and values stored into the pool.
    """
    import torch

    device = model.device
    dtype = model.dtype
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
        allowed[b, pad:, : len(r.past)] = True if r.sees is None else r.sees
        allowed[b, pad:, past_len + pad :] = _ancestry(r.parents)
        allowed[b, np.arange(pad), past_len + np.arange(pad)] = True
        if r.slots is not None:
            slots[b, pad:] = r.slots
    mask = torch.zeros((n_rows, 1, width, past_len + width), dtype=dtype, device=device)
    mask.masked_fill_(~torch.from_numpy(allowed).to(device)[:, None], torch.finfo(dtype).min)
    cache = pool.cache(torch.from_numpy(past).to(device) if past_len else None, width)
    out = model(
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
