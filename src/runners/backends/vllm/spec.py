"""The vLLM backend's registration and its own load options: what the project reads of it without importing vllm."""

from __future__ import annotations

from dataclasses import dataclass

from promptgen.core.errors import ProbeError

from ..registry import BackendSpec, load_flag, register


@dataclass(frozen=True)
class VllmOptions:
    """`--backend vllm`'s own flags (`BackendSpec.options`), checked when made.

    `gpu_memory_utilization` and `max_model_len` left out are settled for the machine and the items
    when the model loads (`runners.backends.load.load_backend`).
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


VLLM = register(
    BackendSpec(
        name="vllm",
        loader="runners.backends.vllm.backend:load",
        summary="vLLM's offline engine (prefix caching; --tensor-parallel-size N shards a model over N GPUs)",
        extras=("vllm",),
        options=VllmOptions,
        starts_engine=True,
        sizes_context=True,
        follows_device=False,
        token_counts="runners.backends.vllm.accounting:vllm_token_counts",
        call_counts="runners.backends.vllm.accounting:vllm_call_counts",
        generate_counts="runners.backends.vllm.accounting:vllm_generate_counts",
    )
)
