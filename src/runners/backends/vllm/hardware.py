"""What a vLLM engine ran as, for the manifest and pricing (`VLLMBackend.hardware`): a typed `Hardware`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runners.backends.protocol import Hardware


@dataclass(frozen=True, kw_only=True)
class VllmHardware(Hardware):
    """The engine's version, what it loaded (dtype, device, GPU) and its memory settings (`VLLMBackend.hardware`)."""

    vllm: str
    dtype: str
    device: str
    prefix_caching: bool
    prefix_cache_retries: int
    number_path: str
    number_path_reason: str | None
    #: the engine settings that bound memory and placement, its tensor parallel size and context as it runs them
    settings: Mapping[str, Any]

    def manifest(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "vllm": self.vllm,
            "dtype": self.dtype,
            "device": self.device,
            "prefix_caching": self.prefix_caching,
            "prefix_cache_retries": self.prefix_cache_retries,
            "number_path": self.number_path,
            "number_path_reason": self.number_path_reason,
            **self.settings,
        }
        if self.gpu is not None:
            info["gpu"] = self.gpu
        return info
