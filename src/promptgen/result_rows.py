"""Reading one result key of a results folder (the layout `probes run` writes) for a promptgen step.

Two dataset versions are made from a model's results: the trust game's curated pairs (from
`race_probe` results) and the empathy dataset's LLM third-person rewrites (from `rewrite_t2`
results). Both read one key folder `RESULTS/data/<config>/<key>/part-*.parquet`, check that
rows merge to one per id (the newest part wins), and keep the provenance `probes run` recorded; that part lives here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .errors import ProbeError


@dataclass(frozen=True)
class KeyRows:
    """One result key's rows (the asked columns plus `file`) and what they were produced with."""

    rows: pd.DataFrame
    key: str
    model: str
    model_revision: str
    scoring: dict[str, Any]
    runs: list[dict[str, Any]]


def load_key_rows(results: Path, config: str, columns: Sequence[str], *, key: str | None, hint: str) -> KeyRows:
    """The rows of `config` under one result key of `results` (`key` may be left out when there is one).

    `hint` is the command that makes such results, shown when there are none.
    """
    # the result layout is the runners' (promptgen otherwise never imports them)
    from runners.results import MANIFEST_NAME, part_files, read_key_rows, read_manifest

    results = Path(results)
    config_dir = results / "data" / config
    if not config_dir.is_dir():
        raise ProbeError(
            f"results folder {results} has no {config} results (expected {config_dir}/<key>/part-*.parquet); "
            f"make them first: {hint}"
        )
    keys = sorted(p.name for p in config_dir.iterdir() if p.is_dir() and part_files(p))
    if not keys:
        raise ProbeError(f"{config_dir}: no result parts")
    if key is None:
        if len(keys) > 1:
            raise ProbeError(f"{config_dir} holds several result keys {keys}; choose one with --key")
        key = keys[0]
    if key not in keys:
        raise ProbeError(f"--key {key!r}: no such result key under {config_dir}; found {keys}")
    folder = config_dir / key
    key_file = folder / "key.json"
    if not key_file.is_file():
        raise ProbeError(f"{folder}: no key.json; not a result folder written by probes run")
    info = json.loads(key_file.read_text(encoding="utf-8"))
    for path in part_files(folder):
        try:
            names = pq.read_schema(path).names
        except (OSError, pa.ArrowException) as exc:
            raise ProbeError(f"{path}: cannot read result part parquet ({exc})") from exc
        missing = [c for c in columns if c not in names]
        if missing:
            raise ProbeError(f"{path}: missing column(s) {missing}")
    # one row per id: where parts repeat an id (a rescored item), the newest part's row wins
    rows = read_key_rows(folder, list(columns), file_column="file").to_pandas()
    runs = [
        run
        for run in read_manifest(results).get("runs", {}).values()
        if run.get("key") == key and run.get("prompt_dataset", {}).get("config") == config
    ]
    if not runs:
        raise ProbeError(f"{results / MANIFEST_NAME}: no run recorded for {config} key {key}")
    return KeyRows(rows, key, info["model"], info["model_revision"], json.loads(info["scoring"]), runs)
