"""The transformers backend's registration and its own load options: what the project reads of it without torch."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from promptgen.core.errors import ProbeError
from runners.model.device import AUTO, MAX_LOGIT_ROWS, QUANTIZED
from runners.scoring.generate_accounting import GenerateCall

from ..registry import BackendOptions, BackendSpec, load_flag, register


@dataclass(frozen=True)
class HfOptions(BackendOptions):
    """`--backend hf`'s own flags (`BackendSpec.options`), checked when made."""

    device_map: str | None = load_flag(
        "auto spreads the model's layers over all visible GPUs (for large models).",
        elsewhere="spread a model over GPUs with --tensor-parallel-size (vllm)",
    )
    gguf_file: str | None = load_flag(
        "load this GGUF file of the model folder / repo.", elsewhere="save the model as a safetensors folder first"
    )
    max_batch_tokens: int | None = load_flag(
        "tokens per forward pass, cache included (default 8192 on the CPU; on CUDA sized from the free GPU memory; "
        "sweep it with benchmarks/gpu_scoring.py). Out of memory, it is halved.",
        min=1,
    )
    max_logit_rows: int | None = load_flag(
        "logit rows (rows x positions) per continuation pass "
        f"(default {MAX_LOGIT_ROWS['cuda']} on CUDA, {MAX_LOGIT_ROWS['cpu']} on the CPU).",
        min=1,
    )

    def __post_init__(self) -> None:
        if self.device_map not in (None, AUTO):
            raise ProbeError(f"--device-map must be auto (or left out), got {self.device_map!r}")

    def check_load(self, load: Any) -> None:
        """A GGUF file is de-quantised by transformers: it cannot be loaded quantised again."""
        if load.dtype in QUANTIZED and self.gguf_file:
            raise ProbeError(
                f"--dtype {load.dtype} quantises a checkpoint's weights (a safetensors folder or Hub id), "
                "not a --gguf-file"
            )

    def checkpoint_files(self) -> dict[str, Any]:
        """The model is located, keyed and read from its GGUF file, if named (`BackendOptions.checkpoint_files`)."""
        return {"gguf_file": self.gguf_file} if self.gguf_file else {}

    def size_call(self, call: GenerateCall) -> GenerateCall:
        """A quote's generation call batched by the token budget asked for (the CPU default otherwise)."""
        if self.max_batch_tokens is None:
            return call
        return dataclasses.replace(call, max_batch_tokens=self.max_batch_tokens)


HF = register(
    BackendSpec(
        name="hf",
        loader="runners.backends.hf.backend:load",
        summary="transformers in this process (any device; --device-map auto spreads a model over GPUs)",
        options=HfOptions,
        quantizes=True,
        token_counts="runners.backends.hf.accounting:hf_token_counts",
        call_counts="runners.backends.hf.accounting:hf_call_counts",
        generate_counts="runners.backends.hf.accounting:hf_generate_counts",
    )
)
