"""Benchmark: the fixed costs of a run that the model's FLOPs do not show, per config and per call.

    python benchmarks/fixed_cost.py --prompts DIR/talent-or-luck --out benchmarks/results/fixed_cost_cpu2.json

A sweep scores every config on one loaded model (`runners.run.runner.resolve_protocol`, then `Runner.run`), so
what each config costs beyond its tokens is fixed: the config's load and checks, the session (resume,
key, manifest, card, compaction), and per backend call the Python around it (rendering, tokenising,
building requests, writing rows). Small configs are all fixed cost: a GPU sweep of 32 items per
config was planned at 3.7 s and took 21 s. Here, with SmolLM2-135M on this machine's CPU:

- `per_config_s`: the intercept of wall time against items over one-call runs of 1, 4, 16 and 64
  items (least squares; each run into a fresh results folder, best of `--repeat`);
- `per_call_s`: (wall of 64 items in 64 calls - wall of 64 items in one call) / 63.

Both are measured twice: with the model (`smollm2`), and with a backend that answers at once
(`null`: every log-probability 0), which leaves only what the FLOPs do not count. `probes plan`
and the sweep's quote add the `null` figures, `per_config_s + calls x per_call_s`, to each
config's hours (`runners.plan.pricing.FIXED_COST`). Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

CONFIG = "single_actor"
SIZES = (1, 4, 16, 64)


class NullBackend:
    """A `runners.backends.protocol.Backend` that costs nothing: every token's log-probability is 0."""

    name, dtype, device, max_batch_tokens = "null", "float32", "cpu", None
    model_id, model_revision = "null", None

    def score(self, requests: list[Any]) -> list[Any]:
        from runners.exchange import ContinuationScore, ScoreResult

        def zeros(rows: int) -> Any:
            return np.zeros(rows)

        return [
            ScoreResult(
                tuple(ContinuationScore(zeros(len(c)), np.zeros((len(c), len(r.candidates)))) for c in r.continuations),
                zeros(len(r.candidates)),
                len(r.context),
            )
            for r in requests
        ]

    def hardware(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=Path, required=True, help="a built talent-or-luck folder")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    import torch

    from runners.backends import load as models
    from runners.run.request import LoadOptions, RunRequest
    from runners.run.runner import Runner, resolve_protocol
    from runners.testmodel import ensure_smollm2

    torch.set_num_threads(2)
    model = str(ensure_smollm2()[1])
    runner = Runner(model, LoadOptions(), *models.load_backend(model))
    work = Path(tempfile.mkdtemp(prefix="fixed-cost-"))
    folders = iter(range(10**6))

    def run(items: int, batch: int) -> float:
        best = float("inf")
        for _ in range(args.repeat):
            out = work / f"results-{next(folders)}"  # a fresh folder: nothing to resume
            start = time.perf_counter()
            request = RunRequest(str(args.prompts), CONFIG, model, out, limit=items, batch_size=batch)
            summary = runner.run(resolve_protocol(request))
            best = min(best, time.perf_counter() - start)
            assert summary.items == items
        return best

    def fixed(name: str) -> dict[str, Any]:
        run(1, 1)  # warm: first calls compile kernels and fill the tokenizer's caches
        one_call = {n: run(n, n) for n in SIZES}
        slope, intercept = np.polyfit(np.array(SIZES, float), np.array([one_call[n] for n in SIZES]), 1)
        many_calls = run(SIZES[-1], 1)
        return {
            "backend": name,
            "one_call_wall_s": {str(n): round(s, 4) for n, s in one_call.items()},
            "items_64_in_64_calls_wall_s": round(many_calls, 4),
            "per_item_s": round(float(slope), 4),
            "per_config_s": round(float(intercept), 4),
            "per_call_s": round((many_calls - one_call[SIZES[-1]]) / (SIZES[-1] - 1), 4),
        }

    measured = {"smollm2": fixed("smollm2")}
    runner.close()
    runner.backend = NullBackend()
    measured["null"] = fixed("null")
    result: dict[str, Any] = {
        "benchmark": "fixed_cost",
        "model": "SmolLM2-135M-Instruct (its tokenizer for null)",
        "device": "cpu",
        "machine": {"cpus": 2, "python": platform.python_version(), "torch": torch.__version__},
        "config": CONFIG,
        "repeat": args.repeat,
        **measured,
        "priced": {k: measured["null"][k] for k in ("per_config_s", "per_call_s")},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
