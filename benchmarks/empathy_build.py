"""Benchmark: time and peak RSS of building `intergroup-empathy` (37.3 M prompt rows at full size).

The real crowd-enVent corpus is not available on every machine, so the benchmark writes a
synthetic corpus in its TSV format with the published counts (6,050 events: 550 per
emotion, 275 for guilt and shame; texts of realistic length) and builds from it:

    python benchmarks/attribution_build.py ...                                   # the other build
    python benchmarks/empathy_build.py --out bench-empathy.json                  # full 37.3 M rows
    python benchmarks/empathy_build.py --max-events 605 --out bench-sub.json     # 10% subset, extrapolated

Targets (issue #6): full build <= 15 minutes and <= 2 GiB peak RSS on a 2-core machine.
With --max-events the JSON also extrapolates linearly to 6,050 events (rows scale linearly).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from promptgen.empathy.narratives import EMOTIONS

WORDS = (
    "my",
    "friend",
    "the",
    "job",
    "work",
    "family",
    "dog",
    "house",
    "car",
    "exam",
    "boss",
    "told",
    "me",
    "that",
    "we",
    "were",
    "going",
    "to",
    "lose",
    "everything",
    "after",
    "years",
    "of",
    "trying",
    "hard",
)


def write_corpus(path: Path, seed: int = 0) -> int:
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
        writer.writerow(["text_id", "emotion", "generated_text", "hidden_emo_text", "intensity"])
        for emotion in EMOTIONS:
            for _ in range(275 if emotion in ("guilt", "shame") else 550):
                n += 1
                opener = rng.choice(("when I", "because", "I felt it when", ""))
                text = " ".join([opener, *rng.choices(WORDS, k=rng.randint(8, 30))]).strip() + "."
                writer.writerow([f"gen{n:05d}", emotion, text, text, rng.randint(1, 5)])
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--max-events", type=int, default=None, help="build a stratified subset of N events")
    parser.add_argument("--work-dir", type=Path, default=None, help="where to write the dataset (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the built dataset")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="empathy-bench-", dir=args.work_dir))
    try:
        n_events = write_corpus(work / "src" / "crowd-envent" / "corpus" / "crowd-enVent_generation.tsv")
        cmd = [
            sys.executable,
            "-m",
            "probes.cli",
            "build",
            "intergroup-empathy",
            "--sources",
            str(work / "src"),
            "--out",
            str(work / "out"),
            "-q",
        ]
        if args.max_events:
            cmd += ["--max-events", str(args.max_events)]
        start = time.perf_counter()
        subprocess.run(cmd, check=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        wall = time.perf_counter() - start
        peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        folder = next(p for p in (work / "out").iterdir() if p.is_dir())
        manifest = json.loads((folder / "build_manifest.json").read_text())
        prompt_rows = manifest["build_report"]["prompt_rows"]
        disk = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        used = manifest["rows"]["events"]
        result = {
            "benchmark": "empathy_build",
            "events": used,
            "prompt_rows": prompt_rows,
            "wall_s": round(wall, 2),
            "rows_per_s": round(prompt_rows / wall),
            "peak_rss_mib": round(peak_mib, 1),
            "disk_bytes": disk,
            "full_design_rows": 881 * 6050 * 7,
            "extrapolated_full_wall_s": round(wall * 6050 / used, 1) if used != n_events else round(wall, 1),
            "extrapolated_full_disk_gib": round(disk * 6050 / used / 2**30, 2),
            "extrapolated": used != n_events,
            "targets": {"wall_s": 900, "peak_rss_mib": 2048},
            "corpus": "synthetic, published counts (6,050 events)",
            "machine": {
                "cpu_count": os.cpu_count(),
                "platform": platform.platform(),
                "python": platform.python_version(),
            },
        }
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
