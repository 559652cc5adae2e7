"""Benchmark: time and peak RSS of building `intergroup-empathy` (37.3 M prompt rows at full size).

It builds from the authors' released narratives (`--sources DIR`, default `../shared/sources`,
which must hold `intergroup-empathy-release/data/`), the recipe's own source. Where a machine has
none, `--synthetic` writes stand-in files in the release's format with the published counts
(6,050 events: 550 per emotion, 275 for guilt and shame; texts of realistic length):

    python benchmarks/attribution_build.py ...                                   # the other build
    python benchmarks/empathy_build.py --out bench-empathy.json                  # full 37.3 M rows
    python benchmarks/empathy_build.py --max-events 605 --out bench-sub.json     # 10% subset, extrapolated
    python benchmarks/empathy_build.py --keep --work-dir /tmp --out b.json       # keep it for a check

Targets (issue #6): full build <= 15 minutes and <= 2 GiB peak RSS on a 2-core machine.
With --max-events the JSON also extrapolates linearly to 6,050 events (rows scale linearly).
"""

from __future__ import annotations

import argparse
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

from promptgen.empathy.release import RELEASE_EMOTIONS
from promptgen.empathy.synthetic import narrative_row, write_release_rows, write_synthetic_recipe

REPO = Path(__file__).resolve().parents[1]

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


def write_corpus(root: Path, seed: int = 0) -> int:
    """Synthetic release files under the `--sources` folder `root`, with the published counts."""
    rng = random.Random(seed)
    rows: dict[str, list[list[str]]] = {}
    n = 0
    for emotion in RELEASE_EMOTIONS:
        rows[emotion] = []
        for _ in range(275 if emotion in ("guilt", "shame") else 550):
            n += 1
            opener = rng.choice(("when I", "because", "I felt it when", ""))
            text = " ".join([opener, *rng.choices(WORDS, k=rng.randint(8, 30))]).strip() + "."
            rows[emotion].append(narrative_row(f"gen{n:05d}", emotion, text))
    write_release_rows(root, rows)
    write_synthetic_recipe(root)
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--max-events", type=int, default=None, help="build a stratified subset of N events")
    parser.add_argument("--work-dir", type=Path, default=None, help="where to write the dataset (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the built dataset")
    parser.add_argument("--sources", type=Path, default=REPO.parent / "shared" / "sources", help="sources folder")
    parser.add_argument("--synthetic", action="store_true", help="build from synthetic release files instead")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="empathy-bench-", dir=args.work_dir))
    try:
        if args.synthetic:
            sources, n_events, corpus = work / "src", write_corpus(work / "src"), "synthetic, published counts"
        else:
            sources, n_events, corpus = args.sources, 6050, "the authors' release (intergroup-empathy-release)"
        cmd = [
            sys.executable,
            "-m",
            "probes.cli",
            "build",
            str(sources / "recipe.yaml") if args.synthetic else "intergroup-empathy",
            "--sources",
            str(sources),
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
            "corpus": corpus,
            "dataset": folder.name if args.keep else None,
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
