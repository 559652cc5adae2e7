"""Benchmark: wall time and peak RSS of building the default talent-or-luck dataset.

Runs `probes build` in a child process (so the RSS is the build's alone) and writes JSON:

    python benchmarks/attribution_build.py --sources ../shared/sources --out bench-build.json

Targets (issue #2): under 2 minutes and under 2 GiB peak RSS on a 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sources", type=Path, required=True, help="folder with the talent-or-luck sources")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--recipe", default="talent-or-luck", help="recipe name or path")
    parser.add_argument("--full", action="store_true", help="build the full cross product instead")
    parser.add_argument("--repeat", type=int, default=3, help="builds to time (the best and all are reported)")
    args = parser.parse_args()

    runs = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [
                sys.executable,
                "-m",
                "probes.cli",
                "build",
                args.recipe,
                "--sources",
                str(args.sources),
                "--out",
                tmp,
                "-q",
            ] + (["--full"] if args.full else [])
            start = time.perf_counter()
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            subprocess.run(cmd, check=True)
            wall = time.perf_counter() - start
            peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            manifest = json.loads(next(Path(tmp).glob("*/build_manifest.json")).read_text())
            runs.append(
                {
                    "wall_s": round(wall, 3),
                    # ru_maxrss of children is the max over all children so far; report it per run
                    "peak_rss_mib": round(max(peak_kib, before) / 1024, 1),
                    "rows": manifest["rows"],
                    "fingerprint": manifest["fingerprint"],
                }
            )
    result = {
        "benchmark": "attribution_build",
        "recipe": args.recipe,
        "full": args.full,
        "best_wall_s": min(r["wall_s"] for r in runs),
        "max_peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
        "total_rows": sum(runs[0]["rows"].values()),
        "rows_per_s": round(sum(runs[0]["rows"].values()) / min(r["wall_s"] for r in runs)),
        "same_fingerprint_every_run": len({r["fingerprint"] for r in runs}) == 1,
        "targets": {"wall_s": 120, "peak_rss_mib": 2048},
        "runs": runs,
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
        },
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=2))


if __name__ == "__main__":
    main()
