"""A results folder's keys are the runs recorded (issue #51: finding 2 and item 7).

- A key folder whose parts no finished run recorded (a run killed with -9, or stopped on an
  error) is marked unfinished in the manifest and the card, and `probes publish` refuses it,
  naming the folder and how to finish or remove it: its rows have no prompt dataset,
  fingerprint or finish time, so nothing says which build they were scored on.
- A prompt build without a fingerprint is named by its data files (the sha256 of each, as its
  build_manifest.json lists and `probes run` checks them): two such builds with other data
  into one `--out` are refused at run time, like two fingerprinted builds; the same data,
  wherever its folder is, is the same build.

The model is served by the scripted OpenAI server (`openai_fake_server`): no weights to load.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from openai_fake_server import MODEL, FakeServer
from probes.cli import app
from runners import results as res
from runners_fixtures import load_folder, number_items, require_extra, write_prompt_folder

#: POSTs the fake server answers before it hangs: the fingerprint's, then two per number item; so the
#: killed run below writes its first part (3 items, `--flush-every 3`) and then waits for an answer
ANSWERED = 1 + 2 * 3


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The openai extra, and no real Hub login for the publish dry runs."""
    require_extra("openai")
    import huggingface_hub.constants as constants

    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "no-stored-tokens"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


def _run_args(server: FakeServer, prompts: Path, out: Path, *extra: str) -> list[str]:
    args = ["run", str(prompts), "-c", "items", "-m", MODEL, "--backend", "openai", "--base-url", server.url]
    return [*args, "--tokenizer", str(load_folder()), "--out", str(out), "--no-chat", "-q", *extra]


def _invoke(args: list[str]) -> Any:
    return CliRunner().invoke(app, args, terminal_width=400)


def _publish(out: Path) -> Any:
    return _invoke(["publish", str(out), "--repo-id", "org/x", "--dry-run"])


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _kill_after_first_part(args: list[str], out: Path, tmp: Path) -> Path:
    """Start `probes run` in a subprocess, SIGKILL it once its first part is written; its key folder."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_CACHE": str(tmp / "hf-datasets")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "probes.cli", *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline and not list(out.glob("data/items/*/part-*.parquet")):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, f"the run ended before it could be killed: {err.decode()[-2000:]}"
    (folder,) = (p.parent for p in out.glob("data/items/*/part-*.parquet"))
    assert len(res.read_key_rows(folder)) == 3 and not (out / res.MANIFEST_NAME).exists()
    return folder


@pytest.mark.slow  # a real `probes run` subprocess killed with SIGKILL, then resumed: ~30 s on 2 cores
def test_a_killed_runs_key_is_unfinished_and_refused_by_publish_until_the_same_command_finishes_it(
    tmp_path: Path,
) -> None:
    """Finding 2: the parts of a run killed with -9 never passed as a finished run of some prompt build."""
    prompts = write_prompt_folder(tmp_path / "prompts", number_items(12))
    rebuilt = number_items(12)
    for item in rebuilt:  # another build of the config: the same ids, other prompts
        item["prompt"] = item["prompt"].replace("coins", "tokens")
    other_build = write_prompt_folder(tmp_path / "rebuilt", rebuilt)
    out = tmp_path / "RK"
    with FakeServer([None] * ANSWERED + ["hang"] * 100) as server:
        killed_args = _run_args(server, prompts, out, "--limit", "12", "--flush-every", "3", "--batch-size", "1")
        killed = _kill_after_first_part(killed_args, out, tmp_path)
        with server.lock:
            server.script.clear()  # the server answers again (the hung request died with its client)
        rel = killed.relative_to(out).as_posix()

        # the repro: a finished run of another key, on another build, into the same folder
        mixed = shutil.copytree(out, tmp_path / "RK2")
        done = _invoke(_run_args(server, other_build, mixed, "--limit", "6", "--number-tolerance", "0.5"))
        assert done.exit_code == 0, done.output
        refused = _publish(mixed)
        text = _one_line(refused.output)
        assert refused.exit_code == 1 and "Traceback" not in text, text
        assert f"{rel}: no finished run recorded" in text and "Nothing was uploaded" in text
        assert "rerun the same `probes run` command" in text and f"delete {mixed / rel}" in text

        # the same build, another key: the killed key stays unfinished in the manifest and the card
        done = _invoke(_run_args(server, prompts, out, "--limit", "6", "--number-tolerance", "0.5"))
        assert done.exit_code == 0, done.output
        manifest = json.loads((out / res.MANIFEST_NAME).read_text())
        finished = {key: entry["finished"] for key, entry in manifest["configs"]["items"].items()}
        assert finished == {killed.name: False, next(k for k in finished if k != killed.name): True}
        card = (out / res.CARD_NAME).read_text()
        assert f"`{killed.name}` (unfinished: no finished run recorded)" in card
        refused = _publish(out)
        assert refused.exit_code == 1 and f"{rel}: no finished run recorded" in _one_line(refused.output)

        # the killed command again: it resumes (the 3 rows written are kept) and finishes the key
        again = _invoke(killed_args)
        assert again.exit_code == 0 and "9 items scored (3 already done)" in again.output, again.output
    manifest = json.loads((out / res.MANIFEST_NAME).read_text())
    assert {entry["finished"] for entry in manifest["configs"]["items"].values()} == {True}
    assert "unfinished" not in (out / res.CARD_NAME).read_text()
    accepted = _publish(out)
    assert accepted.exit_code == 0, accepted.output


def _without_fingerprint(folder: Path) -> Path:
    """The build with its build_manifest.json's `fingerprint` taken out (a hand-made or foreign build)."""
    path = folder / "build_manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["fingerprint"]
    path.write_text(json.dumps(manifest, indent=2))
    return folder


def test_two_builds_without_a_fingerprint_are_two_builds(tmp_path: Path) -> None:
    """Item 7: a build without a fingerprint is named by its data files, not let through as unknown."""
    first = _without_fingerprint(write_prompt_folder(tmp_path / "a", number_items(4)))
    changed = number_items(4)
    changed[1]["prompt"] = changed[1]["prompt"].replace("coins", "tokens")
    second = _without_fingerprint(write_prompt_folder(tmp_path / "b", changed))
    copy = shutil.copytree(first, tmp_path / "elsewhere" / "renamed")  # the same data under another path
    out = tmp_path / "results"
    with FakeServer() as server:
        done = _invoke(_run_args(server, first, out))
        assert done.exit_code == 0, done.output
        refused = _invoke(_run_args(server, second, out))
        text = _one_line(refused.output)
        assert refused.exit_code == 1 and "holds rows scored on another build of its prompts" in text, text
        assert "Traceback" not in text
        again = _invoke(_run_args(server, copy, out, "--number-tolerance", "0.5"))  # the same build: accepted
        assert again.exit_code == 0, again.output
    runs = json.loads((out / res.MANIFEST_NAME).read_text())["runs"].values()
    identities = {r["prompt_dataset"]["data_sha256"] for r in runs}
    assert len(identities) == 1 and None not in identities
    assert all(str(tmp_path) not in json.dumps(r["prompt_dataset"]) for r in runs)


def test_a_run_recorded_without_a_build_identity_is_the_same_as_no_other(tmp_path: Path) -> None:
    """A run an older runner recorded from a fingerprint-less build names no build: beside any other run of its
    config it is a second build, refused at run time and by publish, never skipped as if it matched."""
    from promptgen.core.errors import ProbeError
    from runners.results.check import check_same_prompts, mixed_prompts

    unknown = {"prompt_dataset": {"name": "tiny", "config": "items", "fingerprint": None}, "key": "k1"}
    res.update_manifest(tmp_path, "items/k1/shard-0of1", unknown)
    manifest = res.read_manifest(tmp_path)
    assert mixed_prompts(manifest) == []  # one run: one build, whatever it is
    mine = {"name": "tiny", "config": "items", "data_sha256": "ab" * 32}
    with pytest.raises(ProbeError, match=r"another build of its prompts \(a build of unrecorded identity; this run's: "
                       r"data files abababababab\)"):  # fmt: skip
        check_same_prompts(tmp_path, mine)
    check_same_prompts(tmp_path, {**mine, "config": "other"})  # another config: its own build
    known = {"prompt_dataset": mine, "key": "k2"}
    (problem,) = mixed_prompts(res.update_manifest(tmp_path, "items/k2/shard-0of1", known))
    assert problem.startswith("config 'items' holds rows scored on 2 prompt builds (a build of unrecorded identity")
