"""Hub tokens never reach the terminal: every error, warning and traceback the CLI prints is scrubbed.

A mirror or proxy that echoes the request into its error body makes datasets/transformers
repeat the `Authorization` header in the exception text, which commands wrap into their
one-line error. The loaders are replaced by ones raising exactly such an error.
"""

from __future__ import annotations

import re
import sys

import datasets
import pytest
from typer.testing import CliRunner

from probes import cli
from probes.cli import app
from promptgen.core import secrets
from promptgen.hub import remote

runner = CliRunner()
ENV_TOKEN = "plain-env-secret-77"  # not hf_-shaped: masked because it is HF_TOKEN's value
ECHOED = "hf_" + "Z" * 34  # a token-shaped credential the mirror echoes
SAVED = "saved-login-secret-88"  # what `hf auth login` saved


def _echoing_error(cls: type[Exception] = datasets.exceptions.DatasetNotFoundError) -> Exception:
    """What a mirror that echoes the request produces, as the library raises it."""
    return cls(
        "500 Server Error for url https://mirror.local/api/datasets/org/probes: request was "
        f"{{'authorization': 'Bearer {ECHOED}', 'x-token-copy': '{ENV_TOKEN}'}} "
        f"Authorization: Bearer {SAVED}"
    )


@pytest.fixture()
def leaky_hub(monkeypatch, tmp_path):
    """HF_TOKEN and a saved login are set, and every dataset load fails echoing the request."""
    monkeypatch.setenv("HF_TOKEN", ENV_TOKEN)
    token_file = tmp_path / "hf" / "token"
    token_file.parent.mkdir()
    token_file.write_text(SAVED)
    monkeypatch.setattr(secrets, "_saved_token_paths", lambda: (token_file, tmp_path / "hf" / "stored_tokens"))

    def load_dataset_builder(*args, **kwargs):
        raise _echoing_error()

    # a prompt config's rows load through `datasets.load_dataset`'s own first step (runners.prompts._load), a
    # results config's through `load_dataset` (analysis.load)
    monkeypatch.setattr(datasets, "load_dataset_builder", load_dataset_builder)
    monkeypatch.setattr(datasets, "load_dataset", load_dataset_builder)
    # the revision resolves (offline here) and the manifest and card are read; the rows' load fails
    monkeypatch.setattr(remote, "resolve", lambda repo, revision, what="": remote.HubRef(repo, revision, "0" * 40))
    monkeypatch.setattr(remote, "read_build_manifest", lambda ref, what="": None)
    monkeypatch.setattr(remote, "read_json_file", lambda ref, name, what="": None)
    monkeypatch.setattr(remote, "read_card_header", lambda ref, what="": {"configs": [{"config_name": "single_actor"}]})


def _assert_clean(text: str) -> None:
    for secret in (ENV_TOKEN, ECHOED, SAVED, "Z" * 20):
        assert secret not in text, text
    assert "***" in text, text


def _error_line(result) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", result.output)
    assert result.exit_code == 1 and "Traceback" not in text, text
    lines = [line for line in text.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, text
    return lines[0]


def test_run_error_from_a_hub_dataset_is_scrubbed(leaky_hub, tmp_path):
    args = ["run", "org/probes", "--config", "single_actor", "--model", "org/model", "--out", str(tmp_path / "r")]
    line = _error_line(runner.invoke(app, [*args, "--quiet"]))
    assert "org/probes" in line and "500 Server Error" in line
    _assert_clean(line)


def test_an_error_resolving_a_hub_revision_is_scrubbed(monkeypatch, tmp_path):
    """The Hub's answer to the revision lookup (`promptgen.hub.remote.resolve`) echoing the request."""
    from huggingface_hub import HfApi, constants

    monkeypatch.setenv("HF_TOKEN", ENV_TOKEN)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

    def dataset_info(self, repo_id, **kwargs):
        raise _echoing_error(OSError)  # a connection error whose text echoes the request

    monkeypatch.setattr(HfApi, "dataset_info", dataset_info)
    args = ["run", "org/probes", "--config", "single_actor", "--model", "org/model", "--out", str(tmp_path / "r")]
    line = _error_line(runner.invoke(app, [*args, "--quiet"]))
    assert "cannot resolve prompt dataset org/probes at revision 'main'" in line and "500 Server Error" in line
    _assert_clean(line)


def test_analyze_error_from_hub_prompts_is_scrubbed(leaky_hub, tmp_path):
    args = ["analyze", "--prompts", "org/probes", "--results", "org/results", "--out", str(tmp_path / "rep")]
    line = _error_line(runner.invoke(app, [*args, "--config", "single_actor", "--no-figures"]))
    assert "500 Server Error" in line
    _assert_clean(line)
    assert not (tmp_path / "rep").exists()


def test_warnings_printed_by_the_cli_are_scrubbed(leaky_hub, capsys):
    cli._warn(f"retrying after: Authorization: Bearer {ECHOED} ({ENV_TOKEN})")
    _assert_clean(capsys.readouterr().err)


def test_a_bugs_traceback_is_scrubbed(leaky_hub, monkeypatch, tmp_path, capsys):
    """An error no command expects keeps its traceback (a bug report needs it), with the secrets masked."""

    def load_dataset_builder(*args, **kwargs):
        raise _echoing_error(RuntimeError)

    monkeypatch.setattr(datasets, "load_dataset_builder", load_dataset_builder)
    args = ["run", "org/probes", "--config", "single_actor", "--model", "org/model", "--out", str(tmp_path / "r")]
    monkeypatch.setattr(sys, "argv", ["probes", *args, "--quiet"])
    # an earlier vLLM test in this process would make entry() end the process with os._exit
    monkeypatch.setitem(cli._ENGINE_THREADS, "started", False)
    with pytest.raises(SystemExit) as info:
        cli.entry()
    assert info.value.code == 1
    text = capsys.readouterr().err
    assert "Traceback (most recent call last)" in text and "RuntimeError: 500 Server Error" in text
    _assert_clean(text)


def test_scrub_masks_header_values_and_saved_tokens(leaky_hub):
    text = "Authorization: token abc.def\r\nauthorization='Basic dXNlcjpw' " + ENV_TOKEN + " " + SAVED
    assert secrets.scrub(text) == "Authorization: token ***\r\nauthorization='Basic ***' *** ***"
    # words are left alone: only credentials after the markers are masked
    assert secrets.scrub("the token count is 12; hf_x is short") == "the token count is 12; hf_x is short"


def test_python_warnings_are_scrubbed_once_the_cli_started(leaky_hub, monkeypatch, capsys):
    """A library's `warnings.warn` quoting a Hub response goes around both the console and logging."""
    import warnings

    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)  # restored after the test
    secrets.install_log_scrubber()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn(f"retrying: 401 for Authorization: Bearer {ENV_TOKEN}", UserWarning, stacklevel=1)
    text = capsys.readouterr().err
    assert "UserWarning: retrying: 401" in text
    _assert_clean(text)


def test_a_model_servers_key_is_masked_like_a_hub_token(monkeypatch):
    """`--backend openai` reads its key from OPENAI_API_KEY or the variable `--api-key-env` names: both are masked,
    and so is anything shaped like an OpenAI secret key, whoever's it is."""
    monkeypatch.setenv("OPENAI_API_KEY", "server-key-plain-123")
    monkeypatch.setenv("LAB_SERVER_KEY", "lab-key-plain-456")
    text = "401 for server-key-plain-123; lab-key-plain-456; other sk-proj-" + "a1B2" * 8
    assert "lab-key-plain-456" in secrets.scrub(text)  # not watched yet: a run has not named it
    monkeypatch.setattr(secrets, "_WATCHED_ENV_VARS", list(secrets._WATCHED_ENV_VARS))
    secrets.watch_secret_env("LAB_SERVER_KEY")
    assert secrets.scrub(text) == "401 for ***; ***; other sk-***"
    assert secrets.scrub("risk-free sk-short") == "risk-free sk-short"  # words and short ids stay


def test_a_secret_split_by_invisible_characters_is_masked_whole():
    """A zero-width space or a directional mark inside a token hid its tail from the scrubber: printed, it read as
    the whole token to a person (and the terminal showed no gap)."""
    token, key = "hf_" + "Xy7" * 11, "sk-proj-" + "Qq4_" * 8
    text = f"echo {token[:8]}\u200b{token[8:]} and {key[:12]}\u200e{key[12:]}; plain \u2066words\u2069"
    assert secrets.scrub(text, []) == "echo hf_*** and sk-***; plain words"
