"""Benchmark: what preparing one 0-100 number item costs, against one encoding of its context.

    python benchmarks/number_prep.py --out benchmarks/results/number_prep_cpu2.json
    python benchmarks/number_prep.py --prompts DIR/intergroup-empathy --config religion_P0S0T0 --out np.json
    python benchmarks/number_prep.py --before-src /tmp/before/src --out np.json   # and the old code, same items

A number item's token paths (`runners.scoring.tokenize.number_paths`: every form of 0..100, with and
without a leading space, as a continuation of the item's context) are what the runner prepares for
each item before the model sees it. This script measures them as a run meets them:

- the items are the first `--items` rows of a config of the empathy dataset built from the authors'
  released narratives (`--sources`, default `../shared/sources`), in the config's own order
  (perceiver, experiencer, event): every item has its own narrative and emotion;
- each item is prepared once per pass, in that order, from cold caches (the tails are cleared
  before each pass; the first item's cost, which finds the tail, is included); the figure is the
  median of `--passes` such passes;
- per tokenizer family (`runners.testmodel`: Llama-3's BPE, Llama-2's SentencePiece, and Qwen2,
  GPT-2 and SmolLM2's for reference), on the plain prompt and on the chat form (the family's
  instruct template, `runners.testmodel.INSTRUCT_CHAT_TEMPLATES`, or the tokenizer's own);
- `encode_ms`: one `encode_context` of an item's context (the unit of the target), timed the same way;
- `prepare_over_encode`: the mean `number_paths` time per item over the mean encode time;
- `equal`: on every timed item, the paths equal encoding every `context + form` whole
  (`_whole_number_paths`, the definition; `whole_over_encode` is its cost);
- `favourable`: labelled as such, the old benchmark's setting for comparison only: 9 events repeated
  to the same number of items, caches warm, the median over repeats;
- with `--before-src`, the same real items through that tree's `tokenize.py` (the code before the change).

Target (issue "Feed the GPU, round 2"): `prepare_over_encode` <= 3 with Llama-3's and Llama-2's
tokenizers on the plain and the chat form, paths equal on every timed item. Run it alone on the
machine: two busy cores slow every figure.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

FAMILIES = ("llama-bpe", "llama-spm", "qwen2", "gpt-2", "smollm2")
TARGET_RATIO = 3.0
TARGET_FAMILIES = ("llama-bpe", "llama-spm")
#: the old benchmark's events: its 300 items came from 9 of them
FAVOURABLE_EVENTS = 9


def build_prompts(work: Path, sources: Path, config: str) -> Path:
    """One config of `intergroup-empathy` built from the release's narratives under `sources` (about 15 s)."""
    from promptgen.build import build

    return build("intergroup-empathy", out_dir=work, sources=sources, configs=[config]).path


def load_tokenizer(family: str) -> Any:
    from transformers import AutoTokenizer

    from runners.testmodel import ensure_smollm2, ensure_vocab_tiny

    folder = ensure_smollm2()[1] if family == "smollm2" else ensure_vocab_tiny(family)
    return AutoTokenizer.from_pretrained(folder)


def with_chat_template(tokenizer: Any, family: str) -> Any | None:
    """The tokenizer with its instruct model's chat template (None where the family has none)."""
    from runners.testmodel import INSTRUCT_CHAT_TEMPLATES

    if getattr(tokenizer, "chat_template", None):
        return tokenizer
    if family not in INSTRUCT_CHAT_TEMPLATES:
        return None
    out = copy.deepcopy(tokenizer)
    out.chat_template = INSTRUCT_CHAT_TEMPLATES[family]
    return out


def load_before(src: Path) -> ModuleType:
    """`runners/scoring/tokenize.py` of another tree, as its own module (it imports nothing of the project)."""
    spec = importlib.util.spec_from_file_location("before_tokenize", src / "runners" / "scoring" / "tokenize.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"no runners/scoring/tokenize.py under {src}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def once_each_ms(fn: Callable[[str], Any], contexts: list[str], reset: Callable[[], None]) -> tuple[float, float, list]:
    """(mean ms per item, first item's ms, results): every context once, in order, from a `reset` cache."""
    reset()
    out, times = [], []
    for context in contexts:
        start = time.perf_counter()
        out.append(fn(context))
        times.append(time.perf_counter() - start)
    return sum(times) / len(times) * 1e3, times[0] * 1e3, out


def measure(
    family: str, tokenizer: Any, chat: bool, items: list[dict[str, Any]], passes: int, before: ModuleType | None
) -> dict[str, Any]:
    from runners.rows import render_context
    from runners.scoring import tokenize

    contexts = [render_context(tokenizer, item, chat) for item in items]
    lo, hi = items[0]["number_min"], items[0]["number_max"]

    def reset() -> None:
        tokenize._TAILS.pop(tokenizer, None)

    def prepare_one(context: str) -> Any:
        return tokenize.number_paths(tokenizer, context, lo, hi)

    encode = [once_each_ms(lambda c: tokenize.encode_context(tokenizer, c), contexts, reset) for _ in range(passes)]
    prepare = [once_each_ms(prepare_one, contexts, reset) for _ in range(passes)]
    encode_ms = statistics.median(ms for ms, _, _ in encode)
    prepare_ms = statistics.median(ms for ms, _, _ in prepare)
    first_ms = statistics.median(first for _, first, _ in prepare)
    timed = prepare[-1][2]

    def whole(context: str) -> tuple:
        shared = tokenize.encode_context(tokenizer, context)
        return shared, tokenize._whole_number_paths(tokenizer, context, shared, lo, hi, ("", " "))

    whole_ms, _, wholes = once_each_ms(whole, contexts, lambda: None)
    unequal = [items[k]["id"] for k, (got, want) in enumerate(zip(timed, wholes, strict=True)) if got != want]
    endings = sum(v is not None for v in tokenize._TAILS.get(tokenizer, {}).values())

    # the old benchmark's setting, for comparison only: 9 events repeated, caches warm, median over repeats
    repeated = [contexts[k % FAVOURABLE_EVENTS] for k in range(len(contexts))]
    warm = [once_each_ms(prepare_one, repeated, lambda: None)[0] for _ in range(passes)]
    tokens = statistics.mean(len(tokenize.encode_context(tokenizer, c)) for c in contexts)
    out: dict[str, Any] = {
        "family": family,
        "form": "chat" if chat else "plain",
        "items": len(contexts),
        "distinct_events": len({item.get("text_id") for item in items}),
        "mean_context_tokens": round(tokens, 1),
        "encode_ms": round(encode_ms, 4),
        "prepare_ms": round(prepare_ms, 4),
        "prepare_over_encode": round(prepare_ms / encode_ms, 2),
        "first_item_ms": round(first_ms, 3),
        "prepare_ms_after_first": round((prepare_ms * len(contexts) - first_ms) / max(len(contexts) - 1, 1), 4),
        "whole_ms": round(whole_ms, 3),
        "whole_over_encode": round(whole_ms / encode_ms, 1),
        "endings_kept": endings,
        "equal_on_every_timed_item": not unequal,
        "unequal_items": unequal[:10],
        "favourable_9_events_repeated_warm": {
            "label": "the old benchmark's setting (9 events repeated, caches warm, median over repeats): "
            "not a real run",
            "prepare_ms": round(statistics.median(warm), 4),
            "prepare_over_encode": round(statistics.median(warm) / encode_ms, 2),
        },
    }
    if before is not None:

        def before_one(context: str) -> Any:
            return before.number_paths(tokenizer, context, lo, hi)

        before_runs = [
            once_each_ms(before_one, contexts, lambda: before._TAILS.pop(tokenizer, None)) for _ in range(passes)
        ]
        before_ms = statistics.median(ms for ms, _, _ in before_runs)
        out["before"] = {"prepare_ms": round(before_ms, 4), "prepare_over_encode": round(before_ms / encode_ms, 2)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=Path, help="an intergroup-empathy build (default: one config built here)")
    parser.add_argument("--sources", type=Path, default=Path("../shared/sources"), help="the release's sources")
    parser.add_argument("--config", default="religion_P0S0T0", help="a 0-100 number config")
    parser.add_argument("--items", type=int, default=200, help="the config's first N items, each prepared once a pass")
    parser.add_argument("--passes", type=int, default=3, help="passes from cold caches; the median is reported")
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--before-src", type=Path, help="a `src` folder of the code to compare with (same items)")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = parser.parse_args()

    from runners.prompts import load_prompt_config

    before = load_before(args.before_src) if args.before_src else None
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.prompts or build_prompts(Path(tmp), args.sources, args.config)
        prompts = load_prompt_config(str(folder), args.config)
        items = prompts.dataset.select(range(min(args.items, len(prompts.dataset)))).to_list()
    if items[0].get("task") != "number":
        raise SystemExit(f"{args.config} is not a number config")
    results = []
    for family in args.families:
        tokenizer = load_tokenizer(family)
        results.append(measure(family, tokenizer, False, items, args.passes, before))
        chat_tokenizer = with_chat_template(tokenizer, family)
        if chat_tokenizer is not None:
            results.append(measure(family, chat_tokenizer, True, items, args.passes, before))
    targets = {
        f"{r['family']} {r['form']}": r["prepare_over_encode"] <= TARGET_RATIO and r["equal_on_every_timed_item"]
        for r in results
        if r["family"] in TARGET_FAMILIES
    }
    out = {
        "benchmark": "number_prep",
        "config": args.config,
        "source": args.prompts.name
        if args.prompts
        else "intergroup-empathy built from the authors' released narratives",
        "order": "the config's own order (perceiver, experiencer, event), each item prepared once per pass",
        "passes": args.passes,
        "number_range": [items[0]["number_min"], items[0]["number_max"]],
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "target": f"prepare_over_encode <= {TARGET_RATIO} on {', '.join(TARGET_FAMILIES)}, plain and chat, "
        "paths equal on every timed item",
        "targets": targets,
        "meets_targets": all(targets.values()) and len(targets) == 2 * len(TARGET_FAMILIES),
        "families": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
