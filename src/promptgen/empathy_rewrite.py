"""`probes rewrite`: a model's third-person rewrites (T2) -> a new version of the empathy dataset.

The LLM half of DESIGN section 4's T2 narratives. The dataset ships one free-text item per
event in its `rewrite_t2` config (the paper's 1-shot prompt, stop string `}`); any model
generates them with the runners, into an ordinary, resumable results folder:

    probes run DATASET --config rewrite_t2 --scoring generate --max-new-tokens 96 --model M --out R

(`probes rewrite --model M` runs exactly that first). This module is the other edge:

1. Read one key folder of `R/data/rewrite_t2/` and cut each generation at the first `}`
   (`rewrite.parse_rewrite`). A generation the runner marked anything but `ok` (no closing
   brace before the length limit, or empty) is not used: that event keeps the rule-based
   T2, and the count per status is recorded, so a weak model never puts a truncated
   sentence into the dataset silently.
2. Rebuild the dataset from its recipe and sources with the rewrites as an extra input
   (`build(rewrites=...)`), at the same `--max-events` as DATASET, so every writer guarantee
   holds (atomic, deterministic, fingerprinted). Rewritten events get `t2_method` = the
   model id; the version is `<recipe version>+t2.<hash of model, key and texts>`, so
   publishing it makes a new tag, and the T2 prompt configs carry the new narratives.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .empathy import REWRITE_CONFIG, rewrite_item_id
from .errors import ProbeError
from .hubfolder import check_target, read_built_from, read_parquet
from .plan import BuildOptions
from .result_rows import KeyRows, load_key_rows
from .rewrite import RULE_METHOD, parse_rewrite

RESULT_COLUMNS = ("id", "generated_text", "parse_status", "finish_reason")


@dataclass(frozen=True)
class ModelRewrites:
    """One model's usable rewrites (text_id -> T2 text) and the record the manifest and card show."""

    model: str
    texts: Mapping[str, str]
    record: dict[str, Any] = field(default_factory=dict)

    def method(self) -> str:
        """The `t2_method` of a rewritten event: the model id as it was run (never `rules`)."""
        return self.model

    def version(self, recipe_version: str) -> str:
        """`1.0.0` -> `1.0.0+t2.<8 hex>`: another model, key or text is another version."""
        digest = hashlib.sha256(json.dumps([self.model, self.record, sorted(self.texts.items())]).encode())
        return f"{recipe_version}+t2.{digest.hexdigest()[:8]}"


def compute_rewrites(found: KeyRows, event_ids: list[str], *, results_file: str) -> ModelRewrites:
    """The usable rewrites among one key's result rows, and what happened to the others (no I/O).

    Every result id must be a rewrite item of one of DATASET's events (else the results were
    made on another build); events without a result row keep the rule-based T2.
    """
    if found.model == RULE_METHOD:
        raise ProbeError(f"{results_file}: a model named {RULE_METHOD!r} cannot be told apart from the rule rewriter")
    by_item = {rewrite_item_id(t): t for t in event_ids}
    unknown = sorted(set(found.rows["id"]) - set(by_item))
    if unknown:
        row = found.rows[found.rows["id"] == unknown[0]].iloc[0]
        raise ProbeError(
            f"{row['file']}: result id {unknown[0]!r} is not a {REWRITE_CONFIG} item of this dataset's events "
            f"({len(unknown)} such ids); were the results made on another build?"
        )
    texts: dict[str, str] = {}
    statuses: Counter[str] = Counter()
    for row in found.rows.itertuples(index=False):
        status = row.parse_status if isinstance(row.parse_status, str) else "missing"
        text = parse_rewrite(row.generated_text) if isinstance(row.generated_text, str) else None
        if status == "ok" and text is None:
            status = "no_answer"
        statuses[status] += 1
        if status == "ok":
            texts[by_item[row.id]] = text
    record = {
        "model": found.model,
        "model_revision": found.model_revision,
        "results_key": found.key,
        "scoring": found.scoring,
        "backend": sorted({str(r.get("backend")) for r in found.runs}),
        "prompt_fingerprints": sorted({str(r.get("prompt_dataset", {}).get("fingerprint")) for r in found.runs}),
        "events": len(event_ids),
        "generated": len(found.rows),
        "rewritten": len(texts),
        "kept_rules": len(event_ids) - len(texts),
        "statuses": dict(sorted(statuses.items())),
    }
    return ModelRewrites(found.model, texts, record)


def read_event_ids(dataset: Path) -> list[str]:
    """The `text_id`s of DATASET's `events` config, read from its parquet files."""
    folder = Path(dataset) / "data" / "events"
    files = sorted(folder.glob("*.parquet"))
    if not files:
        raise ProbeError(f"DATASET {dataset}: no events config (expected {folder}/*.parquet)")
    return pd.concat([read_parquet(p, ["text_id"], "events config").to_pandas() for p in files])["text_id"].tolist()


@dataclass(frozen=True)
class RewriteResult:
    path: Path
    manifest: dict[str, Any]
    rewrites: ModelRewrites


def apply_rewrites(
    results: Path,
    dataset: Path,
    out_dir: Path,
    *,
    key: str | None = None,
    recipe: str = "intergroup-empathy",
    sources_dir: Path | None = None,
    cache_dir: Path | None = None,
    offline: bool = False,
    overwrite: bool = False,
) -> RewriteResult:
    """Write the version of DATASET whose T2 narratives are the rewrites in RESULTS to `out_dir/<name>` (atomic)."""
    from .build import build

    dataset = Path(dataset)
    # the name differs from the recipe's with --max-events (`intergroup-empathy-events24`)
    manifest, spec = read_built_from(dataset, recipe, flag="DATASET", expected="an intergroup-empathy folder")
    max_events = manifest.get("parameters", {}).get("max_events")
    target = Path(out_dir) / BuildOptions(max_events=max_events).dataset_name(spec.name)
    if target.resolve() == dataset.resolve():
        raise ProbeError(f"--out {out_dir} would replace DATASET {dataset} itself; write the new version elsewhere")
    check_target(target, overwrite=overwrite)
    found = load_key_rows(
        results,
        REWRITE_CONFIG,
        RESULT_COLUMNS,
        key=key,
        hint=f"probes rewrite {dataset} --model M --out DIR (or probes run {dataset} --config {REWRITE_CONFIG} "
        f"--scoring generate --model M --out {results})",
    )
    if found.scoring.get("mode") != "generate":
        raise ProbeError(f"{results}: the {REWRITE_CONFIG} results under key {found.key} were not generated")
    rewrites = compute_rewrites(found, read_event_ids(dataset), results_file=str(results))
    built = build(
        recipe,
        out_dir=Path(out_dir),
        sources_dir=sources_dir,
        cache_dir=cache_dir,
        offline=offline,
        max_events=max_events,
        rewrites=rewrites,
        overwrite=overwrite,
    )
    return RewriteResult(built.path, built.manifest, rewrites)
