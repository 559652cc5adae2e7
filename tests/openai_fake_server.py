"""A scripted OpenAI-compatible server for the `openai` backend's fast tests (`FakeServer`).

It speaks vLLM's JSON (`/v1/models`, `/v1/completions` with token-id prompts, `prompt_logprobs`,
`logprob_token_ids` keyed `token_id:N`, `/v1/chat/completions`), with log-probabilities from a
known function of the prompt (`fake_logprob`), so a test can compute every expected number
itself. Before answering a POST it plays the next step of its script: `"429"` and `"500"`
answer that status (the 500 echoes the request's Authorization header back, as a leaky proxy
would), `"drop"` closes the connection without an answer, `"hang"` never answers, `"overlong"` answers a
generation of 3 tokens more than its `max_tokens` (`usage.completion_tokens`). `"nan"`, `"inf"`
and `"positive"` answer every log-probability of the answer as NaN, +inf or +3.0 (`BROKEN_LOGPROBS`);
`"list-entry"`, `"null-logprob"`, `"string-choices"` and `"array-body"` answer a malformed shape
(`malformed`). `generation_text` is what a completion generates. `models_answer`, when set, is the
JSON `/v1/models` answers instead of its list.

What it serves can be changed between requests, as a redeployment would: `fingerprint` (the
answers' `system_fingerprint`; None: none), `answer_model` (the `model` its answers name; None:
the one asked), `logprob_scale` (every log-probability multiplied by it: other weights behind the
same name and fingerprint). `also_serves` lists more names for the same checkpoint (vLLM's
`--served-model-name a b`, which answers every request with the first name).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "fake-model"

#: `FakeServer.fingerprint` left alone: the answers carry `completion`'s own
AS_SCRIPTED = object()


def fake_logprob(prefix: Sequence[int], token: int) -> float:
    """log P(token | prefix) of the fake model: any fixed function will do; this one depends on both."""
    return -1.0 - ((sum(prefix) * 31 + len(prefix) * 7 + token) % 97) / 10.0


class FakeServer:
    """Serves one model on 127.0.0.1 (a free port) until `close`; records every POST it received."""

    def __init__(
        self,
        script: Sequence[str | None] = (),
        *,
        owned_by: str = "vllm",
        model: str = MODEL,
        also_serves: Sequence[str] = (),
    ) -> None:
        self.script = list(script)
        self.model = model
        self.owned_by = owned_by
        self.also_serves = list(also_serves)
        self.fingerprint: Any = AS_SCRIPTED
        self.answer_model: str | None = None
        self.logprob_scale = 1.0
        self.models_answer: Any = None
        #: what a generation answers (a completion's text; the chat API answers its own sentence)
        self.generation_text = GENERATION_TEXT
        self.posts: list[dict[str, Any]] = []
        self.auth: list[str] = []
        self.lock = threading.Lock()
        self._stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if server.models_answer is not None:
                    self._send(200, server.models_answer)
                elif self.path.rstrip("/").endswith("/models"):
                    card = {
                        "id": server.model,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": server.owned_by,
                    }
                    card.update(root="/srv/models/fake-model", max_model_len=2048)
                    cards = [card, *({**card, "id": name} for name in server.also_serves)]
                    self._send(200, {"object": "list", "data": cards})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with server.lock:
                    server.posts.append(body)
                    server.auth.append(self.headers.get("Authorization", ""))
                    step = server.script.pop(0) if server.script else None
                if step == "429":
                    self._send(429, {"error": {"message": "rate limited"}}, {"Retry-After": "0"})
                elif step == "500":
                    leak = self.headers.get("Authorization", "")
                    self._send(500, {"error": {"message": f"upstream failed for request with Authorization: {leak}"}})
                elif step == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                elif step == "hang":
                    server._stop.wait(60)
                    self.close_connection = True
                elif step == "overlong":  # a generation past the request's max_tokens (the server ignored it)
                    answer = completion(body, server.owned_by)
                    answer["usage"] = {"completion_tokens": int(body.get("max_tokens") or 16) + 3}
                    self._send(200, server.as_served(answer))
                elif step in BROKEN_LOGPROBS or step in MALFORMED:
                    self._send(200, malformed(server.as_served(completion(body, server.owned_by)), step))
                elif self.path.endswith("/chat/completions"):
                    message = {"role": "assistant", "content": "I pass 7 dollars."}
                    choices = [{"index": 0, "message": message, "finish_reason": "stop"}]
                    self._send(200, server.as_served({"model": body.get("model"), "choices": choices}))
                else:
                    answer = completion(body, server.owned_by)  # (tests replace `completion` with their own)
                    for choice in answer.get("choices") or ():
                        if choice.get("text") == GENERATION_TEXT:
                            choice["text"] = server.generation_text
                    self._send(200, server.as_served(answer))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def as_served(self, answer: dict[str, Any]) -> dict[str, Any]:
        """`answer` as the deployment serves it now (`fingerprint`, `answer_model`, `logprob_scale`)."""
        if self.fingerprint is not AS_SCRIPTED:
            answer["system_fingerprint"] = self.fingerprint
        if self.answer_model is not None:
            answer["model"] = self.answer_model
        if self.logprob_scale != 1.0:
            for choice in answer.get("choices") or ():
                for entry in choice.get("prompt_logprobs") or ():
                    for value in (entry or {}).values():
                        value["logprob"] *= self.logprob_scale
                for top in (choice.get("logprobs") or {}).get("top_logprobs") or ():
                    for key in top:
                        top[key] *= self.logprob_scale
        return answer

    def close(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


#: what a completion generates unless `FakeServer.generation_text` says otherwise (a stop string after the answer)
GENERATION_TEXT = "I pass $7. Done"


def completion(body: dict[str, Any], owned_by: str) -> dict[str, Any]:
    """A `/v1/completions` answer to `body` (one choice per prompt), vLLM's JSON."""
    prompts = body["prompt"]
    if prompts and isinstance(prompts[0], int):
        prompts = [prompts]
    choices = []
    for index, ids in enumerate(prompts):
        choice: dict[str, Any] = {"index": index, "finish_reason": "length"}
        if body.get("max_tokens", 16) > 1:  # generation: a fixed answer, with a stop string after it
            choice.update(text=GENERATION_TEXT, finish_reason="length")
        else:
            choice["text"] = "x"
        if body.get("prompt_logprobs") is not None:
            choice["prompt_logprobs"] = [None] + [
                {str(t): {"logprob": fake_logprob(ids[:k], t), "rank": 1, "decoded_token": "?"}}
                for k, t in enumerate(ids)
                if k > 0
            ]
        if body.get("logprob_token_ids"):
            top = {f"token_id:{c}": fake_logprob(ids, c) for c in body["logprob_token_ids"]}
            choice["logprobs"] = {"tokens": ["token_id:0"], "token_logprobs": [-1.0], "top_logprobs": [top]}
        choices.append(choice)
    return {
        "object": "text_completion",
        "model": body.get("model"),
        "choices": choices,
        "system_fingerprint": f"{owned_by}-fake",
    }


#: script steps that answer every log-probability of a completion as this number
BROKEN_LOGPROBS = {"nan": float("nan"), "inf": float("inf"), "positive": 3.0}
#: script steps that answer a completion of a malformed shape
MALFORMED = ("list-entry", "null-logprob", "string-choices", "array-body")


def malformed(answer: dict[str, Any], step: str) -> Any:
    """`answer` broken as the script step `step` says (`BROKEN_LOGPROBS`, `MALFORMED`)."""
    if step == "array-body":
        return [answer]
    if step == "string-choices":
        return {**answer, "choices": [str(c.get("text")) for c in answer["choices"]]}
    for choice in answer["choices"]:
        entries = choice.get("prompt_logprobs") or []
        for pos, entry in enumerate(entries):
            if entry is None:
                continue
            if step == "list-entry":
                entries[pos] = list(entry.values())
            for value in entry.values():
                if step == "null-logprob":
                    value["logprob"] = None
                elif step in BROKEN_LOGPROBS:
                    value["logprob"] = BROKEN_LOGPROBS[step]
        for top in (choice.get("logprobs") or {}).get("top_logprobs") or ():
            for key in top:
                top[key] = None if step == "null-logprob" else BROKEN_LOGPROBS.get(step, top[key])
    return answer


def load_served(server: FakeServer, **options: Any) -> Any:
    """The `openai` backend loaded against `server` (its `/v1/models` and fingerprint read: one POST), as a run does.

    `options` are `LoadOptions` fields (`server_api="chat"`, `request_timeout=...`). Imported here, not at the
    top: the server itself runs without the project.
    """
    from runners.backends import Resolved
    from runners.backends.load import LoadOptions
    from runners.backends.openai import backend as openai_backend

    load = LoadOptions.of(backend="openai", base_url=server.url, **options)
    resolved = Resolved(None, None, "auto", "server", {"tokenizer_revision": "sha256-tok"})
    return openai_backend.load(MODEL, load.options, resolved)
