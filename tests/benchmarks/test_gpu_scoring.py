"""The DESIGN 8b GPU benchmark script, checked on the CPU with its tiny shape.

No GPU is lent to CI, so the script's two steps run here end to end on a two-layer model of
the Llama family: `prepare` tokenises real single-actor items (or intergroup-empathy number
items built from the script's own synthetic corpus) with the project's routine, `measure`
times the hf backend over a budget sweep and compares its log-probabilities (number items:
their P(n)) with full forward passes. The figures are meaningless on a CPU; what is checked is that the
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


@pytest.mark.slow
def test_number_items_prepare_then_measure_on_the_cpu(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    from promptgen.build import build
    from runners.backends.hf.accounting import hf_token_counts
    from runners.exchange import ScoreRequest

    _run("corpus", "--out", str(tmp_path / "src"), "--events-per-emotion", "1")
    recipe = str(tmp_path / "src" / "recipe.yaml")  # the stand-in files' recipe (their sources unpinned)
    dataset = build(recipe, out_dir=tmp_path / "o", sources=tmp_path / "src", max_events=12).path
    folder = load_folder()
    requests = tmp_path / "requests.json"
    _run(
        "prepare",
        *("--task", "number", "--prompts", str(dataset), "--config", "religion_P0S0T0"),
        *("--tokenizer", str(folder), "--items", "6", "--out", str(requests)),
    )
    payload = json.loads(requests.read_text())
    assert payload["task"] == "number" and len(payload["requests"]) == 6
    tokenizer = AutoTokenizer.from_pretrained(folder)
    # the candidates are the tokens that continue a number: each decodes to text starting with a digit
    assert payload["candidates"] and all(tokenizer.decode([t])[:1].isdigit() for t in payload["candidates"])
    for record in payload["requests"]:
        forms = {int(n): fs for n, fs in record["paths"]}
        assert sorted(forms) == list(range(101))  # a 0-100 config: every number has a surface form
        assert all(tokenizer.decode(f).strip() == str(n) for n, fs in forms.items() for f in fs)
        # every form is sent: it is a leaf or a prefix of one
        leaves = [tuple(c) for c in record["continuations"]]
        assert all(any(leaf[: len(f)] == tuple(f) for leaf in leaves) for fs in forms.values() for f in fs)

    out = tmp_path / "gpu_number.json"
    stdout = _run(
        "measure",
        *("--requests", str(requests), "--out", str(out), "--shape", "tiny", "--device", "cpu"),
        *("--dtype", "float32", "--max-batch-tokens", "100000,64", "--batch-items", "4", "--warmup", "1"),
        *("--max-logit-rows", "400,64", "--ceiling-batch-sizes", "4", "--check-items", "3"),
    )
    result = json.loads(out.read_text())
    assert "items/s" in stdout and "max |dP(n)|" in stdout
    assert result["task"] == "number" and result["items"] == 6 and result["checked_items"] == 3
    assert result["number_ranges"] == [[0, 100]]
    # tokens per item: the context and one position per distinct prefix of the item's surface forms
    nodes = [
        len(record["context"])
        + len({tuple(f[:k]) for _, fs in record["paths"] for f in fs for k in range(1, len(f) + 1)})
        for record in payload["requests"]
    ]
    assert abs(result["mean_tokens_per_item"] - sum(nodes) / 6) < 1e-9
    scored = [
        ScoreRequest(tuple(r["context"]), tuple(tuple(c) for c in r["continuations"]), tuple(payload["candidates"]))
        for r in payload["requests"]
    ]
    # budgets x logit rows, each point keyed BUDGET/ROWS
    assert set(result["hf"]["sweep"]) == {"100000/400", "100000/64", "64/400", "64/64"}
    for key, rates in result["hf"]["sweep"].items():
        assert key == f"{rates['max_batch_tokens']}/{rates['max_logit_rows']}"
        assert rates["mfu_plan_terms"] is None  # no peak is claimed for a CPU
        # what the backend computed is what `probes plan` counts for these calls (4 items each)
        planned = hf_token_counts(scored, max_batch_tokens=rates["max_batch_tokens"], items_per_call=4)
        assert rates["computed_tokens"] == planned.computed_context_tokens + planned.continuation_positions
        assert rates["computed_tokens"] <= sum(nodes)
    # under a budget that holds a call's contexts, their shared prefix (persona, instructions) runs once
    assert result["hf"]["sweep"]["100000/64"]["computed_tokens"] < sum(nodes)
    # the last point (64 tokens, 64 logit rows: every context and trie in passes of its own) against one full
    # forward pass per surface form
    assert result["max_abs_prob_diff_vs_bruteforce"] < 1e-6
    assert result["max_abs_log_raw_prob_diff_vs_bruteforce"] < 1e-4


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
