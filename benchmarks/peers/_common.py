"""What both peer scripts share: reading the items, pinning threads, checking tokens, writing the result.

The peers run in their own virtual environments (transformers 4.57, where `cappr` 0.9.6 and
lm-evaluation-harness 0.4.13 work), so they cannot import the project; this file sits next to
them and is found because Python puts a script's folder first on `sys.path`. It uses only the
standard library, numpy, torch and transformers, which every peer environment has.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any


def base_parser(description: str) -> argparse.ArgumentParser:
    """The flags every peer takes; the benchmark passes the same values to each of them."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", type=Path, required=True, help="a transformers-4-loadable model folder")
    parser.add_argument("--items", type=Path, required=True, help="items JSON written by choice_scoring.py")
    parser.add_argument("--out", type=Path, required=True, help="result JSON to write")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--warmup", type=int, default=4, help="items scored once, untimed, before timing")
    return parser


def pin_threads(threads: int) -> None:
    """Same thread count as the main process: the benchmark compares scorers, not thread counts."""
    import torch

    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    torch.set_num_threads(threads)


def load_items(path: Path) -> list[dict[str, Any]]:
    """Items: `id`, `prompt`, `choices`, and the project's `context_ids`/`continuation_ids`."""
    return json.loads(path.read_text())["items"]


def load_model(path: Path) -> tuple[Any, Any]:
    """(model, tokenizer) in float32 on the CPU, in eval mode."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(path)
    # the converted folder names PreTrainedTokenizerFast, whose encodings carry `token_type_ids`;
    # Llama-style models (and cappr's cached forward) take no such argument
    tokenizer.model_input_names = ["input_ids", "attention_mask"]
    return model, tokenizer


def token_agreement(tokenizer: Any, items: list[dict[str, Any]]) -> dict[str, int]:
    """How many (prompt, option) pairs this environment's tokenizer encodes as the project does.

    The peers run another transformers release on a converted copy of the model folder; if the
    copy tokenised differently (an added BOS, another pre-tokenizer) every comparison would be
    void, so the count is reported and checked by the benchmark.
    """
    same = total = 0
    for item in items:
        for choice, cont in zip(item["choices"], item["continuation_ids"], strict=True):
            ids = list(tokenizer(item["prompt"] + choice)["input_ids"])
            same += ids == item["context_ids"] + cont
            total += 1
    return {"pairs": total, "same_tokens": same}


def environment(extra: dict[str, str] | None = None) -> dict[str, Any]:
    """Package versions and threads of this peer's environment, for the record."""
    import torch

    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": version("torch"),
        "transformers": version("transformers"),
        "torch_threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }
    info.update(extra or {})
    return info


class Timer:
    """Wall-clock seconds of a `with` block (perf_counter)."""

    def __enter__(self) -> Timer:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.start


def write(path: Path, payload: dict[str, Any]) -> None:
    """Write the result JSON atomically (the benchmark reads it after the process exits)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2) + "\n")
    tmp.replace(path)
