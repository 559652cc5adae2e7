"""Race-probe results -> the Trust Game's per-model pairs (`probes curate-pairs`): the trust game's own step
that needs a model's results, at the I/O edge (it reads results with `runners.results` and rebuilds with
`promptgen.build`; promptgen itself never imports the runners).

Curated pairs (docs/DESIGN.md section 5, step 7)
----------------------------------------
The I/O edge of step 7 (docs/DESIGN.md section 5); the selection itself is `promptgen.trust_game.curation`.

1. Read `DATASET/data/race_probe/*.parquet` (the items) and one key folder of
   `RESULTS/data/race_probe/<key>/part-*.parquet` (the rows `probes run` wrote), join them
   by `id`, and select the pairs (`compute_curated`).
2. Rebuild the dataset from its recipe and sources with the curated pairs as an extra input
   (`promptgen.build.build(derived={CURATED_PAIRS: ...})`): configs `pairs_<slug>` and `games_<slug>`.

Why a rebuild and not a copy of DATASET with two configs appended: the one writer that every
build uses then also writes this version, so it is atomic, deterministic (recipe + sources +
curated pairs -> byte-identical files), its fingerprint covers the pairs and their record, and
the card is rendered from the same template with a section per curated model. The version is
`<recipe version>+pairs.<hash>`, so publishing it makes a new tag. Pairs curated earlier are
carried over from DATASET's `pairs_<slug>` configs (checked again on reading), so every
curation adds one model without dropping the others; curating a slug again replaces it.
DATASET must have been built from the same recipe (its sha256 is compared), so the rebuilt
configs are the ones the results were scored on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from promptgen.build import build, check_new_version
from promptgen.core.errors import ProbeError
from promptgen.core.layout import BUILD_MANIFEST
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
from promptgen.trust_game.spec import CURATED_PAIRS
from runners.results import DATA_DIR, KEY_FILE, KeyRows, load_key_rows

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
    manifest, _ = check_new_version(
        dataset, recipe, out_dir, inputs=[("RESULTS", results), ("--prompts", dataset)], sources=sources,
        overwrite=overwrite, flag="--prompts", expected="a trust-game-names folder", same_name=True,
    )  # fmt: skip
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
        derived={CURATED_PAIRS: (*carried, curated)},
        overwrite=overwrite,
    )
    return CurateResult(built.path, built.manifest, curated, tuple(c.slug for c in carried))
