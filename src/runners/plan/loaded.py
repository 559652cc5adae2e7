"""A sweep's price on the model it has loaded: each config quoted (`quote`) and priced on that device.

`probes plan` prices a sweep before any load, from the tokenizer and `config.json`; a sweep has
the model loaded already, so it prices the config it loaded on the device it got: a GPU `pricing.GPUS` knows at an
MFU, the CPU at its measured rate (a plain forward pass and a short greedy generate of this
model), and a served model by the tokens and prompts it is sent (its time is its server's).
What it reads of the backend is declared (`protocol.Backend`: its device and token budget, and its
`hardware()`: the GPU's name and the model to time), so it probes no backend and imports no torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runners.backends import backend_spec
from runners.backends.protocol import Backend, Hardware
from runners.model.device import default_batch_size
from runners.plan.pricing import GPUS, count_params
from runners.plan.quote import Quote, cpu_decode_tokens_per_s, cpu_tokens_per_s, quote_config
from runners.run.request import ResolvedRun


@dataclass
class SweepPlan:
    """What a sweep is about to do: a quote per (dataset, config), priced on `device`."""

    device: str
    rate: str
    quotes: list[tuple[str, Quote, float | None]]

    @property
    def items(self) -> int:
        return sum(q.items for _, q, _ in self.quotes)

    @property
    def hours(self) -> float | None:
        prices = [h for _, _, h in self.quotes]
        known = [h for h in prices if h is not None]
        return None if len(known) != len(prices) else sum(known)


def _on_cuda(backend: Backend) -> bool:
    return str(backend.device).startswith("cuda")


def _device(backend: Backend, hardware: Hardware) -> tuple[str | None, str]:
    """(a `pricing.GPUS` name or None, the device in words) of a loaded backend, by the GPU its hardware names."""
    if _on_cuda(backend) and hardware.gpu is not None:
        name = hardware.gpu
        gpu = next((key for key in GPUS if key in name.lower().replace(" ", "")), None)
        return gpu, name
    return None, "cpu"


def price_loaded(
    resolved: Sequence[tuple[str, ResolvedRun]],
    backend: Backend,
    tokenizer: Any,
    config: Mapping[str, Any] | None,
    mfu: float,
    *,
    hours: bool = True,
) -> SweepPlan:
    """Price each (dataset name, resolved run) on the device the model loaded on (the module docstring).

    `config`: the model's config as it loaded (`Runner.config`: at the loaded commit, from the GGUF file
    when there is one), whose parameters the FLOPs count. `hours=False`: each config's items and tokens
    only, no hours, and no rate measured (the CPU's takes seconds of forward passes and generation:
    `probes demo` asks for no price).
    """
    per_call = default_batch_size(backend.device) if backend.device else None
    budget = backend.max_batch_tokens  # the hf backend's (`Backend.max_batch_tokens`): it batches generation too
    quotes = [
        (name, quote_config(run.prompts, run.request, tokenizer, items_per_call=per_call, max_batch_tokens=budget))
        for name, run in resolved
    ]
    if not hours:
        return SweepPlan(str(backend.device or "?"), "not priced (no hours asked)", [
            (name, q, None) for name, q in quotes
        ])  # fmt: skip
    if backend_spec(backend.name).served:  # no weights here to count: the time is the server's
        rate = "the tokens and prompts it is sent, not in hours (a served model's time is its server's)"
        return SweepPlan(f"a server (--backend {backend.name})", rate, [(name, q, None) for name, q in quotes])
    if config is None:
        unpriced: list[tuple[str, Quote, float | None]] = [(name, q, None) for name, q in quotes]
        return SweepPlan(str(backend.device or "?"), "not priced: no config was loaded", unpriced)
    shape = count_params(config)
    hardware = backend.hardware()
    gpu, device = _device(backend, hardware)
    tokens_per_s = decode_tokens_per_s = None
    if gpu is not None:
        rate = f"{gpu} at MFU {mfu} (decode steps at their own cost: memory bandwidth or FLOPs)"
    elif hardware.timed_model is not None and not _on_cuda(backend):
        length = max((q.context_tokens_per_item for _, q in quotes), default=64)
        tokens_per_s = cpu_tokens_per_s(hardware.timed_model, round(length))
        rate = f"the CPU's measured {tokens_per_s:,.0f} computed tokens/s (a plain forward pass of this model)"
        if any(q.decoded_tokens for _, q in quotes):
            decode_tokens_per_s = cpu_decode_tokens_per_s(hardware.timed_model, round(length))
            rate += f" and {decode_tokens_per_s:,.0f} decoded tokens/s (a short greedy generate)"
    else:
        rate = f"not priced: {device} is not a GPU `probes plan` knows"
    priced = [
        (name, q, q.hours(shape, gpu=gpu, mfu=mfu, tokens_per_s=tokens_per_s, decode_tokens_per_s=decode_tokens_per_s))
        for name, q in quotes
    ]
    return SweepPlan(device, rate, priced)
