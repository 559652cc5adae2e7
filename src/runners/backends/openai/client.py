"""HTTP to an OpenAI-compatible server: the key, the concurrency bound, retries, and one line per failure.

The official `openai` client does the transport: it retries 408/409/429/5xx answers, dropped
connections and timeouts with exponential back-off (0.5 s doubling to 8 s, honouring
`Retry-After`), `max_retries` times. What is ours:

- the key: read from the environment variable `api_key_env` names (`OPENAI_API_KEY` unless told
  otherwise), handed to the client and nowhere else; the variable is added to the scrubber's
  secrets (`promptgen.core.secrets.watch_secret_env`) so no message, log line or file can carry it;
- the bound: at most `max_concurrency` requests in flight (a thread pool of that size, and as many
  pooled connections), so a shared deployment is not flooded;
- the record: requests answered and attempts sent (`attempts` counts retries too), for the manifest;
- the failure: once the retries are spent, one `ProbeError` line saying what the server answered (or
  that it did not), where (the URL without credentials) and which flag changes it.

Bodies and answers are plain JSON (`cast_to=httpx.Response`): the scoring fields are vLLM's
extensions of the OpenAI schema, which the client's typed models do not know.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from promptgen.core.errors import ProbeError
from promptgen.core.secrets import watch_secret_env
from runners.backends.registry import BackendOptions, load_flag
from runners.model.device import AUTO

#: the API a run talks to: `/v1/completions` (token-id prompts: scoring and generation) or `/v1/chat/completions`
APIS = ("completions", "chat")


@dataclass(frozen=True)
class ServerOptions(BackendOptions):
    """Where the server is and how to talk to it: `--backend openai`'s own flags (`BackendSpec.options`, declared
    once here as `load_flag` fields) and what `ServerClient` takes, checked whole when made (one line per bad flag,
    before anything is sent)."""

    base_url: str | None = load_flag(
        "the server's OpenAI-compatible root (e.g. http://localhost:8000/v1); --model is the name it serves the "
        "model under."
    )
    #: the environment variable holding the key (never the key itself: it must not reach a file or a process list)
    api_key_env: str = load_flag(
        "the environment variable holding the server's key (never a flag: a key must not reach the shell history; "
        "it is never printed or written).",
        "OPENAI_API_KEY",
    )
    max_concurrency: int = load_flag("requests in flight to the server at most.", 8, min=1)
    #: seconds one attempt may take before it is retried
    request_timeout: float = load_flag("seconds one request may take before it is retried.", 600.0, min=0.001)
    max_retries: int = load_flag(
        "retries of a request that timed out, dropped its connection or was answered 429/5xx, with exponential "
        "back-off (Retry-After honoured).",
        5,
        min=0,
    )
    #: the API a run talks to (`APIS`)
    server_api: str = load_flag(
        "completions (token-id prompts on /v1/completions: scoring and generation) or chat "
        "(the items' messages on /v1/chat/completions, the server's chat template: generation only).",
        "completions",
    )
    #: where the tokenizer is (for `runners.backends.load.load_served`, through `tokenizer_source`; not the client's)
    tokenizer: str | None = load_flag(
        "the served model's tokenizer, a Hub id or folder (default: --model); prompts are tokenised here with it, "
        "and its revision is part of the result key."
    )

    def tokenizer_source(self) -> str | None:
        """Where the served model's tokenizer loads from (`BackendOptions.tokenizer_source`); None: the model's name."""
        return self.tokenizer

    def __post_init__(self) -> None:
        if not self.base_url:
            raise ProbeError(
                "--backend openai needs --base-url: the server's OpenAI-compatible root, e.g. http://localhost:8000/v1"
            )
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ProbeError(
                f"--base-url must be an http(s) URL such as http://localhost:8000/v1, got {public_url(self.base_url)!r}"
            )
        if parts.username or parts.password:
            raise ProbeError("--base-url must not carry credentials: put the key in the variable --api-key-env names")
        if self.max_concurrency < 1:
            raise ProbeError(f"--max-concurrency must be positive, got {self.max_concurrency}")
        if not 0 < self.request_timeout < math.inf:  # inf would overflow the socket's timeout mid-request
            raise ProbeError(f"--request-timeout must be a positive number of seconds, got {self.request_timeout}")
        if self.max_retries < 0:
            raise ProbeError(f"--max-retries must be 0 or more, got {self.max_retries}")
        if self.server_api not in APIS:
            raise ProbeError(f"--server-api must be one of {', '.join(APIS)}, got {self.server_api!r}")
        if not self.api_key_env.replace("_", "").isalnum():
            raise ProbeError(f"--api-key-env must name an environment variable, got {self.api_key_env!r}")

    def check_load(self, load: Any) -> None:
        """The weights' dtype is the server's: a run cannot ask for another."""
        if load.dtype != AUTO:
            raise ProbeError(
                f"--dtype is the server's with --backend {load.backend} (e.g. vllm serve MODEL --dtype ...)"
            )


def public_url(url: str) -> str:
    """`url` without credentials, query or fragment: what may be printed and recorded."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


class ServerClient:
    """POSTs JSON bodies to one server, at most `max_concurrency` at a time (see the module docstring)."""

    def __init__(self, settings: ServerOptions) -> None:
        import openai

        assert settings.base_url is not None  # ServerOptions refuses none when made
        self.settings = settings
        self.url = public_url(settings.base_url)
        self.requests = 0
        self.attempts = 0
        self._lock = threading.Lock()
        watch_secret_env(settings.api_key_env)

        def count(_request: Any) -> None:
            with self._lock:
                self.attempts += 1

        http = openai.DefaultHttpxClient(event_hooks={"request": [count]})
        self._client = openai.OpenAI(
            base_url=settings.base_url,
            # a server without a key (vLLM without --api-key) takes any; the client refuses none
            api_key=os.environ.get(settings.api_key_env) or "EMPTY",
            timeout=settings.request_timeout,
            max_retries=settings.max_retries,
            http_client=http,
        )
        self._pool = ThreadPoolExecutor(max_workers=settings.max_concurrency, thread_name_prefix="probes-server")

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._client.close()

    def get(self, path: str) -> dict[str, Any]:
        """The JSON answer of a GET (`/models`)."""
        return self._call(lambda: self._client.get(path, cast_to=_response()), f"GET {path}")

    def post_all(self, path: str, bodies: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """The JSON answers of POSTing each body to `path`, in order, at most `max_concurrency` in flight.

        The first failure (after its retries) is raised once the requests already in flight are
        done; the rest are not sent.
        """
        futures = [self._pool.submit(self.post, path, body) for body in bodies]
        try:
            return [f.result() for f in futures]
        except BaseException:
            for f in futures:
                f.cancel()
            raise

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._call(lambda: self._client.post(path, body=body, cast_to=_response()), f"POST {path}")

    def _call(self, send: Callable[[], Any], what: str) -> dict[str, Any]:
        import openai

        tries = self.settings.max_retries + 1
        try:
            response = send()
        except openai.APITimeoutError:
            raise ProbeError(
                f"{self.url}: {what} got no answer within {self.settings.request_timeout:g} s, {tries} tries "
                "(--request-timeout, --max-retries): is the server up and serving this model?"
            ) from None
        except openai.APIConnectionError as exc:
            raise ProbeError(
                f"{self.url}: {what} could not connect, {tries} tries ({_reason(exc)}): is the server up at --base-url?"
            ) from None
        except openai.APIStatusError as exc:
            raise ProbeError(f"{self.url}: {what} answered {exc.status_code}: {status_hint(exc)}") from None
        try:
            data = response.json()
        except ValueError:
            raise ProbeError(f"{self.url}: {what} answered with something that is not JSON") from None
        if not isinstance(data, dict):  # every answer of the OpenAI API is an object
            raise ProbeError(f"{self.url}: {what} answered a JSON {type(data).__name__}, not an object") from None
        with self._lock:
            self.requests += 1
        return data


def _response() -> type:
    import httpx

    return httpx.Response


def _reason(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    return " ".join(str(cause or exc).split())[:200] or type(exc).__name__


def status_hint(exc: Any) -> str:
    """The server's own message for an error answer, and the flag that usually fixes it."""
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    message = " ".join(str(message or getattr(exc, "message", "") or exc).split())[:300]
    status = getattr(exc, "status_code", 0)
    lowered = message.lower()
    if status in (401, 403):
        hint = "the key was refused: set the variable --api-key-env names"
    elif status == 404:
        hint = "no such model or route: --model must be a name the server lists at /v1/models"
    elif "logprobs" in lowered and ("max" in lowered or "exceed" in lowered):
        hint = "start the server with --max-logprobs 128 (candidate ids read per prompt)"
    else:
        hint = ""
    return f"{message}{'; ' + hint if hint else ''}"
