"""The `openai` backend's registration: what the project reads of it without importing the client."""

from __future__ import annotations

from ..registry import SERVER, BackendSpec, register

OPENAI = register(
    BackendSpec(
        name="openai",
        loader="runners.backends.openai.backend:load",
        summary="a model behind an OpenAI-compatible server (--base-url): generation on any; "
        "sentence/letter scoring where /v1/completions returns prompt log-probabilities of token ids (vLLM)",
        extras=("openai",),
        options=frozenset({SERVER}),
        follows_device=False,
        served=True,
        check_options="runners.backends.openai.client:check_load_options",
        token_counts="runners.backends.openai.accounting:openai_token_counts",
        call_counts="runners.backends.openai.accounting:openai_call_counts",
    )
)
