"""Benchmark: the memory and time of `probes import --format empathy-authors` on a full config in the authors' layout.

    python benchmarks/import_memory.py --sources ../shared/sources --out benchmarks/results/import_memory_cpu2.json
    git archive BEFORE src cards builders | tar -x -C /tmp/before      # the importer to compare with
    python benchmarks/import_memory.py --prompts DIR/intergroup-empathy-race_P0S0T0 --before-src /tmp/before/src \\
        --out import.json
    python benchmarks/import_memory.py --sources ../shared/sources --max-events 2 --batch-rows 200 --out tiny.json

Builds one config of the intergroup-empathy dataset (`probes build intergroup-empathy --config
race_P0S0T0`, 2,184,050 prompts; or `--prompts`, a folder that build wrote), then writes the
authors' generation files for it as their `batch_pred_emotion.py` does (`vllm_inference`: rows
in their `idx` order, one TSV per batch of `limit = 6050 * 50` rows, `idx, system_prompt,
user_input, response`, `to_csv(sep='\\t', index=False)`; `ethnicity_origin_batch-<k>.tsv`), with
answers like a model's ("70", a sentence, a refusal, an empty answer). Then it runs, each in a
child process as a user runs it:

- `probes import FOLDER --format empathy-authors` of every file (the full config); with
  `--allocator-defaults`, again with mimalloc's own settings (`probes` sets Arrow's allocator to give
  freed memory back at once, `probes.cli.allocator`; this measures what that setting is worth);
- the same with one byte of the last row's system prompt changed (the last file): refused, in one line;
- with `--before-src` (a checkout's `src` of the importer before this change, its `cards` and
  `builders` beside it), the old importer on `--before-files` of the files (the largest first;
  default 1: the old one needs about 15 times the file in memory), and this one on the same.

and, for scale, a child that only loads the config (`runners.prompts.load_prompt_config`, what
every command that reads it does first). For each it records the peak resident memory
(`ru_maxrss` of the child, from `wait4`), the peaks of its anonymous and file-backed parts
(`/proc/<pid>/status`, polled every 50 ms), the wall time, and the peaks over the largest file.
Target (issue #69, finding 7): peak at most 3 times the largest file. The file-backed part is the
prompt config's Arrow files, which `datasets` memory-maps: the pages a command reads stay counted
in its resident memory until the kernel wants them back (page cache, dropped without a write);
the anonymous part is the memory the command holds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

CONFIG = "race_P0S0T0"
#: their `vllm_inference(..., limit=6050*50)`: the rows of one batch file
BATCH_ROWS = 6050 * 50
MODEL = "bench/llama-like"
TARGET_RATIO = 3.0
#: mimalloc's own settings in pyarrow 26 (what `MIMALLOC_VERBOSE=1` prints), which `probes` overrides
#: (`probes.cli.allocator`); `--allocator-defaults` runs the full import with these too
MIMALLOC_DEFAULTS = {"MIMALLOC_PURGE_DELAY": "1000", "MIMALLOC_ARENA_EAGER_COMMIT": "2"}
#: answers as a chat model gives them, cycled over the rows
ANSWERS = [
    "70",
    "On a scale from 0 to 100, I would rate the intensity of the emotion at 70.",
    "I cannot rate the emotions of a person based on their race or ethnicity.",
    "85",
    "",
    "60\n\nThe narrator seems to have felt it strongly, but not overwhelmingly.",
    "Emotion intensity: 40",
    "I'd say 75.",
]


def build_prompts(sources: Path, work: Path, config: str, max_events: int | None) -> Path:
    """`probes build intergroup-empathy --config CONFIG` into `work` (with `--max-events`, a smaller build)."""
    args = ["build", "intergroup-empathy", "--config", config, "--sources", str(sources), "--out", str(work), "-q"]
    if max_events is not None:
        args += ["--max-events", str(max_events)]
    subprocess.run([_probes(), *args], check=True)
    (built,) = (p for p in work.iterdir() if p.is_dir() and p.name.startswith("intergroup-empathy"))
    return built


def _probes() -> str:
    return str(Path(sys.executable).with_name("probes"))


def write_authors_files(prompts: Path, config: str, folder: Path, batch_rows: int) -> list[Path]:
    """Their files for `config`: rows in `idx` order, `batch_rows` per file, streamed from the config's parquet."""
    from promptgen.empathy.prompts import AUTHORS_GROUPS, AUTHORS_VARIATIONS

    category, setting = config.split("_")
    group = next(g for g, c in AUTHORS_GROUPS.items() if c == category)
    variation = next(v for v, s in AUTHORS_VARIATIONS.items() if s == setting)
    folder.mkdir(parents=True, exist_ok=True)
    files: list[Path] = []
    written, last = 0, -1
    for path in sorted((prompts / "data" / config).glob("*.parquet")):
        for batch in pq.ParquetFile(path).iter_batches(batch_size=20_000, columns=["authors_index", "messages"]):
            idx = batch.column("authors_index").to_numpy()
            if len(idx) and (idx[0] <= last or (idx[1:] <= idx[:-1]).any()):
                raise SystemExit(f"{path}: the prompts are not in the authors' idx order")
            last = int(idx[-1]) if len(idx) else last
            messages = batch.column("messages").to_pylist()
            frame = pd.DataFrame(
                {
                    "idx": idx,
                    "system_prompt": [m[0]["content"] for m in messages],
                    "user_input": [m[1]["content"] for m in messages],
                    "response": [ANSWERS[(written + k) % len(ANSWERS)] for k in range(len(idx))],
                }
            )
            start = 0
            while start < len(frame):
                k, at = divmod(written, batch_rows)
                take = min(batch_rows - at, len(frame) - start)
                target = folder / f"{group}_{variation}_batch-{k}.tsv"
                if at == 0:
                    files.append(target)
                part = frame.iloc[start : start + take]
                part.to_csv(target, sep="\t", index=False, mode="w" if at == 0 else "a", header=at == 0)
                start += take
                written += take
    return files


def spoil(folder: Path, dest: Path) -> str:
    """`folder`'s files in `dest` (hard links), the last with one byte of its last system prompt changed."""
    dest.mkdir(parents=True, exist_ok=True)
    files = sorted(folder.glob("*.tsv"), key=lambda p: int(p.stem.rpartition("-")[2]))
    for path in files[:-1]:
        os.link(path, dest / path.name)
    data = bytearray(files[-1].read_bytes())
    at = data.rfind(b"You are ") + len("You ")  # their system prompt: `You are {perceiver}.` and the scale
    data[at] = ord("A")  # `You Are`
    (dest / files[-1].name).write_bytes(bytes(data))
    return files[-1].name


def measure(cmd: list[str], env: dict[str, str], log: Path) -> dict[str, Any]:
    """Run `cmd`; its exit code, wall time, peak RSS (`wait4`'s `ru_maxrss`) and polled anonymous / file peaks."""
    peaks = {"RssAnon": 0, "RssFile": 0, "VmRSS": 0}
    start = time.perf_counter()
    with log.open("w") as sink:
        child = subprocess.Popen(cmd, env=env, stdout=sink, stderr=subprocess.STDOUT)
        stop = threading.Event()

        def poll() -> None:
            status = Path(f"/proc/{child.pid}/status")
            while not stop.is_set():
                try:
                    for line in status.read_text().splitlines():
                        name, _, value = line.partition(":")
                        if name in peaks:
                            peaks[name] = max(peaks[name], int(value.split()[0]))
                except (OSError, ValueError, IndexError):
                    pass
                stop.wait(0.05)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        _, status, usage = os.wait4(child.pid, 0)  # reaped here, so its rusage is its own
        stop.set()
        poller.join()
    wall = time.perf_counter() - start
    output = log.read_text()
    lines = [line for line in output.splitlines() if line.strip() and "Generating test split" not in line]
    return {
        "exit_code": os.waitstatus_to_exitcode(status),
        "wall_s": round(wall, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "peak_anon_mb": round(peaks["RssAnon"] / 1024, 1),
        "peak_file_mb": round(peaks["RssFile"] / 1024, 1),
        "last_line": (lines[-1] if lines else "").replace(str(log.parent), "<work>")[:400],
    }


def run_import(
    name: str,
    folder: Path,
    prompts: Path,
    work: Path,
    largest: int,
    src: Path | None = None,
    extra_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """`probes import` of `folder` in a child (this checkout's, or the one in `src`; `extra_env` added to its
    environment), measured."""
    out = work / f"results-{name}"
    shutil.rmtree(out, ignore_errors=True)
    cache = work / f"hf-{name}"
    env = {**os.environ, "HF_DATASETS_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env.update(extra_env or {})
    args = ["import", str(folder), "--format", "empathy-authors", "--prompts", str(prompts)]
    args += ["--model-name", MODEL, "--out", str(out)]
    if src is None:
        cmd = [_probes(), *args]
    else:
        env["PYTHONPATH"] = str(src.resolve())
        cmd = [sys.executable, "-c", "import sys; from probes.cli import entry; sys.argv[0] = 'probes'; entry()", *args]
    result = measure(cmd, env, work / f"{name}.log")
    _ratios(result, largest)
    result["out_written"] = out.exists()
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    return result


def _ratios(result: dict[str, Any], largest: int) -> None:
    result["ratio_to_largest_file"] = round(result["peak_rss_mb"] * 2**20 / largest, 2)
    result["anon_ratio_to_largest_file"] = round(result["peak_anon_mb"] * 2**20 / largest, 2)


def load_only(prompts: Path, config: str, work: Path, largest: int) -> dict[str, Any]:
    """A child that only loads `config` of `prompts`, measured: the floor of any command that reads it."""
    cache = work / "hf-load"
    env = {**os.environ, "HF_DATASETS_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    # as a command does: `probes.cli` first (it sets Arrow's allocator), then the config
    code = "import sys, probes.cli; from runners.prompts import load_prompt_config as load; load(*sys.argv[1:3])"
    result = measure([sys.executable, "-c", code, str(prompts), config], env, work / "load.log")
    _ratios(result, largest)
    shutil.rmtree(cache, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--sources", type=Path, default=Path("../shared/sources"), help="the released sources")
    parser.add_argument("--prompts", type=Path, help="a built intergroup-empathy folder holding --config")
    parser.add_argument("--config", default=CONFIG)
    parser.add_argument("--max-events", type=int, help="build from N events (a small check of the script)")
    parser.add_argument("--batch-rows", type=int, default=BATCH_ROWS, help="rows per file (theirs: 6050 * 50)")
    parser.add_argument("--before-src", type=Path, help="`src` of the importer to compare with")
    parser.add_argument("--before-files", type=int, default=1, help="files the old importer is measured on")
    parser.add_argument(
        "--allocator-defaults", action="store_true", help="the full import with mimalloc's defaults too"
    )
    parser.add_argument("--work-dir", type=Path, help="keep the files here (default: a temporary folder)")
    opts = parser.parse_args()
    work = opts.work_dir or Path(tempfile.mkdtemp(prefix="import-memory-"))
    work.mkdir(parents=True, exist_ok=True)
    prompts = opts.prompts or build_prompts(opts.sources, work / "datasets", opts.config, opts.max_events)
    authors = work / "exp"
    if not authors.is_dir():
        write_authors_files(prompts, opts.config, authors, opts.batch_rows)
    files = sorted(authors.glob("*.tsv"))
    sizes = {p.name: p.stat().st_size for p in files}
    rows = sum(pq.read_metadata(p).num_rows for p in (prompts / "data" / opts.config).glob("*.parquet"))
    largest = max(sizes.values())
    runs: dict[str, Any] = {"load_only": load_only(prompts, opts.config, work, largest)}
    runs["full"] = run_import("full", authors, prompts, work, largest)
    if opts.allocator_defaults:
        runs["full_allocator_defaults"] = {
            "env": MIMALLOC_DEFAULTS,
            **run_import("defaults", authors, prompts, work, largest, extra_env=MIMALLOC_DEFAULTS),
        }
    bad = work / "exp-bad"
    shutil.rmtree(bad, ignore_errors=True)
    spoiled = spoil(authors, bad)
    runs["bad_file"] = {"spoiled": spoiled, **run_import("bad", bad, prompts, work, largest)}
    shutil.rmtree(bad, ignore_errors=True)
    if opts.before_src is not None:
        some = work / "exp-some"
        shutil.rmtree(some, ignore_errors=True)
        some.mkdir()
        chosen = sorted(files, key=lambda p: -sizes[p.name])[: opts.before_files]
        for path in chosen:
            os.link(path, some / path.name)
        biggest = max(sizes[p.name] for p in chosen)
        label = f"{len(chosen)} file(s), {sum(sizes[p.name] for p in chosen):,} bytes"
        runs["some_before"] = {"files": label, **run_import("before", some, prompts, work, biggest, opts.before_src)}
        runs["some_after"] = {"files": label, **run_import("after", some, prompts, work, biggest)}
        shutil.rmtree(some, ignore_errors=True)
    report = {
        "benchmark": "import_memory",
        "config": opts.config,
        "prompt_rows": rows,
        "files": len(files),
        "rows_per_file": opts.batch_rows,
        "largest_file_bytes": largest,
        "total_bytes": sum(sizes.values()),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "target": {"peak_over_largest_file": TARGET_RATIO},
        "allocator": {k: os.environ.get(k, "unset: probes.cli sets it") for k in MIMALLOC_DEFAULTS},
        "runs": runs,
        "done": runs["full"]["exit_code"] == 0
        and runs["bad_file"]["exit_code"] != 0
        and not runs["bad_file"]["out_written"],
        "met_anon": all(runs[k]["anon_ratio_to_largest_file"] <= TARGET_RATIO for k in ("full", "bad_file")),
        "met_rss": all(runs[k]["ratio_to_largest_file"] <= TARGET_RATIO for k in ("full", "bad_file")),
    }
    opts.out.parent.mkdir(parents=True, exist_ok=True)
    opts.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=1))
    if opts.work_dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
