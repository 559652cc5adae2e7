"""Benchmark: what a vLLM engine's start costs with its engine core in a process of its own (vLLM's
default) and in the caller's process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, what tests/conftest.py sets).

    python benchmarks/vllm_engine_start.py --out benchmarks/results/vllm_engine_start_cpu2.json

Each trial is a fresh child Python (cold, as a test's `probes run` is): it imports the project's vLLM
backend, starts an engine on SmolLM2-135M-Instruct (`runners.testmodel`, float32, eager), scores the
same 8 number items (0-10, as tests/runners/backends/test_vllm_backend.py) and closes. The modes
alternate, so a machine that slows down mid-run slows both. Reported per trial: the import, the
engine start (`VLLMBackend.from_pretrained`), the scoring and the child's whole wall time; and, to show
the two paths are the same engine, the largest difference between the modes' number probabilities
(expected: 0).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODES = {"spawned engine core (vLLM default)": None, "in-process engine core": "0"}

CHILD = r"""
import json, sys, time
start = time.perf_counter()
from runners.backends.vllm import backend as vllm_backend
from runners.backends.vllm.spec import VllmOptions
from runners.rows import run_items
from runners.testmodel import ensure_smollm2
from transformers import AutoTokenizer

folder = ensure_smollm2()[1]
imported = time.perf_counter()
backend = vllm_backend.VLLMBackend.from_pretrained(
    str(folder), VllmOptions(enforce_eager=True), dtype="float32", max_model_len=512
)
started = time.perf_counter()
items = []
for k in range(8):
    prompt = f"Question {k}: how many of 10 coins do you pass?\nAnswer: I pass $"
    items.append({"id": f"n{k}", "probe": "trust_game", "task": "number", "prompt": prompt,
                  "messages": [{"role": "user", "content": prompt}], "choices": None, "choice_labels": None,
                  "choice_types": None, "number_min": 0, "number_max": 10})
rows = run_items(items, backend, AutoTokenizer.from_pretrained(folder), chat=False)
scored = time.perf_counter()
backend.close()
print(json.dumps({
    "import_s": round(imported - start, 2),
    "engine_start_s": round(started - imported, 2),
    "scoring_s": round(scored - started, 2),
    "probs": {r["id"]: r["number_probs"] for r in rows},
}))
"""


def trial(mode: str | None) -> dict[str, Any]:
    """One cold child process in `mode` (the variable's value, or unset)."""
    env = {k: v for k, v in os.environ.items() if k != "VLLM_ENABLE_V1_MULTIPROCESSING"}
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    if mode is not None:
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = mode
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=900)
    wall = round(time.perf_counter() - start, 2)
    if proc.returncode != 0:
        raise SystemExit(f"child failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall_s"] = wall
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=2, help="trials per mode (alternating)")
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    args = parser.parse_args()
    trials: dict[str, list[dict[str, Any]]] = {name: [] for name in MODES}
    for _ in range(args.repeats):
        for name, mode in MODES.items():
            trials[name].append(trial(mode))
            print(name, {k: v for k, v in trials[name][-1].items() if k != "probs"}, flush=True)
    first = [t[0]["probs"] for t in trials.values()]
    gap = max(abs(a - b) for i in first[0] for a, b in zip(first[0][i], first[1][i], strict=True))
    summary = {
        name: {
            key: round(sum(t[key] for t in ts) / len(ts), 2)
            for key in ("import_s", "engine_start_s", "scoring_s", "wall_s")
        }
        for name, ts in trials.items()
    }
    report = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "model": "SmolLM2-135M-Instruct, float32, enforce_eager, max_model_len 512",
        "repeats": args.repeats,
        "mean": summary,
        "max_abs_number_prob_difference_between_modes": gap,
        "trials": {name: [{k: v for k, v in t.items() if k != "probs"} for t in ts] for name, ts in trials.items()},
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report["mean"], indent=2), "max prob difference", gap)


if __name__ == "__main__":
    main()
