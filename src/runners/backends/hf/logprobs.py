"""Log-probabilities of the hf backend, read at chosen entries of float32 logits, in float64.

Log-probabilities come without a float64 copy of the logits (`LogSoftmax`): each position's
log-sum-exp is the max plus the log of the sum of the float32 `exp(logit - max)` terms,
summed in fixed blocks of 128 vocabulary entries in float32 and the block sums in float64
(~1e-7 nats, the float32 exponentials' rounding; and, unlike one float32 sum over the
vocabulary, the same whatever the batch around a row: results must not depend on batching).
The exponentials go through one reusable scratch buffer of a few rows at a time, not a fresh
tensor the size of the logits: on the CPU, fresh tensors that large cost more in page faults
than the arithmetic. The scored logits are gathered in float64 and the log-sum-exp
subtracted. torch's float32 `log_softmax` is off by ~2e-5 nats per token with a consistent
sign, which adds up over an option's tokens. Only the scored entries move to the CPU.

torch is imported inside functions, so `import runners` works without the `hf` extra.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: vocabulary entries whose exponentials are summed in float32 before the float64 sum
_LSE_BLOCK = 128
#: size (elements) of the log-sum-exp scratch buffer per device type: a few rows at a time on
#: the CPU, where it stays in reused memory; large on accelerators, where launches cost more
_SCRATCH_ELEMENTS = {"cpu": 1 << 22, "cuda": 1 << 28}


class LogSoftmax:
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


def gather_logprobs(logprobs: LogSoftmax, device: Any, *axes: Sequence[int]) -> np.ndarray:
    """`logprobs[axes[0][i], axes[1][i], ...]` for every i, as one float64 array moved in one transfer."""
    import torch

    index = tuple(torch.tensor(list(axis), dtype=torch.long, device=device) for axis in axes)
    if not index or not len(index[0]):
        return np.zeros(0)
    return logprobs[index].cpu().numpy()


def candidate_logprobs_by_row(
    logprobs: LogSoftmax, device: Any, wanted: dict[int, tuple[int, ...]]
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
