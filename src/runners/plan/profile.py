"""A bounded run's node profile, for pricing one (`probes plan --profile RESULTS`).

How many trie positions a bounded number item needs depends on the model (how it spreads its
mass over numbers) and the prompt, not only on the tolerance: measure it on a sample, then price
the sweep with it. The profile is the mean `trie_positions` of a results folder's bounded
number rows at the planned tolerance (read with the results layout's own readers).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc

from promptgen.core.errors import ProbeError
from runners.results import MANIFEST_NAME, key_folders, read_key_rows, result_configs


@dataclass(frozen=True)
class TrieProfile:
    """Trie positions per number item of a bounded run, and where the figure comes from."""

    trie_positions: float
    #: "RESULTS folder (N rows, tolerance EPS)" or "--trie-positions"
    source: str
    rows: int = 0


def read_profile(results: Path, tolerance: float) -> TrieProfile:
    """The mean `trie_positions` of `results`' number rows scored at `tolerance`; one line naming the folder if none.

    Rows at another tolerance are not a profile of this one (the positions fall as the tolerance
    grows), so they are left out, and named when nothing else is there.
    """
    if not (results / MANIFEST_NAME).is_file():
        raise ProbeError(f"--profile {results}: not a results folder (no {MANIFEST_NAME})")
    total, count, others = 0.0, 0, set()
    for config in result_configs(results):
        for folder in key_folders(results, config):
            table = read_key_rows(folder, ["trie_positions", "scoring"])
            table = table.filter(pc.is_valid(table["trie_positions"]))
            # one scoring per key, in practice: each distinct one parsed once
            sums = table.group_by("scoring").aggregate([("trie_positions", "sum"), ("trie_positions", "count")])
            names = ("scoring", "trie_positions_sum", "trie_positions_count")
            for scoring, positions, rows in zip(*(sums[c].to_pylist() for c in names), strict=True):
                try:
                    eps = float(json.loads(scoring).get("number_tolerance", 0.0))
                except (TypeError, ValueError, AttributeError):
                    raise ProbeError(f"--profile {folder}: a row's `scoring` is not a scoring settings JSON") from None
                if math.isclose(eps, tolerance, rel_tol=1e-9, abs_tol=0.0):
                    total += positions
                    count += rows
                else:
                    others.add(eps)
    if not count:
        seen = f"; it has rows at tolerance {', '.join(map(str, sorted(others)))}" if others else ""
        raise ProbeError(
            f"--profile {results}: no number rows with trie_positions at --number-tolerance {tolerance}{seen} "
            "(results made before the tolerance existed have none): score a sample with "
            f"`probes run ... --number-tolerance {tolerance}` first, or give --trie-positions N"
        )
    return TrieProfile(total / count, f"{results.name} ({count} rows, tolerance {tolerance})", count)
