"""The `openai` backend's registration: what the project reads of it without the `openai` package.

Its own load options are `client.ServerOptions` (what the client takes, so they are declared once).
"""

from __future__ import annotations

from ..registry import BackendSpec, register
from .client import ServerOptions

OPENAI = register(
    BackendSpec(
        name="openai",
        loader="runners.backends.openai.backend:load",
        summary="a model behind an OpenAI-compatible server (--base-url): generation on any; "
        "sentence/letter scoring where /v1/completions returns prompt log-probabilities of token ids (vLLM)",
        extras=("openai",),
        provides=("openai",),
        options=ServerOptions,
        follows_device=False,
        served=True,
        token_counts="runners.backends.openai.accounting:openai_token_counts",
        call_counts="runners.backends.openai.accounting:openai_call_counts",
    )
)
