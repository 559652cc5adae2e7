"""A toy Hub-ready folder (`promptgen.hub.folder`): configs of `n` rows of three columns, fed in batches.

The folder writer's own tests use it, and so does the CLI check that a crafted config name
cannot write outside `data/`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from datasets import Features, List, Value

from promptgen.hub.folder import ConfigData, card_front_matter, write_hub_folder

FEATURES = Features({"id": Value("string"), "x": Value("int32"), "tags": List(Value("string"))})


def toy_rows(n: int) -> list[dict[str, Any]]:
    return [{"id": f"r{i}", "x": i, "tags": [str(i % 3)]} for i in range(n)]


def toy_config(name: str, n: int, batch: int) -> ConfigData:
    """Config `name`: `toy_rows(n)` handed to the writer `batch` rows at a time."""

    def batches():
        rows = toy_rows(n)
        for start in range(0, n, batch):
            chunk = rows[start : start + batch]
            yield {k: [r[k] for r in chunk] for k in FEATURES}

    return ConfigData(name, FEATURES, batches)


def toy_card(manifest: dict, written: list) -> str:
    front = card_front_matter(pretty_name="t", license="cc0-1.0", tags=[], configs=written, default_config=None)
    return f"---\n{front}---\n# t\n"


def write_toy_folder(out: Path, configs: list[ConfigData], **kw: Any) -> Path:
    """Dataset `ds` of `configs` under `out` (1000 rows per shard unless `rows_per_shard` says otherwise)."""
    manifest = {"recipe": {"sha256": "0" * 64}, "parameters": {"p": 1}, "sources": []}
    kw.setdefault("rows_per_shard", 1000)
    return write_hub_folder(out, "ds", configs, manifest=manifest, render_card=toy_card, **kw)
