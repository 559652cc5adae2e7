"""The `openai` backend: `Backend.score` and `Backend.generate` against an OpenAI-compatible server.

What each protocol needs from the server (docs/DESIGN.md section 6, the same rules as in process):

- Scoring (choice options, letters, number tries, bounded tries) sends the token ids made by
  `runners.scoring.tokenize` as the prompt of `/v1/completions`, so the server scores exactly
  what the hf and vllm backends score. It is read from two of vLLM's extensions of that API:
  `prompt_logprobs: 0` (each prompt token's log-probability) and `logprob_token_ids` (chosen
  ids' next-token log-probabilities after the prompt, at most 128 per prompt, with
  `return_tokens_as_token_ids` so they come back keyed by id). The queries are the in-process
  vLLM backend's (`runners.backends.prompt_logprobs`, which both share: `queries.plan_queries`, one prompt
  per option, per number trie node; `bounded.score_bounded` for bounded tries), and the answers are vLLM's
  shapes, read by the same checking parsers (`prompt_logprobs.read`); prompts that share their fields go in one request.
  The server computes every position of a prompt whose log-probabilities are asked (vLLM skips
  its prefix cache for them), so no read position can be missing.
- A server that does not return these (OpenAI's hosted models, most others) cannot score: the
  first batch is one line saying so and naming what it can run (`--scoring generate`).
- Generation sends the ids too (`--server-api completions`), or the item's chat messages to
  `/v1/chat/completions` (`--server-api chat`, for servers that take no token ids: the server
  then applies its own chat template). Temperature, top-p, seed and max tokens are passed on.
  On vLLM (its `/v1/models` says `owned_by: vllm`) the request also states vLLM's sampling
  fields that would otherwise come from the model's generation config, and sends the stop
  strings, kept in the text as in process; elsewhere the text is cut at the first stop string here.
- Numbers the server returns are log-probabilities as float JSON; vLLM writes -inf as -9999.
- At load, one one-token completion reads the server's `system_fingerprint` (vLLM: its version and
  engine-config hash) for the result key (`identity`); the chat API is not asked (it would bill a turn).
  Every later answer must be from what the key names (`_same_server`): the same fingerprint (one that
  appears or disappears is a change too; on the completions API, where it was read), and a `model` that
  is the served name or another name of its checkpoint. Weights redeployed behind the same name, card and
  fingerprint are caught when a run resumes (`runners.run.served_recheck`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any

import numpy as np

from promptgen.core.errors import ProbeError
from runners.backends.openai.client import ServerClient, ServerOptions
from runners.backends.openai.identity import served_identity
from runners.backends.openai.spec import OPENAI

# the server speaks vLLM: its candidate groups (at most 128 ids per prompt), query planner and readers
from runners.backends.prompt_logprobs.bounded import score_bounded
from runners.backends.prompt_logprobs.queries import Query, assemble, candidate_groups, plan_queries
from runners.backends.prompt_logprobs.read import candidate_logprobs, continuation_logprobs
from runners.backends.protocol import Hardware
from runners.backends.registry import Resolved
from runners.exchange import GenerateRequest, Generation, ScoreRequest, ScoreResult, cut_at_stop
from runners.results.rules import BadLogprob

#: prompts per scoring request: enough to amortise a round trip, few enough that retrying one is cheap
PROMPTS_PER_REQUEST = 32
#: the date a hosted API appends to a model's name in its answers (`gpt-4o-2024-08-06`, `gpt-4-0613`)
_SNAPSHOT_DATE = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4})")


def _answers_as(named: str, served: str) -> bool:
    """Whether an answer naming `named` is from `served`: the same name, or a dated snapshot of it."""
    return named == served or (named.startswith(served) and bool(_SNAPSHOT_DATE.fullmatch(named[len(served) :])))


#: what a server that cannot score can still run
GENERATION_ONLY = "--scoring generate (greedy or sampled answers, parsed as in process)"


def prompt_logprob_entries(choice: Mapping[str, Any]) -> list[dict[int, float] | None]:
    """A choice's `prompt_logprobs` as {token id: log-probability} per prompt position (vLLM's JSON: ids as keys)."""
    raw = choice.get("prompt_logprobs")
    if not isinstance(raw, list):
        raise ValueError("the answer has no prompt_logprobs")
    out: list[dict[int, float] | None] = []
    for pos, entry in enumerate(raw):
        if entry is None:
            out.append(None)
            continue
        if not isinstance(entry, Mapping):
            raise ValueError(f"prompt_logprobs at position {pos} is a JSON {_kind(entry)}, not {{token id: logprob}}")
        where = f"prompt_logprobs at position {pos}"
        values = {t: v.get("logprob") if isinstance(v, Mapping) else v for t, v in entry.items()}
        out.append({int(t): _number(v, where) for t, v in values.items()})
    return out


def _kind(value: Any) -> str:
    """The JSON type of `value`, for a message."""
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def _number(value: Any, where: str) -> Any:
    """`value` if it is a JSON number (checked as a log-probability where read); else ValueError naming `where`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where} holds a JSON {_kind(value)} where a log-probability belongs")
    return value


def next_token_entries(choice: Mapping[str, Any]) -> dict[int, float]:
    """{token id: log-probability} after the prompt: the first generated position's `top_logprobs`, keyed
    `token_id:N` (`return_tokens_as_token_ids`)."""
    logprobs = choice.get("logprobs") or {}
    tops = (logprobs.get("top_logprobs") if isinstance(logprobs, Mapping) else None) or [None]
    if not isinstance(tops, list) or not isinstance(tops[0], Mapping):
        raise ValueError("the answer has no top_logprobs after the prompt")
    out = {}
    for key, value in tops[0].items():
        if not key.startswith("token_id:"):
            raise ValueError(f"top_logprobs are keyed by text ({key!r}), not by token id")
        out[int(key.removeprefix("token_id:"))] = _number(value, f"top_logprobs after the prompt at {key!r}")
    return out


#: what the manifest says of any served run
SERVED_NOTE = (
    "a served model can change behind its name without notice; checked: the fingerprint and model "
    "name of every answer, and one done item scored again at resume"
)


@dataclass(frozen=True, kw_only=True)
class ServedHardware(Hardware):
    """Where the model was served and what the server said of it (`OpenAIBackend.hardware`)."""

    #: the server and the model as it reported them (`identity.served_identity`)
    server: Mapping[str, Any]
    server_api: str
    #: the variable's name, never its value: publish masks what it holds in the publishing shell too
    api_key_env: str
    system_fingerprint: str | None
    max_concurrency: int
    request_timeout: float
    max_retries: int
    #: requests answered and attempts sent (retries too), and prompts sent
    requests: int
    attempts: int
    prompts: int

    def manifest(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "server_api": self.server_api,
            "api_key_env": self.api_key_env,
            "system_fingerprint": self.system_fingerprint,
            "max_concurrency": self.max_concurrency,
            "request_timeout": self.request_timeout,
            "max_retries": self.max_retries,
            "requests": self.requests,
            "attempts": self.attempts,
            "prompts": self.prompts,
            "note": SERVED_NOTE,
        }


class OpenAIBackend:
    """Scores and generates through a `ServerClient` (see the module docstring)."""

    name = OPENAI.name
    #: the server batches by itself; it does not say its dtype or device
    max_batch_tokens = None
    dtype = None
    device = None

    def __init__(
        self,
        client: ServerClient,
        *,
        model_id: str,
        card: Mapping[str, Any],
        tokenizer_revision: str | None = None,
        fingerprint: str | None = None,
        aliases: Sequence[str] = (),
    ) -> None:
        self.client = client
        self.model_id = model_id
        #: the names an answer may give its model: the served name and the other names of its checkpoint
        self.names = frozenset((model_id, *aliases))
        #: the model the first answer named (every later one must name it too)
        self.answered_as: str | None = None
        self.card = dict(card)
        self.model_revision, self.identity = served_identity(
            client.url, model_id, card, tokenizer_revision, fingerprint
        )
        self.is_vllm = card.get("owned_by") == "vllm"
        self.fingerprint = fingerprint
        self.prompts = 0

    def close(self) -> None:
        self.client.close()

    def hardware(self) -> ServedHardware:
        """Where the model was served and what the server said of it (the manifest's record)."""
        settings = self.client.settings
        return ServedHardware(
            server=self.identity,
            server_api=settings.server_api,
            api_key_env=settings.api_key_env,
            system_fingerprint=self.fingerprint,
            max_concurrency=settings.max_concurrency,
            request_timeout=settings.request_timeout,
            max_retries=settings.max_retries,
            requests=self.client.requests,
            attempts=self.client.attempts,
            prompts=self.prompts,
        )

    # scoring

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        if not requests:
            return []
        if self.client.settings.server_api != "completions":
            raise ProbeError(
                f"{self.client.url}: --server-api chat returns no prompt log-probabilities, so it cannot score "
                f"choices or numbers; it can run {GENERATION_ONLY}. To score, serve the model with vLLM and "
                "use --server-api completions"
            )
        bounded = [i for i, r in enumerate(requests) if r.bound is not None]
        if bounded:
            results: dict[int, ScoreResult] = {}
            done = score_bounded(self._run, [requests[i] for i in bounded])
            results.update(zip(bounded, done, strict=True))
            rest = [i for i, r in enumerate(requests) if r.bound is None]
            results.update(zip(rest, self.score([requests[i] for i in rest]) if rest else [], strict=True))
            return [results[i] for i in range(len(requests))]
        queries = plan_queries(requests)
        self._run(queries)
        return assemble(requests, queries)

    def _run(self, queries: list[Query]) -> None:
        """Fill `queries` from the server: one prompt per query and candidate group, sent in shared-field batches."""
        jobs = [(q, k, group) for q in queries for k, group in enumerate(candidate_groups(q.candidates))]

        def fields(job: tuple[Query, int, tuple[int, ...]]) -> tuple[bool, tuple[int, ...]]:
            q, k, group = job
            return (q.prompt_logprobs and k == 0, group)

        batches = []
        for (wants_prompt, group), same_jobs in groupby(sorted(jobs, key=fields), key=fields):
            same = list(same_jobs)
            for start in range(0, len(same), PROMPTS_PER_REQUEST):
                batches.append((wants_prompt, group, same[start : start + PROMPTS_PER_REQUEST]))
        bodies = [self._score_body([q.ids for q, _, _ in chunk], wants, group) for wants, group, chunk in batches]
        answers = self.client.post_all("/completions", bodies)
        parts: dict[int, list[tuple[int, np.ndarray]]] = {}
        for (wants_prompt, group, chunk), answer in zip(batches, answers, strict=True):
            choices = self._choices(answer, len(chunk))
            for (q, k, _), choice in zip(chunk, choices, strict=True):
                try:
                    if wants_prompt:
                        entries = prompt_logprob_entries(choice)
                        q.token_logprobs = continuation_logprobs(entries, q.ids, len(q.ids) - q.start)
                    if group:
                        parts.setdefault(id(q), []).append((k, candidate_logprobs(next_token_entries(choice), group)))
                except BadLogprob as exc:
                    raise ProbeError(
                        f"{self.client.url}: model {self.model_id!r} answered {exc}: the server's numbers are "
                        "broken (its weights, dtype or a proxy); nothing of this batch was written"
                    ) from None
                except ValueError as exc:
                    raise ProbeError(self._cannot_score(str(exc))) from None
        for q in queries:
            if q.candidates:
                q.next_logprobs = np.concatenate([lp for _, lp in sorted(parts[id(q)], key=lambda p: p[0])])

    def _score_body(self, prompts: list[tuple[int, ...]], wants_prompt: bool, group: tuple[int, ...]) -> dict:
        self.prompts += len(prompts)
        body: dict[str, Any] = {
            "model": self.model_id,
            "prompt": [list(ids) for ids in prompts],
            "max_tokens": 1,
            "temperature": 0.0,
            "top_p": 1.0,
            "n": 1,
            "seed": 0,
        }
        if wants_prompt:
            body["prompt_logprobs"] = 0
        if group:
            body.update(logprobs=1, logprob_token_ids=list(group), return_tokens_as_token_ids=True)
        return body

    def _choices(self, answer: Mapping[str, Any], n: int) -> list[Mapping[str, Any]]:
        """The answer's choices in prompt order, checked to be one per prompt."""
        self._same_server(answer)
        choices = answer.get("choices")
        if not isinstance(choices, list) or len(choices) != n:
            got = len(choices) if isinstance(choices, list) else "no"
            raise ProbeError(self._cannot_score(f"it answered {got} choices for {n} prompts"))
        if not all(isinstance(c, Mapping) for c in choices):
            kind = next(_kind(c) for c in choices if not isinstance(c, Mapping))
            raise ProbeError(self._cannot_score(f"it answered a choice that is a JSON {kind}, not an object"))
        return sorted(choices, key=lambda c: c.get("index", 0))

    def _same_server(self, answer: Mapping[str, Any]) -> None:
        """Refuse an answer that is not from what the key names: another fingerprint, or another model.

        The fingerprint is compared on the completions API, where it was read at load: one that appears
        or disappears is a change like another value (a server restarted with other settings). The chat
        API's is not keyed, so not compared (hosted APIs vary it between requests). An answer's `model`,
        when it names one, must be the served name, another name /v1/models lists for the same checkpoint
        (vLLM answers every request with the first name it serves), or a dated snapshot of it (hosted APIs
        answer `gpt-4o-2024-08-06` for `gpt-4o`), and the same in every answer of the run.
        """
        now = answer.get("system_fingerprint")
        if self.client.settings.server_api == "completions" and now != self.fingerprint:
            raise ProbeError(
                f"{self.client.url}: the server's system_fingerprint changed during the run ({self.fingerprint} -> "
                f"{now}): {self.model_id!r} is no longer what this run's key names. The rows written so far keep "
                "the old key; rerun to score the rest under the new one"
            )
        named = answer.get("model")
        if named is None:
            return
        ours = isinstance(named, str) and any(_answers_as(named, n) for n in self.names)
        if ours and self.answered_as in (None, named):
            self.answered_as = named
            return
        before = " as before" if self.answered_as is not None and ours else ""
        expected = self.answered_as if before else self.model_id
        raise ProbeError(
            f"{self.client.url}: the server answered for another model ({named!r}, not {expected!r}{before}): "
            f"{self.model_id!r} is no longer what this run's key names (a redeployment or a router?). The rows "
            "written so far keep their key; check what the server serves at /v1/models and rerun"
        )

    def _cannot_score(self, why: str) -> str:
        return (
            f"{self.client.url}: model {self.model_id!r} cannot be scored here: {why}. Scoring needs prompt "
            "log-probabilities of token-id prompts on /v1/completions (vLLM's prompt_logprobs and "
            f"logprob_token_ids); this server can run {GENERATION_ONLY}"
        )

    # generation

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        if not requests:
            return []
        chat = self.client.settings.server_api == "chat"
        if chat and any(not r.messages for r in requests):
            raise ProbeError(
                "--server-api chat sends chat messages, and these items are plain prompts (--no-chat): "
                "use --server-api completions"
            )
        path = "/chat/completions" if chat else "/completions"
        answers = self.client.post_all(path, [self._generate_body(r, chat) for r in requests])
        return [self._generation(r, a, chat) for r, a in zip(requests, answers, strict=True)]

    def _generate_body(self, r: GenerateRequest, chat: bool) -> dict[str, Any]:
        self.prompts += 1
        body: dict[str, Any] = {
            "model": self.model_id,
            "max_tokens": r.max_tokens,
            "temperature": r.temperature,
            "top_p": r.top_p if r.temperature > 0 else 1.0,
            "seed": r.seed,
            "n": 1,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
        }
        if chat:
            body["messages"] = [dict(m) for m in r.messages]
        else:
            body["prompt"] = list(r.context)
        if self.is_vllm:  # what the in-process vLLM backend states (vllm.backend._common), so no default applies
            body.update(top_k=0, min_p=0.0, repetition_penalty=1.0, skip_special_tokens=True)
            if r.stop:
                body.update(stop=list(r.stop), include_stop_str_in_output=True)
            if r.stop_token_ids:
                body["stop_token_ids"] = list(r.stop_token_ids)
        return body

    def _generation(self, request: GenerateRequest, answer: Mapping[str, Any], chat: bool) -> Generation:
        choices = answer.get("choices") or []
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise ProbeError(f"{self.client.url}: the server answered no choice object for a generation")
        self._same_server(answer)
        choice = choices[0]
        text = ((choice.get("message") or {}).get("content") if chat else choice.get("text")) or ""
        reason = "length" if choice.get("finish_reason") == "length" else "stop"
        usage = answer.get("usage")
        counted = [len(choice.get("token_ids") or ())]
        if isinstance(usage, Mapping) and isinstance(usage.get("completion_tokens"), int):
            counted.append(usage["completion_tokens"])  # one prompt per request: its own count
        if max(counted) > request.max_tokens:  # the answer would be stored whole and parsed past the protocol's cap
            raise ProbeError(
                f"{self.client.url}: the server generated {max(counted)} tokens where max_tokens was "
                f"{request.max_tokens}: it ignored the limit, so its answers are not the protocol's; fix the server"
            )
        if request.stop:  # vLLM stopped at the first one already (kept in the text); others ran on past it
            cut, found = cut_at_stop(text, request.stop)
            if found:
                text, reason = cut, "stop"
        return Generation(text, tuple(choice.get("token_ids") or ()), reason)


def load(model: str, options: ServerOptions, resolved: Resolved) -> OpenAIBackend:
    """The registry's loader (`runners.backends.openai.spec`): reach the server and find `model` among its models."""
    client = ServerClient(options)
    try:
        listed = client.get("/models").get("data") or []
        card = next((c for c in listed if isinstance(c, Mapping) and c.get("id") == model), None)
        if card is None:
            names = ", ".join(str(c.get("id")) for c in listed if isinstance(c, Mapping)) or "none"
            raise ProbeError(f"{client.url} serves no model named {model!r} (it serves: {names}): pass one as --model")
        fingerprint, answer = None, None
        if client.settings.server_api == "completions":  # one token in, one out: what the server says it runs
            token = getattr(resolved.tokenizer, "eos_token_id", None) or 0
            probe = {"model": model, "prompt": [int(token)], "max_tokens": 1, "temperature": 0.0, "n": 1}
            answer = client.post("/completions", probe)
            fingerprint = answer.get("system_fingerprint")
        # the other names of the same checkpoint (vLLM `--served-model-name a b`: one root, answered as `a`)
        root = card.get("root")
        aliases = [c.get("id") for c in listed if isinstance(c, Mapping) and root is not None and c.get("root") == root]
    except BaseException:
        client.close()
        raise
    revision = resolved.extra.get("tokenizer_revision")
    backend = OpenAIBackend(
        client,
        model_id=model,
        card=card,
        tokenizer_revision=revision,
        fingerprint=fingerprint,
        aliases=[a for a in aliases if isinstance(a, str)],
    )
    if answer is not None:
        backend._same_server(answer)  # the model it answered for, from the first answer on
    return backend
