"""Benchmark: a new model's audit in a day, priced. `probes plan --budget-hours 8` on the three datasets.

    python benchmarks/sample_plan.py --dataset DIR/intergroup-empathy... --dataset DIR/talent-or-luck \\
        --dataset DIR/trust-game-names --out benchmarks/results/sample_plan_8b_h100.json

1. Budget. For a Llama-3-8B-shaped `config.json` with Llama-3's tokenizer (no weights; as
   benchmarks/plan_profiles.py makes it), `probes plan DATASET --model M8B --gpu h100 --mfu 0.5
   --budget-hours 8 --no-chat` per dataset: the sample size chosen (units per config), its hours on
   vLLM (at most 8) and each config's units, items and hours, with the sizes the bisection priced.
2. Check. The same pricing of a small sample against a CPU run of it: for one config per dataset, the
   plan of `--sample K` (the Trust Game has no unit: `--limit K` rows) with a tiny model of the same
   tokenizer (`runners.testmodel.ensure_llama3_tiny`, random weights) against `probes run` of the same
   rows with the hf backend, per token kind: items, prompt (context) tokens, computed tokens (number and
   choice configs), decoded tokens (generated configs: the plan's ceiling against the answers' own
   tokens, the end token counted). Target: within 10% each (decoded tokens only where the model ran to
   the ceiling: a plan without `--profile` assumes it does).

The plans count 2 sampled calls of 1,024 items per config and 8 tries per call (`--sample-calls 2
--trie-items 8`), as the earlier full-sweep plans did.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def budget_plan(dataset: Path, model: Path, budget: float) -> dict[str, Any]:
    from probes import api
    from runners.plan.budget import run_hours

    started = time.perf_counter()
    request = api.PlanRequest(
        dataset=dataset, model=str(model), chat=False, gpu="h100", mfu=0.5, budget_hours=budget,
        sample_calls=2, trie_items=8,
    )  # fmt: skip
    plan = api.plan(request)
    configs = {}
    for name, counts in plan["configs"].items():
        drawn = counts.get("sample") or {}
        modes = tuple(m for m in counts["vllm"] if m != "generate")
        configs[name] = {
            "unit": drawn.get("unit"),
            "units": drawn.get("size"),
            "population": drawn.get("population"),
            "items": counts["items"],
            "vllm_hours": run_hours({"vllm": counts["vllm"]}, "vllm", modes),
            "hf_hours": run_hours({"hf": counts["hf"]}, "hf", modes),
        }
    return {
        "command": f"probes plan {dataset.name} --model M8B --no-chat --gpu h100 --mfu 0.5 --budget-hours {budget:g} "
        "--sample-calls 2 --trie-items 8",
        "sample": plan["sample"],
        "configs": configs,
        "wall_s": round(time.perf_counter() - started, 1),
    }


def check_small(dataset: Path, config: str, tiny: Path, k: int, work: Path) -> dict[str, Any]:
    """The plan of a small sample against a CPU run of the same rows, per token kind."""
    import pyarrow.parquet as pq

    from probes import api
    from runners.backends.load import LoadOptions

    narrow = {"sample": k} if config != "race_probe" and "games" not in config and config != "probing" else {}
    narrow = narrow or {"limit": k}
    plan = api.plan(api.PlanRequest(dataset=dataset, model=str(tiny), configs=(config,), chat=False, **narrow))
    results = work / f"run-{dataset.name}-{config}"
    started = time.perf_counter()
    (summary,) = api.run_many(
        dataset, [config], str(tiny), results, chat=False, load=LoadOptions.of(backend="hf", device="cpu"), **narrow
    )
    run_s = time.perf_counter() - started
    entry = next(iter(json.loads((results / "results_manifest.json").read_text())["runs"].values()))
    rows = [r for part in sorted(summary.key_dir.glob("*.parquet")) for r in pq.read_table(part).to_pylist()]
    counts = plan["configs"][config]["hf"]
    run_kinds: dict[str, float] = {"items": len(rows), "context_tokens": sum(r["context_tokens"] for r in rows)}
    if entry["scoring"].get("mode") == "generate":
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(tiny)
        decoded = [
            len(tokenizer(r["generated_text"] or "", add_special_tokens=False)["input_ids"])
            + (r["finish_reason"] == "stop")
            for r in rows
        ]
        cell = counts["generate"]
        planned = {
            "items": cell["items"],
            "context_tokens": cell["prompt_tokens"],
            "decoded_tokens": cell["decoded_tokens"],
        }
        run_kinds["decoded_tokens"] = sum(decoded)
        ceiling = entry["scoring"]["max_new_tokens"]
        at_ceiling = sum(d >= ceiling for d in decoded) / max(len(decoded), 1)
    else:
        mode = entry["scoring"].get("number_mode", "exact")
        cell = counts[mode]
        planned = {
            "items": cell["items"],
            "context_tokens": cell["context_tokens"],
            "computed_tokens": cell["computed_tokens"],
        }
        run_kinds["computed_tokens"] = entry["tokens"]
        at_ceiling = None
    ratio = {kind: planned[kind] / run_kinds[kind] if run_kinds[kind] else None for kind in planned}
    checked = [kind for kind in ratio if kind != "decoded_tokens" or (at_ceiling or 0) == 1.0]
    return {
        "config": config,
        "narrowed_by": narrow,
        "sample": entry.get("sample"),
        "plan": planned,
        "run": run_kinds,
        "plan_over_run": ratio,
        "answers_at_ceiling": at_ceiling,
        "within_10pct": all(ratio[kind] is not None and abs(ratio[kind] - 1) <= 0.10 for kind in checked),
        "kinds_checked": checked,
        "run_wall_s": round(run_s, 1),
        "tokens_counted": entry["tokens_counted"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, action="append", required=True, help="a built dataset (repeat)")
    parser.add_argument("--check-config", action="append", default=[], help="DATASET_NAME=CONFIG for the check")
    parser.add_argument("--budget-hours", type=float, default=8.0)
    parser.add_argument("--check-units", type=int, default=2, help="units of the small sample checked (rows: TG)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    sys.path.insert(0, str(HERE))
    from plan_profiles import model_folder

    from runners.testmodel import ensure_llama3_tiny

    chosen = dict(item.split("=", 1) for item in args.check_config)
    out: dict[str, Any] = {
        "benchmark": "sample_plan",
        "model": "Llama-3-8B-shaped config.json (no weights) with the llama-bpe tokenizer (128,256 tokens)",
        "budget_hours": args.budget_hours,
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "datasets": {},
    }
    with tempfile.TemporaryDirectory(prefix="sample-plan-") as tmp:
        work = Path(tmp)
        m8b = model_folder("llama-bpe", work)
        tiny = ensure_llama3_tiny()
        for dataset in args.dataset:
            print(f"budget plan of {dataset.name}", flush=True)
            record = budget_plan(dataset, m8b, args.budget_hours)
            if dataset.name in chosen:
                print(f"check of {dataset.name} {chosen[dataset.name]}", flush=True)
                record["check"] = check_small(dataset, chosen[dataset.name], tiny, args.check_units, work)
            out["datasets"][dataset.name] = record
            args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: (v["sample"], v.get("check", {}).get("plan_over_run")) for k, v in out["datasets"].items()}))


if __name__ == "__main__":
    main()
