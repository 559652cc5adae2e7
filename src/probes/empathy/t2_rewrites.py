"""`rewrite_t2` generations -> the empathy dataset's LLM T2 (`probes rewrite`): the empathy probe's own step that
needs a model's answers, at the I/O edge (it scores with `runners.run.runner.Runner`, reads results with
`runners.results` and rebuilds with `promptgen.build`; promptgen itself never imports the runners).

Third-person rewrites (docs/DESIGN.md section 4)
----------------------------------------
The LLM half of docs/DESIGN.md section 4's T2 narratives. The dataset ships one free-text item per
event in its `rewrite_t2` config (the paper's 1-shot prompt, stop string `}`); any model
generates them with the runners, into an ordinary, resumable results folder:

    probes run DATASET --config rewrite_t2 --scoring generate --max-new-tokens 96 --model M --out R

(`probes rewrite --model M` runs exactly that first). This module is the other edge:

1. Read one key folder of `R/data/rewrite_t2/` and cut each generation at the first `}`
   (`promptgen.empathy.third_person.parse_rewrite`). A generation the runner marked anything but `ok` (no closing
   brace before the length limit, or empty) is not used: that event keeps the rule-based
   T2, and the count per status is recorded, so a weak model never puts a truncated
   sentence into the dataset silently.
2. Rebuild the dataset from its recipe and sources with the rewrites as an extra input
   (`build(derived={REWRITES: ...})`), at the same `--max-events` as DATASET, so every writer guarantee
   holds (atomic, deterministic, fingerprinted). Rewritten events get `t2_method` = the
   model id; the version is `<recipe version>+t2.<hash of model, key and texts>`, so
   publishing it makes a new tag, and the T2 prompt configs carry the new narratives.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptgen.build import build, check_new_version
from promptgen.core.errors import ProbeError
from promptgen.core.outputs import output_path
from promptgen.empathy.events import REWRITE_CONFIG, rewrite_item_id
from promptgen.empathy.model_rewrites import ModelRewrites
from promptgen.empathy.spec import REWRITES
from promptgen.empathy.third_person import RULE_METHOD, parse_rewrite
from promptgen.hub.read import config_files, config_folder, read_parquet_files
from promptgen.sources import SourceOptions
from runners.backends import require_for_scoring
from runners.results import KeyRows, load_key_rows
from runners.results.summary import RunSummary
from runners.run.request import LoadOptions, RunRequest
from runners.run.runner import Runner, resolve_protocol
from runners.scoring.settings import ScoringSettings

REWRITE_RESULT_COLUMNS = ("id", "generated_text", "parse_status", "finish_reason")


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
        if status == "ok" and text is not None:  # "ok" with no text is "no_answer", above
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
    files = config_files(dataset, "events")
    if not files:
        raise ProbeError(f"DATASET {dataset}: no events config (expected {config_folder(dataset, 'events')}/*.parquet)")
    return read_parquet_files(files, ["text_id"], "events config").column("text_id").to_pylist()


@dataclass(frozen=True)
class RewriteResult:
    path: Path
    manifest: dict[str, Any]
    rewrites: ModelRewrites


def _version_target(results: Path, dataset: Path, out_dir: Path, recipe: str, sources: Any, overwrite: bool) -> dict:
    """DATASET's build manifest, once its recipe and the new version's `out_dir/<name>` are checked
    (`check_new_version`): before `probes rewrite --model` generates, and again before the version is written."""
    manifest, _ = check_new_version(
        dataset, recipe, out_dir, inputs=[("--results", results), ("DATASET", dataset)], sources=sources,
        overwrite=overwrite, flag="DATASET", expected="an intergroup-empathy folder",
    )  # fmt: skip
    return manifest


def apply_rewrites(
    results: Path,
    dataset: Path,
    out_dir: Path,
    *,
    key: str | None = None,
    recipe: str = "intergroup-empathy",
    sources: SourceOptions | str | Path | None = None,
    overwrite: bool = False,
) -> RewriteResult:
    """Write the version of DATASET whose T2 narratives are the rewrites in RESULTS to `out_dir/<name>` (atomic)."""
    dataset = Path(dataset)
    manifest = _version_target(results, dataset, out_dir, recipe, sources, overwrite)
    max_events = manifest.get("parameters", {}).get("max_events")  # the new version is built at the same
    found = load_key_rows(
        results,
        REWRITE_CONFIG,
        REWRITE_RESULT_COLUMNS,
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
        sources=sources,
        max_events=max_events,
        derived={REWRITES: rewrites},
        overwrite=overwrite,
    )
    return RewriteResult(built.path, built.manifest, rewrites)


@dataclass(frozen=True)
class RewriteRun:
    """`probes rewrite`: the generation run (None when the results were made before) and the new version."""

    generation: RunSummary | None
    result: RewriteResult


def rewrite(
    dataset: Path,
    out_dir: Path,
    *,
    model: str | None = None,
    results: Path | None = None,
    key: str | None = None,
    load: LoadOptions | None = None,
    model_name: str | None = None,
    chat: bool = False,
    limit: int | None = None,
    batch_size: int | None = None,
    flush_every: int = 64,
    max_new_tokens: int = 96,
    recipe: str = "intergroup-empathy",
    sources: SourceOptions | str | Path | None = None,
    overwrite: bool = False,
    on_start: Callable[[int, int], None] | None = None,
    on_advance: Callable[[int], None] | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> RewriteRun:
    """With `model`, generate DATASET's `rewrite_t2` items into `results` first (greedy, resumable, as
    `probes run --config rewrite_t2 --scoring generate`); then write the version with those rewrites.

    `results` defaults to `out_dir/<dataset name>-rewrites`; `key` picks the result key when
    `results` holds several (after a generation, the one just written).
    """
    out_dir = output_path(out_dir, "--out")  # before any generation: an empty --out is the current folder
    results = Path(results) if results is not None else out_dir / f"{Path(dataset).name}-rewrites"
    generation = None
    if model is not None:
        load = load or LoadOptions()
        require_for_scoring(backend=load.backend, what="probes rewrite --model")
        if not (Path(dataset) / "data" / REWRITE_CONFIG).is_dir():
            raise ProbeError(
                f"DATASET {dataset} has no {REWRITE_CONFIG} config; rebuild it with this version of probes build"
            )
        # the version's target before the generation, so an --out it may not take costs no model load
        _version_target(results, Path(dataset), out_dir, recipe, sources, overwrite)
        settings = ScoringSettings(mode="generate", temperature=0.0, max_new_tokens=max_new_tokens)
        request = RunRequest(
            dataset,
            REWRITE_CONFIG,
            model,
            results,
            model_name=model_name,
            load=load,
            settings=settings,
            chat=chat,
            limit=limit,
            batch_size=batch_size,
            flush_every=flush_every,
        )
        resolved = resolve_protocol(request)  # every check that needs no model, before the load
        with Runner.load(model, load, sized_for=[resolved], on_warning=on_warning) as runner:
            generation = runner.run(resolved, on_start=on_start, on_advance=on_advance)
        key = key or generation.key_dir.name
    elif limit is not None:
        raise ProbeError("--limit applies to generation; give --model too")
    result = apply_rewrites(
        results,
        dataset,
        out_dir,
        key=key,
        recipe=recipe,
        sources=sources,
        overwrite=overwrite,
    )
    return RewriteRun(generation, result)
