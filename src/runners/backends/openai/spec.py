"""The `openai` backend's registration and its own load options: what the project reads of it without the client."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from promptgen.core.errors import ProbeError
from runners.model.device import AUTO

from ..registry import BackendSpec, load_flag, register
from .client import ServerSettings, check_server_settings


@dataclass(frozen=True)
class ServerOptions:
    """`--backend openai`'s own flags (`BackendSpec.options`): where the server is and how to talk to it."""

    base_url: str | None = load_flag(
        "the server's OpenAI-compatible root (e.g. http://localhost:8000/v1); --model is the name it serves the "
        "model under."
    )
    api_key_env: str = load_flag(
        "the environment variable holding the server's key (never a flag: a key must not reach the shell history; "
        "it is never printed or written).",
        "OPENAI_API_KEY",
    )
    max_concurrency: int = load_flag("requests in flight to the server at most.", 8, min=1)
    request_timeout: float = load_flag("seconds one request may take before it is retried.", 600.0, min=0.001)
    max_retries: int = load_flag(
        "retries of a request that timed out, dropped its connection or was answered 429/5xx, with exponential "
        "back-off (Retry-After honoured).",
        5,
        min=0,
    )
    server_api: str = load_flag(
        "completions (token-id prompts on /v1/completions: scoring and generation) or chat "
        "(the items' messages on /v1/chat/completions, the server's chat template: generation only).",
        "completions",
    )
    tokenizer: str | None = load_flag(
        "the served model's tokenizer, a Hub id or folder (default: --model); prompts are tokenised here with it, "
        "and its revision is part of the result key."
    )

    def __post_init__(self) -> None:
        if not self.base_url:
            raise ProbeError(
                "--backend openai needs --base-url: the server's OpenAI-compatible root, e.g. http://localhost:8000/v1"
            )
        check_server_settings(self.settings())

    def settings(self) -> ServerSettings:
        """What the client takes (`runners.backends.openai.client`)."""
        assert self.base_url is not None
        api, timeout = self.server_api, self.request_timeout
        return ServerSettings(self.base_url, self.api_key_env, self.max_concurrency, timeout, self.max_retries, api)

    def check_load(self, load: Any) -> None:
        if load.dtype != AUTO:
            raise ProbeError(
                f"--dtype is the server's with --backend {load.backend} (e.g. vllm serve MODEL --dtype ...)"
            )


OPENAI = register(
    BackendSpec(
        name="openai",
        loader="runners.backends.openai.backend:load",
        summary="a model behind an OpenAI-compatible server (--base-url): generation on any; "
        "sentence/letter scoring where /v1/completions returns prompt log-probabilities of token ids (vLLM)",
        extras=("openai",),
        options=ServerOptions,
        follows_device=False,
        served=True,
        token_counts="runners.backends.openai.accounting:openai_token_counts",
        call_counts="runners.backends.openai.accounting:openai_call_counts",
    )
)
