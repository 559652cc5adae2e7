"""Benchmark: how right `probes plan` is. Two measurements, one JSON.

    python benchmarks/plan_accuracy.py --prompts DIR/intergroup-empathy-events24 --out plan_accuracy.json

1. Sampling error. On one config (default `religion_P0S0T0`), the exact counts (every call,
   every item's request built as a run builds it) against the estimator `probes plan` uses
   for large configs (`--sample-calls` random calls, `--trie-items` number tries per call),
   over `--seeds` seeds: the relative error of each estimate of computed tokens, per backend
   and number mode, and how often the exact value lies within 2 standard errors. Each item's
   request is built once and reused by every estimate, so only the sampling differs.
2. Time. The CPU's computed-tokens/s is measured with a plain batched forward pass
   (`--measure-batch` rows of the config's mean context length, random ids, all logits); the plan's
   computed tokens for the first `--items` items divided by it is the predicted time; the
   hf backend then scores those items (`run_items`, the run's CPU call size) and its wall
   time is the measured one. Target: within 25%.

SmolLM2-135M (the test model, float32, `--threads` threads) unless `--model` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=Path, required=True, help="a built intergroup-empathy folder")
    parser.add_argument("--config", default="religion_P0S0T0")
    parser.add_argument("--model", type=Path, default=None, help="model folder (default: the SmolLM2 test model)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--items-per-call", type=int, default=64, help="call size of the sampling part")
    parser.add_argument("--sample-calls", type=int, default=3)
    parser.add_argument("--trie-items", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--items", type=int, default=200, help="items of the timing part")
    parser.add_argument("--measure-batch", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-timing", action="store_true")
    args = parser.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    sys.path.insert(0, str(ROOT / "src"))

    import torch
    from transformers import AutoTokenizer

    from promptgen.hub.read import config_files
    from runners import plan
    from runners.backends import priced_backends
    from runners.rows import cached_digit_start_ids
    from runners.testmodel import ensure_smollm2

    torch.set_num_threads(args.threads)
    model_path = args.model or ensure_smollm2()[1]
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    rows = plan.ConfigRows(config_files(args.prompts, args.config, required=True))
    digits = cached_digit_start_ids(tokenizer)
    cache: dict[tuple[str, str], Any] = {}

    def prepare(items: list, mode: str) -> list:
        todo = [i for i in items if (str(i["id"]), mode) not in cache]
        if todo:
            for item, request in zip(todo, plan.run_requests(todo, tokenizer, False, mode, digits), strict=True):
                cache[(str(item["id"]), mode)] = request
        return [cache[(str(i["id"]), mode)] for i in items]

    base = dict(items_per_call=args.items_per_call, max_batch_tokens=8192, block_size=16)
    started = time.perf_counter()
    exact = plan.count_config(
        rows, tokenizer, False, plan.PlanSettings(**base, sample_calls=10**9, trie_items=None), prepare=prepare
    )
    exact_s = time.perf_counter() - started
    estimates = [
        plan.count_config(
            rows,
            tokenizer,
            False,
            plan.PlanSettings(**base, sample_calls=args.sample_calls, trie_items=args.trie_items, seed=seed),
            prepare=prepare,
        )
        for seed in range(args.seeds)
    ]
    errors: dict[str, Any] = {}
    for backend in priced_backends():
        for mode in plan.NUMBER_MODES:
            cell = exact[backend][mode]
            if "unavailable" in cell:
                errors[f"{backend}/{mode}"] = {"unavailable": cell["unavailable"]}
                continue
            rel, covered = [], 0
            for estimate in estimates:
                est = estimate[backend][mode]
                rel.append(est["computed_tokens"] / cell["computed_tokens"] - 1)
                se = (est["computed_context_tokens_se"] ** 2 + est["continuation_positions_se"] ** 2) ** 0.5
                covered += abs(est["computed_tokens"] - cell["computed_tokens"]) <= 2 * se
            errors[f"{backend}/{mode}"] = {
                "exact_computed_tokens_per_item": cell["computed_tokens_per_item"],
                "max_abs_relative_error": max(abs(r) for r in rel),
                "rms_relative_error": (sum(r * r for r in rel) / len(rel)) ** 0.5,
                "mean_relative_error": statistics.fmean(rel),
                "within_2_se": covered / len(rel),
            }
    result: dict[str, Any] = {
        "benchmark": "plan_accuracy",
        "config": args.config,
        "rows": rows.rows,
        "model": str(model_path).replace(str(Path.home()), "~"),
        "sampling": {
            "items_per_call": args.items_per_call,
            "calls": exact["calls"],
            "sample_calls": args.sample_calls,
            "trie_items": args.trie_items,
            "seeds": args.seeds,
            "exact_count_s": exact_s,
            "errors": errors,
        },
    }
    if not args.skip_timing:
        result["timing"] = timing(args, model_path, tokenizer, rows, plan)
    result["machine"] = {"threads": args.threads, "cpu_count": os.cpu_count(), "load_average": os.getloadavg()}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def timing(args: argparse.Namespace, model_path: Path, tokenizer: Any, rows: Any, plan: Any) -> dict[str, Any]:
    """Predicted (plan tokens / measured plain-forward tokens/s) against measured hf wall time."""
    import torch

    from runners.backends.hf.backend import HFBackend
    from runners.model.device import ITEMS_PER_CALL
    from runners.rows import run_items
    from runners.scoring.token_accounting import DEFAULT_MAX_BATCH_TOKENS

    items = rows.read(0, args.items)
    sub = plan.ConfigRows.__new__(plan.ConfigRows)  # the first N rows as a config of their own
    sub.paths, sub.files, sub.groups, sub.columns = rows.paths, rows.files, rows.groups, rows.columns
    sub.rows = len(items)
    settings = plan.PlanSettings(
        items_per_call=ITEMS_PER_CALL["cpu"],
        max_batch_tokens=DEFAULT_MAX_BATCH_TOKENS,
        block_size=16,
        sample_calls=10**9,
        trie_items=None,
    )
    counts = plan.count_config(sub, tokenizer, False, settings, modes=("exact",))["hf"]["exact"]
    backend = HFBackend.from_pretrained(str(model_path), dtype="float32")
    model = backend.model
    length = round(counts["context_tokens_per_item"])
    ids = torch.randint(0, model.config.vocab_size, (args.measure_batch, length))
    with torch.inference_mode():
        model(input_ids=ids)  # warm-up
        start, done = time.perf_counter(), 0
        while time.perf_counter() - start < 20:
            model(input_ids=ids)  # every position's logits: 2 x params per token, as the plan counts
            done += ids.numel()
        tokens_per_s = done / (time.perf_counter() - start)
    run_items(items[:4], backend, tokenizer, False, batch_items=ITEMS_PER_CALL["cpu"])  # warm-up
    start = time.perf_counter()
    run_items(items, backend, tokenizer, False, batch_items=ITEMS_PER_CALL["cpu"])
    measured = time.perf_counter() - start
    predicted = counts["computed_tokens"] / tokens_per_s
    return {
        "items": len(items),
        "plan_computed_tokens": counts["computed_tokens"],
        "plan_computed_tokens_per_item": counts["computed_tokens_per_item"],
        "measured_forward_tokens_per_s": tokens_per_s,
        "forward_measure": f"plain forward, {args.measure_batch} rows x {length} random ids, every position's logits",
        "predicted_s": predicted,
        "measured_s": measured,
        "relative_error": predicted / measured - 1,
        "target_abs_relative_error": 0.25,
    }


if __name__ == "__main__":
    main()
