"""The user-path GPU benchmark (`benchmarks/gpu_user_path.py`), checked on the CPU with its tiny shape.

No GPU is lent to CI: the script runs here end to end on a two-layer Llama with Llama-3's real
tokenizer. Its rates mean nothing on a CPU; what is checked is that it runs what a user runs
(`runners.run.runner.run` into a results folder) and the backend alone on the same items, and that
both did the same work: the computed tokens the run's rows report equal those of the backend
fed the run's own requests.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runners_fixtures import number_items, write_prompt_folder

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_user_path.py"


def _choice_items(n: int) -> list[dict]:
    return [
        {
            "id": f"c{k}",
            "probe": "attribution",
            "task": "choice",
            "prompt": f"Item {k}: Maria passed the exam. Why?\nAnswer:",
            "messages": None,
            "choices": [" she worked hard", " she is able", " it was easy", " luck"],
            "choice_labels": ["A", "B", "C", "D"],
            "choice_types": ["effort", "ability", "difficulty", "luck"],
            "number_min": None,
            "number_max": None,
        }
        for k in range(n)
    ]


@pytest.mark.slow
def test_user_path_and_backend_alone_on_the_cpu(tmp_path: Path) -> None:
    choice = write_prompt_folder(tmp_path / "choice", _choice_items(10))
    number = write_prompt_folder(tmp_path / "number", number_items(10))
    out = tmp_path / "u.json"
    args = [f"--choice={choice}:items:8", f"--number={number}:items:5", "--shape", "tiny", "--device", "cpu"]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--dtype", "float32", "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    assert [s["kind"] for s in result["sets"]] == ["choice", "number"]
    for entry, n in zip(result["sets"], (8, 5), strict=True):
        assert entry["run"]["items"] == entry["backend"]["items"] == n
        assert entry["run"]["computed_tokens"] == entry["backend"]["computed_tokens"] > 0
        assert entry["run"]["items_per_s"] > 0 and entry["backend"]["items_per_s"] > 0
        assert entry["run_over_backend"] == pytest.approx(entry["run"]["items_per_s"] / entry["backend"]["items_per_s"])
