"""`sweep.json` carries each report section's headline, each number with its sampling precision (DESIGN 9)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest

from analysis.precision import Precision, precision_columns
from probes.sweep import SweepRequest, SweepResult, headline_records, sweep_record
from runners.run.request import RunRequest

RUN = {"model": "org/m", "model_revision": "main", "scoring": "{}"}


def test_sweep_json_carries_the_headlines_with_their_precision(tmp_path):
    gap = pd.DataFrame(
        [{**RUN, "refused_items": "excluded", "category": "religion", "setting": "P0S0T0", "delta": 0.3114,
          "p_value": 0.01, "null_low": -0.1, "null_high": 0.1}]
    )  # fmt: skip
    sampled = Precision(0.3114, 0.2712, 0.3498, 0.02, 600, 6050, "event", 0)
    keys = ["model", "model_revision", "scoring", "category", "setting"]
    tables = {
        "empathy_gap": precision_columns(gap, {("org/m", "main", "{}", "religion", "P0S0T0"): sampled}, keys, "δ")
    }
    plan = SimpleNamespace(device="cpu", rate=None, hours=None)
    result = SweepResult(tmp_path, plan, [], {}, 1.0, headlines={"intergroup-empathy": headline_records(tables)})  # type: ignore[arg-type]
    record = json.loads(json.dumps(sweep_record(SweepRequest(RunRequest.each_config("org/m"), tmp_path), result)))
    (row,) = record["headlines"]["intergroup-empathy"]["Empathy"]
    assert row["sampling precision (95% CI)"] == "δ = 0.31 (95% CI 0.27-0.35; 600 of 6,050 events, seed 0)"
    assert row["δ"] == 0.3114 and row["MDE"] == pytest.approx(2.8 * 0.02) and row["p"] == 0.01
