"""Benchmark: what preparing one 0-100 number item costs, against one encoding of its context.

    python benchmarks/number_prep.py --out benchmarks/results/number_prep_cpu2.json
    python benchmarks/number_prep.py --prompts DIR/intergroup-empathy --config religion_P0S0T0 --out np.json

A number item's token paths (`runners.scoring.tokenize.number_paths`: every form of 0..100, with and
without a leading space, as a continuation of the item's context) are what the runner
prepares for each item before the model sees it. This script times, per real tokenizer family
(`runners.testmodel`: Llama-3's BPE, Llama-2's SentencePiece, Qwen2, GPT-2, and SmolLM2's), on
the rendered contexts (chat form where the tokenizer has a template) of one empathy config:

- `encode_ms`: one `encode_context` of the item's context (the unit of the target);
- `prepare_ms`: `number_paths` per item, as a run calls it item after item (its tail cache warm
  after the first item of the config; `first_item_ms` is that first, cold item);
- `whole_ms`: the definition, every `context + form` encoded whole (`_whole_number_paths`),
  which is what `number_paths` did before it encoded the forms after the context's tail only;
- `equal`: the two give the same context ids and paths on every timed item.

Target (issue "Feed the GPU"): `prepare_ms / encode_ms` <= 3 with Llama-3's and Llama-2's
tokenizers. Without `--prompts`, a small `intergroup-empathy` build from the synthetic
crowd-enVent corpus is written into a temporary folder first (a few seconds). Run it alone on
the machine: two busy cores slow every figure.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

FAMILIES = ("llama-bpe", "llama-spm", "qwen2", "gpt-2", "smollm2")
TARGET_RATIO = 3.0
TARGET_FAMILIES = ("llama-bpe", "llama-spm")


def build_prompts(work: Path, events: int) -> Path:
    """A small intergroup-empathy build from the labelled synthetic corpus (as `probes demo` writes it)."""
    from promptgen.build import build
    from promptgen.empathy.synthetic import write_synthetic_corpus
    from promptgen.sources import SourceOptions

    sources = write_synthetic_corpus(work / "synthetic-sources")
    options = SourceOptions(sources, None, True)
    recipe = str(sources / "recipe.yaml")  # the stand-in files' recipe (their sources unpinned)
    return build(recipe, out_dir=work / "datasets", sources=options, max_events=events).path


def load_tokenizer(family: str) -> Any:
    from transformers import AutoTokenizer

    from runners.testmodel import ensure_smollm2, ensure_vocab_tiny

    folder = ensure_smollm2()[1] if family == "smollm2" else ensure_vocab_tiny(family)
    return AutoTokenizer.from_pretrained(folder)


def per_item_ms(fn: Any, items: list[Any], repeats: int) -> float:
    """Median over `repeats` of the mean time per item of `fn` over `items` (milliseconds)."""
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for item in items:
            fn(item)
        runs.append((time.perf_counter() - start) / len(items) * 1e3)
    return statistics.median(runs)


def measure(family: str, items: list[dict[str, Any]], whole_items: int, repeats: int) -> dict[str, Any]:
    from runners.rows import render_context
    from runners.scoring import tokenize

    tokenizer = load_tokenizer(family)
    chat = bool(getattr(tokenizer, "chat_template", None))
    contexts = [render_context(tokenizer, item, chat) for item in items]
    lo, hi = items[0]["number_min"], items[0]["number_max"]
    tokenize._TAILS.clear()
    start = time.perf_counter()
    tokenize.number_paths(tokenizer, contexts[0], lo, hi)
    first_ms = (time.perf_counter() - start) * 1e3
    encode_ms = per_item_ms(lambda c: tokenize.encode_context(tokenizer, c), contexts, repeats)
    prepare_ms = per_item_ms(lambda c: tokenize.number_paths(tokenizer, c, lo, hi), contexts, repeats)

    def whole(context: str) -> tuple:
        shared = tokenize.encode_context(tokenizer, context)
        return shared, tokenize._whole_number_paths(tokenizer, context, shared, lo, hi, ("", " "))

    sample = contexts[:whole_items]
    whole_ms = per_item_ms(whole, sample, 1)
    equal = all(tokenize.number_paths(tokenizer, c, lo, hi) == whole(c) for c in sample)
    served = sum(v is not None for v in tokenize._TAILS.get(tokenizer, {}).values())
    tokens = statistics.mean(len(tokenize.encode_context(tokenizer, c)) for c in contexts)
    return {
        "family": family,
        "chat_template": chat,
        "items": len(contexts),
        "mean_context_tokens": round(tokens, 1),
        "encode_ms": round(encode_ms, 4),
        "prepare_ms": round(prepare_ms, 4),
        "first_item_ms": round(first_ms, 3),
        "whole_ms": round(whole_ms, 3),
        "prepare_over_encode": round(prepare_ms / encode_ms, 2),
        "whole_over_encode": round(whole_ms / encode_ms, 1),
        "speedup": round(whole_ms / prepare_ms, 1),
        "tails_cached": served,
        "equal_on_whole_sample": equal,
        "whole_sample": len(sample),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=Path, help="an intergroup-empathy build (default: a small synthetic one)")
    parser.add_argument("--config", default="religion_P0S0T0", help="a 0-100 number config")
    parser.add_argument("--items", type=int, default=300, help="items timed per family")
    parser.add_argument("--whole-items", type=int, default=40, help="items encoded the old way (slow) and compared")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = parser.parse_args()

    from runners.prompts import load_prompt_config

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.prompts or build_prompts(Path(tmp), events=max(1, args.items // 36 + 1))
        prompts = load_prompt_config(str(folder), args.config)
        items = [prompts.dataset[i] for i in range(min(args.items, len(prompts.dataset)))]
    if items[0].get("task") != "number":
        raise SystemExit(f"{args.config} is not a number config")
    results = [measure(f, items, args.whole_items, args.repeats) for f in args.families]
    targets = {
        r["family"]: r["prepare_over_encode"] <= TARGET_RATIO and r["equal_on_whole_sample"]
        for r in results
        if r["family"] in TARGET_FAMILIES
    }
    out = {
        "benchmark": "number_prep",
        "config": args.config,
        "number_range": [items[0]["number_min"], items[0]["number_max"]],
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "target": f"prepare_over_encode <= {TARGET_RATIO} on {', '.join(TARGET_FAMILIES)}, paths equal",
        "meets_targets": all(targets.values()),
        "families": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
