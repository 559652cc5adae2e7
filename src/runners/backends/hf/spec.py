"""The transformers backend's registration: what the project reads of it without importing torch."""

from __future__ import annotations

from ..registry import DEVICE_MAP, GGUF_FILE, QUANTIZED_WEIGHTS, BackendSpec, register

HF = register(
    BackendSpec(
        name="hf",
        loader="runners.backends.hf.backend:load",
        summary="transformers in this process (any device; --device-map auto spreads a model over GPUs)",
        options=frozenset({DEVICE_MAP, GGUF_FILE, QUANTIZED_WEIGHTS}),
        token_counts="runners.backends.hf.accounting:hf_token_counts",
        call_counts="runners.backends.hf.accounting:hf_call_counts",
        generate_counts="runners.backends.hf.accounting:hf_generate_counts",
    )
)
