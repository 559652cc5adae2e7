"""The DESIGN 8b GPU benchmark script, checked on the CPU with its tiny shape.

No GPU is lent to CI, so the script's two steps run here end to end on a two-layer model of
the Llama family: `prepare` tokenises real single-actor items with the project's routine,
`measure` times the hf backend over a budget sweep and compares its log-probabilities with
full forward passes. The figures are meaningless on a CPU; what is checked is that the
script runs, that its JSON has the fields the closing notes quote, and that the scorer it
times agrees with an independent full forward pass.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runners_fixtures import load_folder

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_scoring.py"


def _run(*args: str) -> str:
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.slow
def test_prepare_then_measure_on_the_cpu(built_default: Path, tmp_path: Path) -> None:
    requests = tmp_path / "requests.json"
    folder = load_folder()
    _run(
        "prepare", "--prompts", str(built_default), "--tokenizer", str(folder), "--items", "12", "--out", str(requests)
    )
    payload = json.loads(requests.read_text())
    assert len(payload["requests"]) == 12
    assert all(len(r["continuations"]) == 4 and r["context"] for r in payload["requests"])

    out = tmp_path / "gpu_scoring.json"
    stdout = _run(
        "measure",
        *("--requests", str(requests), "--out", str(out), "--shape", "tiny", "--device", "cpu"),
        *("--dtype", "float32", "--max-batch-tokens", "100000,256", "--batch-items", "5", "--warmup", "2"),
        *("--ceiling-batch-sizes", "4", "--check-items", "12"),
    )
    result = json.loads(out.read_text())
    assert "items/s" in stdout and str(out) in stdout
    assert result["items"] == 12 and result["checked_items"] == 12
    assert set(result["hf"]["sweep"]) == {"100000", "256"}
    assert result["hf"]["best_max_batch_tokens"] in {100000, 256}
    # every item's prompt + four options, from the token ids `prepare` wrote
    tokens = sum(len(r["context"]) + sum(len(c) for c in r["continuations"]) for r in payload["requests"])
    assert abs(result["mean_tokens_per_item"] - tokens / 12) < 1e-9
    for rates in result["hf"]["sweep"].values():
        assert rates["items_per_s"] > 0 and abs(rates["tokens_per_s"] / rates["items_per_s"] - tokens / 12) < 1e-6
        assert rates["mfu_vs_spec_peak"] is None  # no peak is claimed for a CPU
    # the last budget (256 tokens: contexts and options split over many passes) against full forward passes
    assert result["max_abs_logprob_diff_vs_full_forward"] < 1e-4
    assert result["machine"]["device"] == "cpu" and result["model"]["config"]["num_hidden_layers"] == 2


def _peak(name: str) -> float | None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_scoring", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.peak_bf16_tflops(name)


def test_peak_table_tells_form_factors_apart_and_matches_whole_names() -> None:
    # names as torch.cuda.get_device_name reports them; dense bf16 figures of the NVIDIA data sheets
    assert _peak("NVIDIA H100 80GB HBM3") == 989.4  # SXM
    assert _peak("NVIDIA H100 PCIe") == 756.5
    assert _peak("NVIDIA H100 NVL") == 835.5
    assert _peak("NVIDIA H200") == 989.4 and _peak("NVIDIA GH200 480GB") == 989.4
    assert _peak("NVIDIA A100-SXM4-80GB") == _peak("NVIDIA A100 80GB PCIe") == 312.0
    assert _peak("NVIDIA L40S") == 362.05
    assert _peak("NVIDIA L40") == 181.05  # not the L4's figure
    assert _peak("NVIDIA L4") == 121.0
    assert _peak("NVIDIA RTX A6000") == 154.8
    assert _peak("NVIDIA A10G") == 70.0 and _peak("NVIDIA A10") == 125.0  # A10G is not the A10 (nor A100)
    assert _peak("NVIDIA GeForce RTX 4090") is None and _peak("Tesla T4") is None  # unknown: no MFU claimed
