"""What a backend computes for a call of generation requests: its prefill positions and its decode steps.

Plans and the sweep's quote price generation with these counts (`runners.plan.pricing`). A call of
generation requests (`GenerateCall`) is counted by each backend's own batching, declared in its spec
(`BackendSpec.generate_counts`): the hf backend's in `runners.backends.hf.accounting` (beside
`generate_batches`, which its `generate` batches with, so the plan and the run cannot drift),
vLLM's in `runners.backends.vllm.accounting`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "DecodeGroup",
    "DecodeMachine",
    "DecodedLengths",
    "GenerateCall",
    "GenerateCounts",
]


@dataclass(frozen=True)
class DecodedLengths:
    """How many tokens each answer generates (the end-of-turn token included), as a distribution over items.

    `ceiling(max_new_tokens)`: every answer runs to the ceiling (what a plan assumes without a
    measured profile); else the counts of a sample's answers (`runners.plan.profile`).
    """

    #: generated tokens -> items that generated that many
    counts: Mapping[int, int]

    @classmethod
    def ceiling(cls, max_new_tokens: int) -> DecodedLengths:
        return cls({int(max_new_tokens): 1})

    @property
    def mean(self) -> float:
        total = sum(self.counts.values())
        return sum(n * c for n, c in self.counts.items()) / total if total else 0.0

    def longest(self, sequences: int) -> float:
        """The expected longest answer of `sequences` answers drawn independently from the distribution.

        E[max] = sum over lengths v of v x (F(v)^k - F(v-)^k), F the distribution function, k the sequences.
        """
        total = sum(self.counts.values())
        if not total or sequences < 1:
            return 0.0
        out, below = 0.0, 0.0
        for v in sorted(self.counts):
            at = below + self.counts[v] / total
            out += v * (min(at, 1.0) ** sequences - below**sequences)
            below = at
        return out


@dataclass(frozen=True)
class DecodeMachine:
    """What a backend's decode batching may depend on: the GPU's memory and name, the model's weights and KV cache.

    `memory_bytes` None: a CPU (no GPU memory bounds the batch).
    """

    memory_bytes: float | None
    name: str
    #: the weights' bytes (bf16: 2 per parameter)
    weight_bytes: float
    #: the KV cache's bytes per token of a sequence (keys and values, every layer)
    kv_bytes_per_token: float


@dataclass(frozen=True)
class GenerateCall:
    """One backend call of generation requests, for a backend's generation accounting (`BackendSpec.generate_counts`).

    `contexts` are the requests' prompt ids (as `runners.rows.generation_request` encodes them), in row
    order; `items` the requests the call holds (default: one per context; more when `contexts` is a
    sample of the call, as in the sweep's quote, whose figures then scale to `items`).
    """

    contexts: Sequence[Sequence[int]]
    max_new_tokens: int
    lengths: DecodedLengths
    #: the hf backend's token budget (rows x (prompt + max_new_tokens) per `generate` batch)
    max_batch_tokens: int
    #: vLLM's KV cache block size (prefix caching reuses whole blocks)
    block_size: int
    machine: DecodeMachine | None = None
    #: temperature above 0: the hf backend generates each sampled request alone (`hf.generate`)
    sampled: bool = False
    items: int | None = None

    @property
    def size(self) -> int:
        return len(self.contexts) if self.items is None else self.items


@dataclass(frozen=True)
class DecodeGroup:
    """`steps` decode steps that each run `sequences` sequences holding `kv_tokens` cached tokens each (a mean)."""

    steps: float
    sequences: float
    kv_tokens: float


@dataclass(frozen=True)
class GenerateCounts:
    """What a backend computes for a `GenerateCall`: its prefill positions and its decode steps.

    An answer of n tokens costs one prefill (its prompt, which yields the first token) and n - 1
    decode steps, each feeding the token before; `decode_positions` counts the sequences' steps,
    the padding waste of a static batch included (sequences that finished, run on until the longest stops).
    """

    items: int
    prompt_tokens: float
    #: the prompt positions the backend runs (padding included; cached blocks not)
    computed_prompt_tokens: float
    #: tokens generated (the mean answer's length x items)
    decoded_tokens: float
    decode_positions: float
    groups: tuple[DecodeGroup, ...]

    @property
    def decode_steps(self) -> float:
        return sum(g.steps for g in self.groups)
