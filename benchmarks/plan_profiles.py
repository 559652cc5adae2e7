"""Benchmark: the full intergroup-empathy sweep priced with bounded number items, under node profiles.

    python benchmarks/empathy_build.py --work-dir /tmp/fb --keep --out b.json          # once: the full dataset
    probes run DATASET --config religion_P0S0T0 --model SMOLLM2 --no-chat --scoring sentence \\
        --number-tolerance 0.001 --limit 200 --out /tmp/profile-smollm2                  # the measured profile
    python benchmarks/plan_profiles.py --prompts /tmp/fb/empathy-bench-*/out/intergroup-empathy \\
        --profile /tmp/profile-smollm2 --out benchmarks/results/plan_bounded_profiles.json

For two Llama-3-8B-shaped `config.json` files (no weights), one with Llama-3's tokenizer (`llama-bpe`, 128,256
tokens) and one with Llama-2's SentencePiece (`llama-spm`, 32,000), `probes plan` prices the sweep on one H100
at `--mfu` (default 0.5) in exact, first-token and bounded mode (`--number-tolerance`, default 1e-3), the
bounded mode under three profiles of trie positions per number item: the measured one (`--profile`, a results
folder scored at that tolerance) and 10 and 30 positions. The plans use the sampling of the earlier full-sweep
plans (2 calls of 1,024 items, 8 tries per call, seed 0). The JSON keeps each plan's totals per backend and
mode, and the wall time of each plan.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: the tokenizers priced: family -> (label, vocabulary size)
FAMILIES = {
    "llama-bpe": ("Llama-3 (llama-bpe, 128,256 tokens)", 128256),
    "llama-spm": ("Llama-2 SentencePiece (llama-spm, 32,000 tokens)", 32000),
}


def model_folder(family: str, work: Path) -> Path:
    """A Llama-3-8B-shaped config.json with `family`'s tokenizer files (no weights): what a plan reads."""
    sys.path.insert(0, str(HERE))
    from gpu_scoring import LLAMA3_8B

    from runners.testmodel import ensure_vocab_tiny

    tiny = ensure_vocab_tiny(family)
    out = work / f"8b-{family}"
    out.mkdir(parents=True, exist_ok=True)
    for path in tiny.iterdir():
        if path.name.startswith("tokenizer") or path.name == "special_tokens_map.json":
            shutil.copy(path, out / path.name)
    tiny_config = json.loads((tiny / "config.json").read_text())
    config = {
        **LLAMA3_8B,
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "vocab_size": FAMILIES[family][1],
        "bos_token_id": tiny_config.get("bos_token_id"),
        "eos_token_id": tiny_config.get("eos_token_id"),
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    return out


def totals(plan: dict[str, Any]) -> dict[str, Any]:
    """Per backend and mode: GPU hours, computed tokens per item and continuation positions per item."""
    out: dict[str, Any] = {}
    for backend, modes in plan["totals"].items():
        for mode, cell in modes.items():
            if "unavailable" in cell:
                out.setdefault(backend, {})[mode] = {"unavailable": cell["unavailable"]}
                continue
            n = max(cell["items"], 1)
            out.setdefault(backend, {})[mode] = {
                "gpu_hours": cell["gpu_hours"],
                "computed_tokens_per_item": cell["computed_tokens"] / n,
                "continuation_positions_per_item": cell["continuation_positions"] / n,
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=Path, required=True, help="the full intergroup-empathy build")
    parser.add_argument("--profile", type=Path, required=True, help="a results folder scored at --tolerance")
    parser.add_argument("--tolerance", type=float, default=1e-3, help="the bounded mode's --number-tolerance")
    parser.add_argument("--positions", default="10,30", help="fixed profiles: trie positions per number item")
    parser.add_argument("--mfu", type=float, default=0.5)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from runners import plan

    work = Path(tempfile.mkdtemp(prefix="plan-profiles-"))
    measured = plan.read_profile(args.profile, args.tolerance)
    profiles: list[tuple[str, dict[str, Any]]] = [(f"measured: {measured.source}", {"profile": args.profile})]
    profiles += [(f"{n} positions", {"trie_positions": float(n)}) for n in args.positions.split(",")]
    result: dict[str, Any] = {
        "benchmark": "plan_profiles",
        "dataset": "intergroup-empathy, full size, from the synthetic corpus of benchmarks/empathy_build.py",
        "gpu": "h100",
        "mfu": args.mfu,
        "tolerance": args.tolerance,
        "measured_profile": {"trie_positions_per_item": measured.trie_positions, "rows": measured.rows},
        "sampling": {"sample_calls": 2, "trie_items": 8, "seed": 0, "items_per_call": 1024},
        "plans": {},
    }
    try:
        for family, (label, _) in FAMILIES.items():
            folder = model_folder(family, work)
            for name, source in profiles:
                request = plan.PlanRequest(
                    args.prompts,
                    str(folder),
                    gpu="h100",
                    mfu=args.mfu,
                    chat=False,
                    sample_calls=2,
                    trie_items=8,
                    number_tolerance=args.tolerance,
                    **source,
                )
                started = time.perf_counter()
                made = plan.make_plan(request)
                entry = {"tokenizer": label, "profile": name, "wall_s": time.perf_counter() - started}
                entry["bounded"] = made["bounded"] | {"profile": name}
                entry["totals"] = totals(made)
                result["plans"][f"{family} / {name}"] = entry
                print(family, name, json.dumps(entry["totals"]["hf"], default=float), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
