"""Results folder -> the next version of a prompt dataset: the steps that need a model's results.

Two datasets have a version that depends on a model's answers, and both are made here, after
`probes run`, by rebuilding the dataset from its recipe with the answers as an extra input
(`promptgen.build.build`), so every writer guarantee holds (atomic, deterministic,
fingerprinted) and publishing makes a new tag:

- `curate_pairs` (`probes curate-pairs`): race-probe results -> the Trust Game's per-model pairs.
- `apply_rewrites` (`probes rewrite`): `rewrite_t2` generations -> the empathy dataset's LLM T2.

This is the one module that reads results (`runners.results`) AND builds (`promptgen.build`);
promptgen itself never imports the runners.

Curated pairs (docs/DESIGN.md section 5, step 7)
----------------------------------------
The I/O edge of step 7 (docs/DESIGN.md section 5); the selection itself is `promptgen.trust_game.curation`.

1. Read `DATASET/data/race_probe/*.parquet` (the items) and one key folder of
   `RESULTS/data/race_probe/<key>/part-*.parquet` (the rows `probes run` wrote), join them
   by `id`, and select the pairs (`compute_curated`).
2. Rebuild the dataset from its recipe and sources with the curated pairs as an extra input
   (`promptgen.build.build(curated_pairs=...)`): configs `pairs_<slug>` and `games_<slug>`.

Why a rebuild and not a copy of DATASET with two configs appended: the one writer that every
build uses then also writes this version, so it is atomic, deterministic (recipe + sources +
curated pairs -> byte-identical files), its fingerprint covers the pairs and their record, and
the card is rendered from the same template with a section per curated model. The version is
`<recipe version>+pairs.<hash>`, so publishing it makes a new tag. Pairs curated earlier are
carried over from DATASET's `pairs_<slug>` configs (checked again on reading), so every
curation adds one model without dropping the others; curating a slug again replaces it.
DATASET must have been built from the same recipe (its sha256 is compared), so the rebuilt
configs are the ones the results were scored on.

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
   (`build(rewrites=...)`), at the same `--max-events` as DATASET, so every writer guarantee
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

import pandas as pd

from promptgen.build import build
from promptgen.core.build_options import BuildOptions
from promptgen.core.errors import ProbeError
from promptgen.core.layout import BUILD_MANIFEST
from promptgen.core.outputs import output_path
from promptgen.empathy.events import REWRITE_CONFIG, rewrite_item_id
from promptgen.empathy.model_rewrites import ModelRewrites
from promptgen.empathy.third_person import RULE_METHOD, parse_rewrite
from promptgen.hub.folder import check_dataset_target, read_built_from
from promptgen.hub.read import config_files, config_folder, read_parquet_files
from promptgen.sources import SourceOptions
from promptgen.trust_game.curation import (
    DEFAULT_PER_GENDER,
    KEY_COLUMNS,
    PAIR_COLUMNS,
    CuratedPairs,
    check_pairs_table,
    check_slug,
    compute_logodds,
    default_slug,
    pairs_config_name,
    select_pairs,
)
from promptgen.trust_game.race_probe import RACE_PROBE_VARIANTS
from runners.backends import require_for_scoring
from runners.prompts import load_prompt_config
from runners.request import LoadOptions, RunRequest
from runners.results import DATA_DIR, KEY_FILE, KeyRows, load_key_rows
from runners.run import run_loaded
from runners.scoring.settings import ScoringSettings
from runners.summary import RunSummary

RACE_PROBE = "race_probe"
PROMPT_COLUMNS = ("id", *KEY_COLUMNS, "race", "variant", "choice_types")
LOGODDS_NOTE = "log P(True) - log P(False) from the summed answer-token log-probabilities (choice_logprobs)"


#: one result key's race-probe rows (`id`, `choice_logprobs`, `file`) and what they were scored with
RaceProbeResults = KeyRows


@dataclass(frozen=True)
class CurateResult:
    path: Path
    manifest: dict[str, Any]
    curated: CuratedPairs
    carried: tuple[str, ...]


# ----------------------------------------------------------------------------- reading


def _read_config(dataset: Path, config: str, columns: list[str], what: str) -> pd.DataFrame:
    """One config of DATASET as a frame (`promptgen.hub.read`), `what` saying why it must have rows."""
    files = config_files(dataset, config)
    if not files:
        raise ProbeError(f"{config_folder(dataset, config)}: no parquet files; {what}")
    return read_parquet_files(files, columns, "prompt config").to_pandas()


def load_race_probe_prompts(dataset: Path) -> pd.DataFrame:
    """The `race_probe` items of a local dataset folder, read from parquet (no `datasets` cache to go stale)."""
    folder = config_folder(dataset, RACE_PROBE)
    if not folder.is_dir():
        raise ProbeError(f"--prompts {dataset}: no {RACE_PROBE} config (expected {folder}/*.parquet)")
    return _read_config(dataset, RACE_PROBE, list(PROMPT_COLUMNS), f"the {RACE_PROBE} config is empty")


def load_race_probe_results(results: Path, *, key: str | None = None) -> RaceProbeResults:
    """The race-probe rows of one result key folder, as `probes run` wrote them.

    `key` names the folder (`<model>-<hash>`) when the results hold several (other models or
    scoring settings); with one folder it may be left out. Sentence scoring is required: step 7
    compares the answer strings `True` / `False`, not label tokens.
    """
    found = load_key_rows(
        results,
        RACE_PROBE,
        ["id", "choice_logprobs"],
        key=key,
        hint=f"probes run DATASET --config {RACE_PROBE} --model M --out {results}",
    )
    if found.scoring.get("choice_mode") != "sentence":
        raise ProbeError(
            f"{Path(results) / DATA_DIR / RACE_PROBE / found.key / KEY_FILE}: choice_mode "
            f"{found.scoring.get('choice_mode')!r}; curation needs sentence scoring "
            "(log-probabilities of the answer strings True / False): rerun with --scoring sentence"
        )
    return found


def load_curated(dataset: Path, manifest: dict[str, Any]) -> list[CuratedPairs]:
    """The curated pairs DATASET already holds, read back from its `pairs_<slug>` configs and checked."""
    out = []
    for slug, record in manifest.get("parameters", {}).get("curated_pairs", {}).items():
        config = pairs_config_name(slug)
        folder = config_folder(dataset, config)
        frame = _read_config(dataset, config, list(PAIR_COLUMNS), f"{BUILD_MANIFEST} lists curated pairs {slug!r}")
        table = check_pairs_table(frame, file=str(folder), per_gender=int(record["per_gender"]))
        out.append(CuratedPairs(slug, table, record))
    return out


# ----------------------------------------------------------------------------- computing


def compute_curated(
    prompts: pd.DataFrame,
    results: RaceProbeResults,
    *,
    model_slug: str,
    variant: str,
    per_gender: int,
    prompts_file: str,
) -> CuratedPairs:
    """Log-odds, selection and the record of one model's curation (no I/O)."""
    if variant not in RACE_PROBE_VARIANTS:
        raise ProbeError(f"--variant must be one of {list(RACE_PROBE_VARIANTS)}, got {variant!r}")
    logodds = compute_logodds(prompts, results.rows, variant=variant, prompts_file=prompts_file)
    selection = select_pairs(logodds.table, per_gender=per_gender)
    record = {
        "model": results.model,
        "model_name": results.model.rstrip("/").split("/")[-1],
        "model_revision": results.model_revision,
        "scoring": results.scoring,
        "results_key": results.key,
        "backend": sorted({str(r.get("backend")) for r in results.runs}),
        "dtype": sorted({str(r.get("dtype")) for r in results.runs}),
        "prompt_fingerprints": sorted({str(r["prompt_dataset"].get("fingerprint")) for r in results.runs}),
        "variant": variant,
        "per_gender": per_gender,
        "logodds": LOGODDS_NOTE,
        "selection": {
            "results": logodds.results,
            "scored_pairs": len(logodds.table),
            "incomplete_pairs": logodds.incomplete,
            "groups": selection.groups,
        },
    }
    if selection.pairs.empty:
        raise ProbeError(
            f"{results.rows['file'].iloc[0] if len(results.rows) else model_slug}: no surname qualifies for any race "
            f"({len(logodds.table)} scored (title, surname) pairs, {logodds.incomplete} incomplete): the model never "
            "gave its seed race the largest log-odds; score more race_probe items (all races of each surname)"
        )
    table = check_pairs_table(selection.pairs, file=pairs_config_name(model_slug), per_gender=per_gender)
    return CuratedPairs(model_slug, table, record)


# ----------------------------------------------------------------------------- the command


def curate_pairs(
    results: Path,
    dataset: Path,
    out_dir: Path,
    *,
    model_slug: str | None = None,
    per_gender: int = DEFAULT_PER_GENDER,
    variant: str = "base",
    key: str | None = None,
    recipe: str = "trust-game",
    sources: SourceOptions | str | Path | None = None,
    overwrite: bool = False,
) -> CurateResult:
    """Curate one model's pairs and write the next version of the dataset to `out_dir/<name>` (atomic)."""
    dataset = Path(dataset)
    manifest, spec = read_built_from(
        dataset, recipe, flag="--prompts", expected="a trust-game-names folder", same_name=True
    )
    inputs = [
        ("RESULTS", results),
        ("--prompts", dataset),
        *SourceOptions.of(sources).references(),
    ]
    check_dataset_target(output_path(out_dir, "--out") / spec.name, overwrite=overwrite, inputs=inputs)
    if per_gender < 1:
        raise ProbeError(f"--per-gender must be positive, got {per_gender}")
    found = load_race_probe_results(results, key=key)
    model_slug = check_slug(model_slug if model_slug is not None else default_slug(found.model))
    prompts = load_race_probe_prompts(dataset)
    curated = compute_curated(
        prompts,
        found,
        model_slug=model_slug,
        variant=variant,
        per_gender=per_gender,
        prompts_file=str(dataset / "data" / RACE_PROBE),
    )
    carried = [c for c in load_curated(dataset, manifest) if c.slug != model_slug]
    built = build(
        recipe,
        out_dir=Path(out_dir),
        sources=sources,
        curated_pairs=[*carried, curated],
        overwrite=overwrite,
    )
    return CurateResult(built.path, built.manifest, curated, tuple(c.slug for c in carried))


# ----------------------------------------------------------------------------- third-person rewrites

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
    files = config_files(dataset, "events")
    if not files:
        raise ProbeError(f"DATASET {dataset}: no events config (expected {config_folder(dataset, 'events')}/*.parquet)")
    return read_parquet_files(files, ["text_id"], "events config").column("text_id").to_pylist()


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
    sources: SourceOptions | str | Path | None = None,
    overwrite: bool = False,
) -> RewriteResult:
    """Write the version of DATASET whose T2 narratives are the rewrites in RESULTS to `out_dir/<name>` (atomic)."""
    dataset = Path(dataset)
    # the name differs from the recipe's with --max-events (`intergroup-empathy-events24`)
    manifest, spec = read_built_from(dataset, recipe, flag="DATASET", expected="an intergroup-empathy folder")
    max_events = manifest.get("parameters", {}).get("max_events")
    target = output_path(out_dir, "--out") / BuildOptions(max_events=max_events).dataset_name(spec.name)
    inputs = [
        ("--results", results),
        ("DATASET", dataset),
        *SourceOptions.of(sources).references(),
    ]
    check_dataset_target(target, overwrite=overwrite, inputs=inputs)
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
        rewrites=rewrites,
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
        prompts = load_prompt_config(str(dataset), REWRITE_CONFIG)
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
        hooks = {"on_start": on_start, "on_advance": on_advance, "on_warning": on_warning}
        (generation,) = run_loaded([prompts], [request], **hooks)
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
