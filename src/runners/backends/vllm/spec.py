"""The vLLM backend's registration: what the project reads of it without importing vllm."""

from __future__ import annotations

from ..registry import ENGINE_MEMORY, TENSOR_PARALLEL, BackendSpec, register

VLLM = register(
    BackendSpec(
        name="vllm",
        loader="runners.backends.vllm.backend:load",
        summary="vLLM's offline engine (prefix caching; --tensor-parallel-size N shards a model over N GPUs)",
        extras=("vllm",),
        options=frozenset({TENSOR_PARALLEL, ENGINE_MEMORY}),
        starts_engine=True,
        sizes_context=True,
        follows_device=False,
        token_counts="runners.backends.vllm.accounting:vllm_token_counts",
        call_counts="runners.backends.vllm.accounting:vllm_call_counts",
        generate_counts="runners.backends.vllm.accounting:vllm_generate_counts",
    )
)
