"""What a server answers is checked before it becomes a number of a row (issue #51, findings 1 and 6).

The scripted server (tests/openai_fake_server.py) answers NaN, +inf or +3.0 where a
log-probability belongs, or a malformed shape; each is one `ProbeError` line naming where,
never a traceback and never a row. A run through the API against a NaN-answering server
writes no part; a NaN row written before rows were checked is rescored by the next run, and
`publish` refuses it (tests/probes/test_publish.py).
"""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from openai_fake_server import MODEL, FakeServer, load_served
from promptgen.core.errors import ProbeError
from runners.backends.load import LoadOptions
from runners.exchange import ScoreRequest
from runners.run.runner import run
from runners_fixtures import load_folder, number_items, require_extra, write_prompt_folder


@pytest.fixture(autouse=True)
def _needs_openai() -> None:
    require_extra("openai")


def _refusal(server: FakeServer, step: str, request: ScoreRequest) -> str:
    """The one-line refusal of scoring `request` when the server's next answer is `step`."""
    backend = load_served(server)  # reads /models and the fingerprint (one POST)
    server.script = [step] * 8
    try:
        with pytest.raises(ProbeError) as caught:
            backend.score([request])
    finally:
        backend.close()
    message = str(caught.value)
    assert "\n" not in message and server.url in message
    return message


@pytest.mark.parametrize(("step", "shown"), [("nan", "nan"), ("inf", "inf"), ("positive", "3.0")])
def test_a_number_that_is_no_log_probability_is_one_line_naming_the_position(step: str, shown: str) -> None:
    """Before: `float()` took NaN, +inf and +3.0 as log-probabilities, giving rows of NaN or of a flat 0.5/0.5."""
    with FakeServer() as server:
        # sentence mode: the prompt's own tokens; the context is 3 tokens, so position 3 is the option's first
        message = _refusal(server, step, ScoreRequest((5, 9, 2), ((4, 11),)))
        assert f"prompt_logprobs at position 3 (token 4): {shown} is not a log-probability" in message
        # letter mode: the candidates after the prompt
        message = _refusal(server, step, ScoreRequest((5, 9, 2), candidates=(10, 12)))
        assert f"after the prompt of token id 10: {shown} is not a log-probability" in message


def test_minus_infinity_is_a_probability_of_zero() -> None:
    """vLLM's -inf (JSON -9999 or -Infinity) is a log-probability: probability 0, read as it is."""
    from runners.backends.prompt_logprobs.read import candidate_logprobs

    got = candidate_logprobs({10: -math.inf, 12: -9999.0, 14: 1e-9}, (10, 12, 14))
    assert got.tolist() == [-math.inf, -9999.0, 1e-9]


@pytest.mark.parametrize(
    ("step", "request_", "said"),
    [
        ("list-entry", ScoreRequest((5, 9, 2), ((4, 11),)), "prompt_logprobs at position 1 is a JSON array"),
        ("null-logprob", ScoreRequest((5, 9, 2), ((4, 11),)), "prompt_logprobs at position 1 holds a JSON null"),
        ("null-logprob", ScoreRequest((5, 9), candidates=(10,)), "'token_id:10' holds a JSON null"),
        ("string-choices", ScoreRequest((5, 9, 2), ((4, 11),)), "a choice that is a JSON string"),
        ("array-body", ScoreRequest((5, 9, 2), ((4, 11),)), "POST /completions answered a JSON list, not an object"),
    ],
)
def test_an_answer_of_the_wrong_shape_is_one_line(step: str, request_: ScoreRequest, said: str) -> None:
    """Before: AttributeError or TypeError tracebacks."""
    with FakeServer() as server:
        assert said in _refusal(server, step, request_)


def test_a_models_list_that_is_a_json_array_is_one_line() -> None:
    with FakeServer() as server:
        server.models_answer = [{"id": MODEL}]
        with pytest.raises(ProbeError, match=r"GET /models answered a JSON list, not an object"):
            load_served(server)


@pytest.mark.parametrize("timeout", [math.inf, math.nan])
def test_the_request_timeout_is_a_finite_positive_number(timeout: float) -> None:
    """Before: `--request-timeout inf` passed and overflowed the socket's timeout (`OverflowError`)."""
    with pytest.raises(ProbeError, match=r"--request-timeout must be a positive number"):
        LoadOptions.of(backend="openai", base_url="http://127.0.0.1:9/v1", request_timeout=timeout)


def test_a_run_against_a_server_answering_nan_is_one_line_and_writes_no_row(tmp_path: Path) -> None:
    """Before: the run finished with `0 refusals` and wrote rows of `number_probs [nan, ...]`, `refused False`."""
    prompts = write_prompt_folder(tmp_path / "prompts", number_items(4))
    out = tmp_path / "results"
    with FakeServer() as server:
        load = LoadOptions.of(backend="openai", base_url=server.url, tokenizer=str(load_folder()))
        server.script = [None] + ["nan"] * 50  # the fingerprint's completion, then NaN everywhere
        with pytest.raises(ProbeError) as caught:
            run(prompts, "items", MODEL, out, load=load, chat=False)
    message = str(caught.value)
    assert "\n" not in message and "is not a log-probability" in message and "nan" in message
    assert not list(out.rglob("part-*.parquet"))
    # the same run against the healthy server scores every item, with distributions that sum to 1
    with FakeServer() as server:
        load = LoadOptions.of(backend="openai", base_url=server.url, tokenizer=str(load_folder()))
        summary = run(prompts, "items", MODEL, out, load=load, chat=False)
    rows = [r for p in out.rglob("part-*.parquet") for r in pq.read_table(p).to_pylist()]
    assert summary.items == 4 and len(rows) == 4
    assert all(abs(sum(r["number_probs"]) - 1) < 1e-9 for r in rows)
