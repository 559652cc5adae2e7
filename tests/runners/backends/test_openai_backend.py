"""The `openai` backend against a scripted server (tests/openai_fake_server.py): numbers, retries, failures, the key.

The fake server's log-probabilities are a known function of the prompt (`fake_logprob`), so every
number the backend reads is checked against that function computed here, position by position.
The real server (`vllm serve` with SmolLM2, parity with the hf and vllm backends, a SIGKILLed
client resumed) is tests/probes/test_run_e2e.py's slow tier.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from openai_fake_server import MODEL, FakeServer, fake_logprob, load_served
from promptgen.core.errors import ProbeError
from runners.backends import BACKENDS, Resolved, backend_spec
from runners.backends.load import LoadOptions
from runners.backends.openai import backend as openai_backend
from runners.exchange import GenerateRequest, NumberBound, ScoreRequest
from runners.run.request import RunRequest
from runners_fixtures import load_folder, number_items, require_extra, write_prompt_folder

KEY = "sk-test-" + "K7" * 20  # an OpenAI-shaped key: must never be printed or written


@pytest.fixture(autouse=True)
def _needs_openai() -> None:
    require_extra("openai")


def _brute(ids: tuple[int, ...], cont: tuple[int, ...]) -> list[float]:
    return [fake_logprob(ids + cont[:k], cont[k]) for k in range(len(cont))]


def test_choice_and_candidate_log_probabilities_are_read_position_by_position() -> None:
    context, conts, candidates = (5, 9, 2), ((4, 11), (6,), (8, 1, 3)), (10, 12, 14)
    with FakeServer() as server:
        backend = load_served(server)
        (result,) = backend.score([ScoreRequest(context, conts, candidates)])
        plain, letter = backend.score([ScoreRequest(context, conts), ScoreRequest(context, candidates=candidates)])
        backend.close()
    for got in (result, plain):
        for cont, score in zip(conts, got.continuations, strict=True):
            np.testing.assert_array_equal(score.token_logprobs, _brute(context, cont))
    for cont, score in zip(conts, result.continuations, strict=True):
        want = [[fake_logprob(context + cont[: k + 1], c) for c in candidates] for k in range(len(cont))]
        np.testing.assert_array_equal(score.next_logprobs, want)
    for got in (result, letter):
        np.testing.assert_array_equal(got.next_logprobs, [fake_logprob(context, c) for c in candidates])
    # one prompt per option (prompt log-probabilities) and per prefix whose candidates are read, token ids as sent
    prompts = [tuple(p) for body in server.posts[1:] for p in body["prompt"]]
    assert (*context, 4, 11) in prompts and (*context, 4) in prompts and context in prompts
    assert all(body["model"] == MODEL and body["max_tokens"] == 1 for body in server.posts)
    assert server.posts[0]["prompt"] == [0]  # the fingerprint's one-token completion, at load


def test_more_than_128_candidates_go_in_groups_and_read_the_same_numbers() -> None:
    context, candidates = (3, 1, 4), tuple(range(1000, 1300))
    with FakeServer() as server:
        backend = load_served(server)
        (result,) = backend.score([ScoreRequest(context, ((7, 7),), candidates)])
        backend.close()
    assert max(len(b.get("logprob_token_ids") or ()) for b in server.posts) == 128
    np.testing.assert_array_equal(result.next_logprobs, [fake_logprob(context, c) for c in candidates])
    assert result.continuations[0].next_logprobs.shape == (2, 300)


def test_a_bounded_number_request_reads_the_numbers_an_exact_one_reads() -> None:
    context, leaves, digits = (2, 7), ((15,), (16,), (16, 15), (17, 18)), (15, 16, 17, 18)
    bound = NumberBound(0.5, leaves)
    with FakeServer() as server:
        backend = load_served(server)
        exact, bounded = backend.score(
            [ScoreRequest(context, leaves, digits), ScoreRequest(context, leaves, digits, bound)]
        )
        backend.close()
    np.testing.assert_array_equal(bounded.next_logprobs, exact.next_logprobs)
    for a, b in zip(exact.continuations, bounded.continuations, strict=True):
        done = ~np.isnan(b.token_logprobs)
        assert done.any()
        np.testing.assert_array_equal(b.token_logprobs[done], a.token_logprobs[done])


@pytest.mark.parametrize("first", ["429", "500", "drop"])
def test_a_429_a_500_or_a_dropped_connection_is_retried(first: str) -> None:
    with FakeServer() as server:
        backend = load_served(server)  # reads /models and the fingerprint (one POST)
        server.script = [first, None]
        (result,) = backend.score([ScoreRequest((1, 2), ((3,),))])
        hardware = backend.hardware().manifest()
        backend.close()
    np.testing.assert_array_equal(result.continuations[0].token_logprobs, _brute((1, 2), (3,)))
    assert len(server.posts) == 3 and server.posts[1] == server.posts[2]
    assert hardware["requests"] == 3 and hardware["attempts"] == 4  # /models, the fingerprint, the POST twice


def test_a_server_that_never_answers_is_one_line_after_the_retries() -> None:
    with FakeServer() as server:
        backend = load_served(server, request_timeout=0.3, max_retries=1)
        server.script = ["hang"] * 5
        started = time.monotonic()
        with pytest.raises(ProbeError) as caught:
            backend.score([ScoreRequest((1, 2), ((3,),))])
        backend.close()
    message = str(caught.value)
    assert "\n" not in message and "no answer within 0.3 s, 2 tries" in message and "--request-timeout" in message
    assert len(server.posts) == 3 and time.monotonic() - started < 30


def test_errors_name_the_server_without_credentials_and_the_flag() -> None:
    with FakeServer() as server:
        backend = load_served(server, max_retries=1)
        server.script = ["500"] * 3
        with pytest.raises(ProbeError, match=r"answered 500"):
            backend.score([ScoreRequest((1, 2), ((3,),))])
        backend.close()
    with (
        FakeServer() as server,
        pytest.raises(ProbeError, match=r"serves no model named 'other' \(it serves: fake-model\)"),
    ):
        openai_backend.load("other", LoadOptions.of(backend="openai", base_url=server.url).options, _resolved())
    with pytest.raises(ProbeError, match="could not connect"):
        _backend_at("http://127.0.0.1:9/v1")


def _resolved() -> Resolved:
    return Resolved(None, None, "auto", "server", {})


def _backend_at(url: str):
    return openai_backend.load(
        MODEL, LoadOptions.of(backend="openai", base_url=url, max_retries=0).options, _resolved()
    )


def test_a_server_without_prompt_log_probabilities_says_what_it_can_run(monkeypatch) -> None:
    monkeypatch.setattr(
        "openai_fake_server.completion", lambda body, owned_by: {"choices": [{"index": 0, "text": "x"}]}
    )
    with FakeServer(owned_by="someone") as server:
        backend = load_served(server)
        with pytest.raises(
            ProbeError, match=r"cannot be scored here: the answer has no prompt_logprobs.*--scoring generate"
        ):
            backend.score([ScoreRequest((1, 2), ((3,),))])
        backend.close()
    with FakeServer() as server:
        backend = load_served(server, server_api="chat")
        with pytest.raises(ProbeError, match="--server-api chat returns no prompt log-probabilities"):
            backend.score([ScoreRequest((1, 2), ((3,),))])
        backend.close()


@pytest.mark.parametrize("owned_by", ["vllm", "someone"])
def test_generation_passes_the_sampling_fields_and_cuts_at_the_first_stop(owned_by: str) -> None:
    request = GenerateRequest((1, 2, 3), max_tokens=9, temperature=0.7, top_p=0.9, seed=11, stop=(".",))
    with FakeServer(owned_by=owned_by) as server:
        backend = load_served(server)
        (gen,) = backend.generate([request])
        backend.close()
    body = server.posts[-1]
    assert body["prompt"] == [1, 2, 3] and body["max_tokens"] == 9 and body["seed"] == 11
    assert body["temperature"] == 0.7 and body["top_p"] == 0.9
    # vLLM is told its own sampling fields (else the model's generation config fills them) and the stop string;
    # another server runs past the stop, and the text is cut here, the stop string kept as in process
    assert ("repetition_penalty" in body and body["stop"] == ["."]) == (owned_by == "vllm")
    assert (gen.text, gen.finish_reason) == ("I pass $7.", "stop")


def test_a_generation_past_max_tokens_is_refused() -> None:
    """#69: a server that ignored `max_tokens` had its answer stored whole and parsed; now one line says so."""
    with FakeServer([None, "overlong"]) as server:  # the first answers the fingerprint probe at load
        backend = load_served(server)
        with pytest.raises(ProbeError, match=r"generated 12 tokens where max_tokens was 9: it ignored the limit"):
            backend.generate([GenerateRequest((1, 2, 3), max_tokens=9)])
        (gen,) = backend.generate([GenerateRequest((1, 2, 3), max_tokens=9)])  # within the limit: kept
        backend.close()
    assert gen.text == "I pass $7. Done"


def test_the_chat_api_sends_the_messages() -> None:
    messages = ({"role": "user", "content": "How much?"},)
    with FakeServer() as server:
        backend = load_served(server, server_api="chat")
        (gen,) = backend.generate([GenerateRequest((1, 2), max_tokens=5, messages=messages)])
        with pytest.raises(ProbeError, match="plain prompts"):
            backend.generate([GenerateRequest((1, 2), max_tokens=5)])
        backend.close()
    assert server.posts[0]["messages"] == list(messages) and "prompt" not in server.posts[0]
    assert gen.text == "I pass 7 dollars."


def test_the_key_is_sent_and_the_identity_is_what_the_server_reports(monkeypatch) -> None:
    monkeypatch.setenv("MY_SERVER_KEY", KEY)
    with FakeServer() as server:
        backend = load_served(server, api_key_env="MY_SERVER_KEY")
        backend.score([ScoreRequest((1, 2), ((3,),))])
        again = load_served(server, api_key_env="MY_SERVER_KEY")
        hardware = backend.hardware().manifest()
        backend.close()
        again.close()
    assert server.auth[0] == f"Bearer {KEY}"
    assert backend.model_revision == again.model_revision  # vLLM's `created` is the request's time: not keyed
    assert backend.model_revision.startswith("served-") and backend.dtype is None
    assert hardware["server"]["root"] == "fake-model (a folder on the server)"  # no server path published
    assert hardware["system_fingerprint"] == "vllm-fake" == hardware["server"]["system_fingerprint"]
    assert KEY not in repr(hardware)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"backend": "hf", "base_url": "http://x/v1"}, "--base-url works with --backend openai"),
        ({"backend": "openai"}, "--backend openai needs --base-url"),
        ({"backend": "openai", "base_url": "http://user:pw@x/v1"}, "must not carry credentials"),
        ({"backend": "openai", "base_url": "localhost:8000"}, "must be an http"),
        ({"backend": "openai", "base_url": "http://x/v1", "dtype": "float16"}, "--dtype is the server's"),
        ({"backend": "openai", "base_url": "http://x/v1", "server_api": "responses"}, "--server-api must be one of"),
        (
            {"backend": "openai", "base_url": "http://x/v1", "device_map": "auto"},
            "--device-map works with --backend hf",
        ),
    ],
)
def test_server_flags_are_checked_before_anything_is_sent(options: dict, message: str) -> None:
    with pytest.raises(ProbeError, match=message):
        LoadOptions.of(**options)


def test_ray_is_refused_for_a_served_model() -> None:
    load = LoadOptions.of(backend="openai", base_url="http://x/v1")
    with pytest.raises(ProbeError, match="drop --ray"):
        RunRequest("d", "c", "m", "out", load=load, ray=True)


def test_the_backend_is_registered_through_the_registry_alone() -> None:
    spec = backend_spec("openai")
    assert spec.served and spec.extras == ("openai",) and not spec.starts_engine
    assert list(BACKENDS)[:3] == ["hf", "vllm", "openai"]
    # its code is its own package: no other backend's module names it
    src = Path(openai_backend.__file__).parents[1]
    for other in ("hf", "vllm"):
        for path in (src / other).glob("*.py"):
            assert "openai" not in path.read_text(encoding="utf-8"), path


def _cli(args: list[str], env: dict[str, str], tmp: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, **env, "HF_HUB_OFFLINE": "1", "HF_DATASETS_CACHE": str(tmp / "hf-datasets")}
    return subprocess.run(
        [sys.executable, "-m", "probes.cli", *args], env=env, capture_output=True, text=True, timeout=300
    )


def test_probes_run_keeps_the_key_out_of_every_output_and_file(tmp_path: Path) -> None:
    """`probes run -v` against a server that echoes the Authorization header in an error it then recovers from."""
    prompts = write_prompt_folder(tmp_path / "prompts", number_items(2))
    out = tmp_path / "results"
    with FakeServer(["500", None]) as server:
        args = ["-v", "run", str(prompts), "-c", "items", "-m", MODEL, "--backend", "openai", "--base-url", server.url]
        args += ["--tokenizer", str(load_folder()), "--out", str(out), "--no-chat"]
        done = _cli(args, {"OPENAI_API_KEY": KEY}, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert server.auth and all(a == f"Bearer {KEY}" for a in server.auth)
    assert KEY not in done.stdout + done.stderr
    written = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "results_manifest.json" for p in written)
    for path in written:
        assert KEY.encode() not in path.read_bytes(), path
    (run,) = json.loads((out / "results_manifest.json").read_text())["runs"].values()
    assert run["hardware"]["api_key_env"] == "OPENAI_API_KEY"  # its name, for publish to look for what it holds
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "A served model can change behind its name" in card and f"`{server.url}`" in card
    assert "/srv/models" not in card and "fake-model (a folder on the server)" in card


def test_probes_run_against_a_server_that_never_answers_is_one_line(tmp_path: Path) -> None:
    prompts = write_prompt_folder(tmp_path / "prompts", number_items(2))
    with FakeServer(["hang"] * 10) as server:
        args = ["run", str(prompts), "-c", "items", "-m", MODEL, "--backend", "openai", "--base-url", server.url]
        args += ["--tokenizer", str(load_folder()), "--out", str(tmp_path / "r"), "--no-chat", "-q"]
        done = _cli([*args, "--request-timeout", "0.5", "--max-retries", "1"], {"OPENAI_API_KEY": KEY}, tmp_path)
    assert done.returncode == 1
    # (datasets' own progress bar of reading the prompts aside)
    lines = [line for line in done.stderr.splitlines() if line.strip() and not line.startswith("Generating")]
    assert len(lines) == 1 and "no answer within 0.5 s, 2 tries" in lines[0], done.stderr
    assert "Traceback" not in done.stderr and KEY not in done.stderr


def test_plans_count_the_prompts_the_server_receives() -> None:
    """`openai_token_counts` (plans, quotes) against what the server was actually sent, prompt by prompt."""
    from runners.backends.openai.accounting import openai_token_counts

    requests = [
        ScoreRequest((5, 9, 2), ((4, 11), (6,), (8, 1, 3))),  # sentence choice: one prompt per option
        ScoreRequest((5, 9), candidates=(10, 12)),  # letter choice: the context's next token
        ScoreRequest((2, 7), ((15,), (16,), (16, 15)), tuple(range(15, 300))),  # a number trie, candidates in 3 groups
    ]
    with FakeServer() as server:
        backend = load_served(server)
        backend.score(requests)
        backend.close()
    prompts = [tuple(p) for body in server.posts[1:] for p in body["prompt"]]  # after the fingerprint's
    counts = openai_token_counts(requests, items_per_call=None)
    assert counts.prompts == len(prompts) == backend.prompts
    assert counts.computed_tokens == sum(len(p) for p in prompts)  # every prompt counted whole


def test_a_server_whose_fingerprint_changes_mid_run_is_refused(monkeypatch) -> None:
    """A redeployment behind the same name (vLLM's fingerprint: its engine config's hash) must not fill the old key."""
    import openai_fake_server

    with FakeServer() as server:
        backend = load_served(server)
        before = backend.model_revision
        real = openai_fake_server.completion
        monkeypatch.setattr(openai_fake_server, "completion", lambda b, o: {**real(b, o), "system_fingerprint": "v2"})
        with pytest.raises(ProbeError, match=r"system_fingerprint changed during the run \(vllm-fake -> v2\)"):
            backend.score([ScoreRequest((1, 2), ((3,),))])
        backend.close()
        assert load_served(server).model_revision != before  # the next run is another key


def test_a_model_served_by_its_path_writes_no_path(tmp_path: Path) -> None:
    """`vllm serve /models/x` serves the model under its path: rows, manifest and card name it `x`, never the path."""
    served = "/srv/models/llm-7b"  # a path of the server's machine, absent here
    prompts = write_prompt_folder(tmp_path / "prompts", number_items(2))
    out = tmp_path / "results"
    with FakeServer(model=served) as server:
        args = ["run", str(prompts), "-c", "items", "-m", served, "--backend", "openai", "--base-url", server.url]
        done = _cli([*args, "--tokenizer", str(load_folder()), "--out", str(out), "--no-chat", "-q"], {}, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert server.posts[-1]["model"] == served  # the server is still asked by its own name
    for path in (p for p in out.rglob("*") if p.is_file()):
        assert b"/srv/models" not in path.read_bytes(), path
    rows = [r for p in out.rglob("part-*.parquet") for r in pq.read_table(p).to_pylist()]
    assert {r["model"] for r in rows} == {"llm-7b"}


@pytest.mark.parametrize(("at_load", "later"), [("fp-A", None), (None, "fp-B")])
def test_a_fingerprint_that_appears_or_disappears_mid_run_is_refused(at_load, later) -> None:
    """A server that stops (or starts) naming its fingerprint is no longer known to be the one the key names."""
    with FakeServer() as server:
        server.fingerprint = at_load
        backend = load_served(server)
        assert backend.fingerprint == at_load
        backend.score([ScoreRequest((1, 2), ((3,),))])  # unchanged: scored
        server.fingerprint = later
        with pytest.raises(ProbeError) as caught:
            backend.score([ScoreRequest((1, 2), ((3,),))])
        with pytest.raises(ProbeError, match="system_fingerprint changed during the run"):
            backend.generate([GenerateRequest((1, 2), max_tokens=5)])
        backend.close()
    message = str(caught.value)
    assert "\n" not in message
    assert f"system_fingerprint changed during the run ({at_load} -> {later})" in message


def test_an_answer_for_another_model_is_refused() -> None:
    """The `model` of every answer is the served name (or another name of its checkpoint on /v1/models)."""
    with FakeServer(also_serves=("fake-alias",)) as server:
        backend = load_served(server)
        server.answer_model = "other-model"
        with pytest.raises(ProbeError) as caught:
            backend.score([ScoreRequest((1, 2), ((3,),))])
        with pytest.raises(ProbeError, match="answered for another model"):
            backend.generate([GenerateRequest((1, 2), max_tokens=5)])
        backend.close()
        # vLLM serving one checkpoint under two names answers every request with the first: the same model
        server.answer_model = MODEL
        alias = openai_backend.load(
            "fake-alias", LoadOptions.of(backend="openai", base_url=server.url).options, _resolved()
        )
        (result,) = alias.score([ScoreRequest((1, 2), ((3,),))])
        alias.close()
    message = str(caught.value)
    assert "\n" not in message
    assert "the server answered for another model ('other-model', not 'fake-model')" in message
    np.testing.assert_array_equal(result.continuations[0].token_logprobs, _brute((1, 2), (3,)))
    with FakeServer() as server:
        backend = load_served(server, server_api="chat")
        messages = ({"role": "user", "content": "How much?"},)
        chat = GenerateRequest((1, 2), max_tokens=5, messages=messages)
        server.answer_model = "other-model"
        with pytest.raises(ProbeError, match="answered for another model"):
            backend.generate([chat])
        # a hosted alias answers as its dated snapshot, the same in every answer of the run
        server.answer_model = f"{MODEL}-2024-08-06"
        backend.generate([chat, chat])
        server.answer_model = f"{MODEL}-2024-11-20"
        with pytest.raises(ProbeError, match=r"\('fake-model-2024-11-20', not 'fake-model-2024-08-06' as before\)"):
            backend.generate([chat])
        backend.close()
        backend = load_served(server, server_api="chat")
        server.answer_model = f"{MODEL}-large"  # a longer name is another model, not a snapshot
        with pytest.raises(ProbeError, match="answered for another model"):
            backend.generate([chat])
        backend.close()


def _served_run(server: FakeServer, prompts: Path, out: Path, limit: int):
    from runners.run.runner import run

    load = LoadOptions.of(backend="openai", base_url=server.url, tokenizer=str(load_folder()))
    return run(RunRequest(str(prompts), "items", MODEL, str(out), load=load, chat=False, limit=limit))


def _prompts_sent(server: FakeServer, since: int) -> list[tuple[int, ...]]:
    """The token-id prompts the server was sent from its POST `since` on, the load's one-token probe left out."""
    return sorted(tuple(p) for body in server.posts[since + 1 :] for p in body["prompt"])


def _stored(out: Path) -> dict[str, list[float]]:
    rows = [r for p in out.rglob("part-*.parquet") for r in pq.read_table(p).to_pylist()]
    return {r["id"]: r["number_probs"] for r in rows}


def test_a_resumed_run_refuses_a_served_model_whose_answers_changed(tmp_path: Path) -> None:
    """Other weights behind the same name, root and fingerprint: one done item scored again tells."""
    prompts = write_prompt_folder(tmp_path / "prompts", number_items(4))
    out = tmp_path / "results"
    with FakeServer() as server:
        _served_run(server, prompts, out, limit=2)
        before = _stored(out)
        server.logprob_scale = 1.5  # redeployed: the same name, card and fingerprint, other numbers
        with pytest.raises(ProbeError) as caught:
            _served_run(server, prompts, out, limit=4)
    message = str(caught.value)
    assert "\n" not in message and "answers changed since" in message and "redeployed" in message
    assert "--out" in message and "'n0'" in message
    assert _stored(out) == before  # nothing added to the rows of the old weights


def test_a_resumed_greedy_generation_refuses_a_served_model_whose_answers_changed(tmp_path: Path) -> None:
    """#69: served generation was never rechecked at resume, though a greedy protocol's answer should repeat. One done
    item is generated again: the same answer goes on; another answer is one line, and nothing is added."""
    from runners.run.runner import run
    from runners.scoring.settings import scoring_settings

    prompts = write_prompt_folder(tmp_path / "prompts", number_items(4))
    out = tmp_path / "results"

    def served_generation(limit: int):
        load = LoadOptions.of(backend="openai", base_url=server.url, tokenizer=str(load_folder()))
        settings = scoring_settings("generate", max_new_tokens=16)
        return run(RunRequest(str(prompts), "items", MODEL, str(out), load=load, chat=False, limit=limit,
                              settings=settings))  # fmt: skip

    def answers() -> dict[str, int]:
        rows = [r for p in out.rglob("part-*.parquet") for r in pq.read_table(p).to_pylist()]
        return {r["id"]: r["parsed_value"] for r in rows}

    with FakeServer() as server:
        served_generation(limit=1)
        server.generation_text = "I pass $7 now"  # another text, the same answer: greedy decoding may vary late
        served_generation(limit=2)
        before = answers()
        assert set(before.values()) == {7} and len(before) == 2
        server.generation_text = "I pass $9. Done"  # redeployed: the same name and fingerprint, another answer
        with pytest.raises(ProbeError) as caught:
            served_generation(limit=4)
    message = str(caught.value)
    assert "\n" not in message and "answers changed since" in message and "reads as 9" in message
    assert "stored as 7" in message and "--out" in message
    assert answers() == before


def test_a_resumed_run_of_an_unchanged_server_rescores_one_done_item_only(tmp_path: Path) -> None:
    prompts = write_prompt_folder(tmp_path / "prompts", number_items(4))
    sent = {}
    with FakeServer() as server:
        for name, limit in (("first", 1), ("half", 2), ("all", 4)):
            start = len(server.posts)
            _served_run(server, prompts, tmp_path / name, limit=limit)
            sent[name] = _prompts_sent(server, start)
        start = len(server.posts)
        summary = _served_run(server, prompts, tmp_path / "half", limit=4)  # resumes: n0, n1 done
        resumed = _prompts_sent(server, start)
    assert (summary.skipped, summary.items) == (2, 2)
    # what a fresh run of four items sends, less the two done, plus the first done item's prompts once more
    want = list(sent["all"])
    for prompt in sent["half"]:
        want.remove(prompt)
    assert resumed == sorted(want + sent["first"])
    assert _stored(tmp_path / "half") == _stored(tmp_path / "all")
