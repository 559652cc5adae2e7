"""Benchmark: the empathy gap's structured permutation test on a race-sized matrix.

The test runs once per (model, category, setting), 10,000 row x column permutations each,
so it must stay fast: target under 5 s for a 19 x 19 matrix on a 2-core machine (issue #5).
Two timings, each the best of `--repeats` runs:

- `permutation_test`: a random 19 x 19 M with a four-block same-group mask, all 19 rows and
  columns permuted (the raw function, the largest case);
- `compute_gap`: the race matrix as the analysis runs it (19 x 19 M from the cells frame,
  `a person` left out, so 18 x 18 are permuted).

Both are run twice with the same seed to confirm the interval repeats exactly::

    python benchmarks/permutation_test.py --out bench-permutation.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.empathy.tables import compute_cells, compute_gap, permutation_test
from promptgen.empathy.prompts import identities


def race_cells(seed: int) -> pd.DataFrame:
    """Cells of a synthetic race matrix: 19 identities x 19, 5 events per cell, an in-group bump."""
    rng = np.random.default_rng(seed)
    people = identities("race")
    rows = []
    for p in people:
        for e in people:
            bump = 3.0 if (p.group == e.group and not p.unspecified) else 0.0
            for t in range(5):
                rows.append(
                    {
                        "category": "race",
                        "setting": "P0S0T0",
                        "perceiver": p.identity,
                        "experiencer": e.identity,
                        "text_id": f"ev{t}",
                        "intensity": float(rng.normal(50.0 + bump, 10.0)),
                    }
                )
    return compute_cells(pd.DataFrame(rows))


def best_of(repeats: int, fn) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--permutations", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    label = np.repeat(np.arange(4), [5, 5, 4, 5])
    same = label[:, None] == label[None, :]
    m = rng.normal(size=(19, 19)) + 0.3 * same

    def raw():
        return permutation_test(m, same, n_permutations=args.permutations, seed=args.seed)

    raw_s, first = best_of(args.repeats, raw)
    again = raw()
    cells = race_cells(args.seed)

    def gap():
        return compute_gap(cells, n_permutations=args.permutations, seed=args.seed)

    gap_s, table = best_of(args.repeats, gap)
    row = table.iloc[0]
    result = {
        "n_permutations": args.permutations,
        "seed": args.seed,
        "repeats": args.repeats,
        "target_seconds": 5.0,
        "permutation_test_19x19": {
            "seconds": raw_s,
            "delta": first.delta,
            "null_interval": [first.null_low, first.null_high],
            "p_value": first.p_value,
            "same_interval_on_rerun": (again.null_low, again.null_high) == (first.null_low, first.null_high),
        },
        "compute_gap_race_matrix": {
            "seconds": gap_s,
            "matrix": "19 x 19 (18 x 18 permuted: `a person` left out)",
            "delta": float(row["delta"]),
            "null_interval": [float(row["null_low"]), float(row["null_high"])],
            "p_value": float(row["p_value"]),
        },
        "cpus": os.cpu_count(),
        "numpy": np.__version__,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
