"""The fourth probe's report table recomputed from the rows a run wrote and the prompts its build wrote: what the
tests that build, run and analyse it (registered or installed) check its analysis against."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest


def check_scores_table(dataset: Path, results: Path, report: Path) -> pd.Series:
    """Assert `report`'s `fake_probe_scores` table is p(agree) per group recomputed from `results`' rows and
    `dataset`'s prompts (6 items, 3 per group, all by the fake-third backend); the recomputed means."""
    prompts = pq.read_table(sorted((dataset / "data" / "items").glob("*.parquet"))).to_pandas()
    rows = pq.read_table(sorted(results.rglob("part-*.parquet"))).to_pandas()
    assert len(rows) == len(prompts) == 6 and set(rows["backend"]) == {"fake-third"}
    joined = rows[["id", "choice_probs"]].merge(prompts[["id", "group", "choice_types"]], on="id")
    joined["p_agree"] = [
        p[list(t).index("agree")] for p, t in zip(joined.choice_probs, joined.choice_types, strict=True)
    ]
    expected = joined.groupby("group")["p_agree"].mean()
    table = pd.read_csv(report / "tables" / "fake_probe_scores.csv").set_index("group")
    assert table["p_agree"].to_dict() == pytest.approx(expected.to_dict(), abs=1e-12)
    assert table["n"].to_dict() == {"north": 3, "south": 3}
    return expected
