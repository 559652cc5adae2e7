"""Prompt and result datasets -> pandas frames, and the one join every probe's analysis starts from.

Both kinds of dataset are read either from a local Hub-ready folder or from a Hub repo id at a
revision. Local folders are read as parquet directly: `datasets` keys its cache of a local
folder by the folder's name, so a rebuilt or re-run folder could come back with stale rows.
Hub repos go through `datasets.load_dataset(..., revision=...)`, which is what a reader of the
published data does.

Result rows carry their key (model, model revision, scoring settings) and where they were read
from (`results_file`), so a bad join names the file to look at.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from promptgen.core.contract import TASK_COLUMNS
from promptgen.core.errors import ProbeError, dataset_load_errors
from promptgen.hub import remote
from promptgen.hub.read import local_folder as _local_folder  # one rule for a local folder or a Hub repo id
from promptgen.hub.read import read_build_manifest, read_config, read_config_rows
from runners.results import (
    DATA_DIR,
    MANIFEST_NAME,
    PROMPT_FIELDS,
    RESULT_SCHEMA,
    ResultKey,
    check_manifest_shape,
    key_folders,
    missing_columns,
    part_files,
    prompt_sha256,
    read_key_rows,
)
from runners.results import read_manifest as read_results_manifest
from runners.scoring.parse import FIRST_INTEGER_MAX

from .columns import CORE_RESULT_COLUMNS, RESULT_FILE_COLUMN, RESULT_KEY_COLUMN, RUN_COLUMNS


def _from_hub(repo: str, config: str, revision: str | None, columns: Sequence[str] | None, what: str) -> pd.DataFrame:
    import datasets

    try:
        ds = datasets.load_dataset(repo, config, split="test", revision=revision)
    except dataset_load_errors() as exc:
        raise ProbeError(f"cannot load config {config!r} of {what} {repo} (revision {revision}): {exc}") from exc
    if columns is not None:
        missing = [c for c in columns if c not in ds.column_names]
        if missing:
            raise ProbeError(f"{what} {repo} config {config!r} has no column(s) {', '.join(missing)}")
        ds = ds.select_columns(list(columns))
    return ds.to_pandas()


def load_prompts(
    dataset: str | Path,
    config: str,
    *,
    revision: str | None = None,
    columns: Sequence[str] | None = None,
    ids: Sequence[str] | None = None,
) -> pd.DataFrame:
    """One config (split `test`) of a prompt dataset: a local Hub-ready folder or a Hub repo id.

    `columns` limits what is read (the prompt texts are large and analysis rarely needs them);
    `ids` keeps only those items, filtered in Arrow before any pandas frame is made: a small run
    on a config of millions of rows (`actor_actor_release`: 2.97 M) then costs its own rows.
    """
    folder = _local_folder(dataset, "prompt dataset")
    if folder is None:
        frame = _from_hub(str(dataset), config, revision, columns, "prompt dataset")
        return frame if ids is None else frame[frame["id"].isin(set(ids))].reset_index(drop=True)
    if revision is not None:
        raise ProbeError(f"prompt dataset {dataset} is a local folder; --revision applies to Hub repos only")
    if ids is not None:  # only these rows are read into memory (a few rows of a config of millions)
        return read_config_rows(folder, config, ids, columns, "prompt config").to_pandas()
    return read_config(folder, config, columns, "prompt config").to_pandas()


def load_results(results: str | Path, config: str, *, revision: str | None = None) -> pd.DataFrame:
    """Every result row of one config, all keys (models x settings) together.

    Adds `result_key` (the key folder's slug, recomputed from the row so Hub and local reads
    agree) and `results_file` (the part file, or `repo@revision:config` for the Hub). Two rows
    for the same item under the same key are an error: one of them would silently win.
    """
    folder = _local_folder(results, "results")
    if folder is None:
        frame = _from_hub(str(results), config, revision, None, "results")
        frame[RESULT_FILE_COLUMN] = f"{results}@{revision or 'main'}:{config}"
    else:
        if revision is not None:
            raise ProbeError(f"results {results} is a local folder; --revision applies to Hub repos only")
        key_dirs = key_folders(folder, config)
        if not key_dirs:
            raise ProbeError(f"{folder / DATA_DIR / config}: no result parts (part-*.parquet) for config {config!r}")
        for path in (p for d in key_dirs for p in part_files(d)):
            missing = missing_columns(path, CORE_RESULT_COLUMNS)
            if missing:
                raise ProbeError(f"{path}: not a result part, missing column(s) {', '.join(missing)}")
        # one row per id and key: where a key's parts repeat an id, the newest part wins (runners.results)
        tables = [read_key_rows(d, file_column=RESULT_FILE_COLUMN) for d in key_dirs]
        frame = pa.concat_tables(tables, promote_options="default").to_pandas()
    missing = [c for c in CORE_RESULT_COLUMNS if c not in frame.columns]
    if missing:
        raise ProbeError(f"results {results} config {config!r}: missing result column(s) {', '.join(missing)}")
    for name in RESULT_SCHEMA.names:
        if name not in frame.columns:
            frame[name] = None
    runs = frame[list(RUN_COLUMNS)].drop_duplicates()
    slugs = {tuple(run): ResultKey(*run).slug for run in runs.itertuples(index=False)}
    frame[RESULT_KEY_COLUMN] = [slugs[run] for run in zip(*(frame[c] for c in RUN_COLUMNS), strict=True)]
    _check_ids_present(frame)
    _check_unique_results(frame)
    check_probabilities(frame)
    return frame


#: result columns that hold probabilities: each value in [0, 1], each distribution summing to 1
DISTRIBUTION_COLUMNS = ("choice_probs", "number_probs")
PROBABILITY_COLUMNS = (*DISTRIBUTION_COLUMNS, "valid_mass")
#: slack for float rounding (a renormalised float64 distribution sums to 1 within ~1e-15)
PROBABILITY_TOLERANCE = 1e-6


def check_probabilities(frame: pd.DataFrame) -> None:
    """Refuse result rows whose probabilities cannot be probabilities, naming file, row id and column.

    A value outside [0, 1] or a distribution that does not sum to 1 moves every metric built on
    it (the attribution d by up to 104 in a tampered folder) without any error downstream. NaN is
    the runners' record of "cannot be computed" (e.g. a distribution with no valid mass, always
    refused; `valid_mass` in sentence mode) and is accepted there; a NaN in the distribution of
    an item that is not refused is a value missing where the metrics need one.
    """
    refused = frame["refused"].fillna(False).astype(bool).to_numpy() if "refused" in frame.columns else None
    for column in PROBABILITY_COLUMNS:
        if column not in frame.columns:
            continue
        values = frame[column]
        present = np.flatnonzero(values.notna().to_numpy())
        if not len(present):
            continue
        if column in DISTRIBUTION_COLUMNS:
            cells = [np.asarray(values.iloc[i], dtype="float64") for i in present]
            lengths = np.array([len(c) for c in cells])
            flat = np.concatenate(cells) if cells else np.empty(0)
            row_of = np.repeat(present, lengths)
        else:
            flat = values.to_numpy(dtype="float64")[present]
            row_of = present
        with np.errstate(invalid="ignore"):
            outside = (flat < -PROBABILITY_TOLERANCE) | (flat > 1 + PROBABILITY_TOLERANCE)
        if outside.any():
            k = int(np.flatnonzero(outside)[0])
            count = f"{int(outside.sum())} such values"
            _bad_value(frame, int(row_of[k]), column, f"value {float(flat[k])!r} is outside [0, 1]", count)
        if column not in DISTRIBUTION_COLUMNS:
            continue
        nan = np.isnan(flat)
        if refused is not None:
            nan &= ~refused[row_of]
        if nan.any():
            k = int(np.flatnonzero(nan)[0])
            problem = "NaN in the distribution of an item that is not refused"
            _bad_value(frame, int(row_of[k]), column, problem, f"{int(nan.sum())} such values")
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(int)
        with np.errstate(invalid="ignore"):
            sums = np.add.reduceat(flat, starts) if len(flat) else np.empty(0)
        off = (lengths > 0) & ~np.isnan(sums) & (np.abs(sums - 1) > PROBABILITY_TOLERANCE * np.maximum(lengths, 1))
        if off.any():
            k = int(np.flatnonzero(off)[0])
            _bad_value(
                frame, int(present[k]), column, f"sums to {float(sums[k])!r}, not 1", f"{int(off.sum())} such rows"
            )


def _bad_value(frame: pd.DataFrame, row: int, column: str, problem: str, count: str) -> None:
    file = frame[RESULT_FILE_COLUMN].iloc[row] if RESULT_FILE_COLUMN in frame.columns else "results"
    raise ProbeError(f"{file}: row id {frame['id'].iloc[row]!r}, column {column!r}: {problem} ({count} in this config)")


def _check_ids_present(frame: pd.DataFrame) -> None:
    """A result row without an id belongs to no item: refused, naming its file."""
    null = frame["id"].isna().to_numpy()
    if null.any():
        row = int(np.flatnonzero(null)[0])
        file = frame[RESULT_FILE_COLUMN].iloc[row] if RESULT_FILE_COLUMN in frame.columns else "results"
        count = int(null.sum())
        raise ProbeError(f"{file}: row {row}, column 'id': null ({count} such rows); every row needs its item id")


def _check_unique_results(frame: pd.DataFrame) -> None:
    dup = frame.duplicated([RESULT_KEY_COLUMN, "id"], keep=False)
    if dup.any():
        rows = frame.loc[dup]
        files = sorted(set(rows[RESULT_FILE_COLUMN].astype(str)))
        raise ProbeError(
            f"{int(dup.sum())} result rows share an item id under one key (e.g. {rows['id'].iloc[0]!r}) "
            f"in {', '.join(files[:5])}; remove the duplicate part(s)"
        )


def hub_ref(source: str | Path, revision: str | None, what: str) -> remote.HubRef | None:
    """A Hub repo's revision resolved to its commit, once per source (`promptgen.hub.remote.resolve`);
    None for a local folder. Every read of that source (rows, manifests) is then at the commit."""
    if _local_folder(source, what) is not None:
        return None
    return remote.resolve(str(source), revision, what)


def load_results_manifest(results: str | Path, ref: remote.HubRef | None = None) -> dict[str, Any]:
    """results_manifest.json of a results folder, or of a Hub results repo at `ref`'s commit; {} when absent."""
    if ref is None:
        return read_results_manifest(Path(results).expanduser())
    manifest = remote.read_json_file(ref, MANIFEST_NAME, "results") or {}
    check_manifest_shape(Path(ref.label) / MANIFEST_NAME, manifest)
    return manifest


def load_prompts_manifest(prompts: str | Path, ref: remote.HubRef | None = None) -> dict[str, Any]:
    """build_manifest.json of a prompt dataset folder, or of a Hub dataset at `ref`'s commit; {} when absent."""
    if ref is None:
        return read_build_manifest(Path(prompts).expanduser())
    return remote.read_build_manifest(ref) or {}


def join(
    prompts: pd.DataFrame, results: pd.DataFrame, *, require: Sequence[str] = (), drop: Sequence[str] = ()
) -> pd.DataFrame:
    """Result rows with their prompt's columns (by `id`), one row per result row.

    Prompts without results are left out (a partial run is valid). A result id that is not
    in the prompts means the results belong to another config or prompt revision: that is an
    error naming the results file(s), never a silent drop; so is a row scored on another prompt
    than the one its id has now (`check_prompt_hashes`) and a value outside its item's range
    (`check_result_values`). `require` lists columns the caller needs in the joined frame;
    `drop` lists prompt columns it does not, left out once the prompt hashes are checked (the
    prompt texts are read for that check, not copied into every joined row).
    """
    where = _files(results)
    for name, frame in (("prompts", prompts), ("results", results)):
        if "id" not in frame.columns:
            raise ProbeError(f"{name} frame has no `id` column" + (f" ({where})" if name == "results" else ""))
    if prompts["id"].duplicated().any():
        raise ProbeError(f"prompt ids are not unique (e.g. {prompts.loc[prompts['id'].duplicated(), 'id'].iloc[0]!r})")
    shared = sorted((set(prompts.columns) & set(results.columns)) - {"id"})
    if shared:
        raise ProbeError(f"prompts and results ({where}) both have column(s) {', '.join(shared)}")
    missing = [c for c in require if c not in prompts.columns and c not in results.columns]
    if missing:
        raise ProbeError(f"joined prompts and results ({where}) lack required column(s) {', '.join(missing)}")
    unknown = ~results["id"].isin(prompts["id"])
    if unknown.any():
        bad = results.loc[unknown]
        examples = ", ".join(repr(i) for i in bad["id"].drop_duplicates().head(3))
        raise ProbeError(
            f"{_files(bad)}: {int(unknown.sum())} result id(s) not in the prompt config (e.g. {examples}); "
            "wrong config or prompt dataset revision?"
        )
    check_prompt_hashes(prompts, results)
    prompts = prompts.drop(columns=[c for c in drop if c in prompts.columns])
    joined = prompts.merge(results, on="id", how="inner", validate="one_to_many", sort=False).reset_index(drop=True)
    check_result_values(joined)
    return joined


def _files(results: pd.DataFrame) -> str:
    if RESULT_FILE_COLUMN not in results.columns or results.empty:
        return "results frame"
    files = sorted(set(results[RESULT_FILE_COLUMN].astype(str)))
    return ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")


#: the result column holding the hash of the prompt a row was scored on (`runners.results.prompt_sha256`)
PROMPT_HASH_COLUMN = "prompt_sha256"


def check_prompt_hashes(prompts: pd.DataFrame, results: pd.DataFrame) -> None:
    """Refuse result rows scored on another prompt than `prompts` holds for their id.

    Ids derive from an item's factors, not its text: a rebuilt dataset with its options
    reordered keeps them, and only each row's `prompt_sha256` tells. Results read from the Hub,
    or from a folder without results_manifest.json, have no fingerprint to compare, so this
    check runs always. Only the prompt rows the results name are hashed (about 10 us a row), so a
    demo-sized run costs milliseconds whatever the config's size. Rows without a hash (hand-made
    results; `probes run` has written one in every row since results were keyed) cannot be
    checked and pass.
    """
    if PROMPT_HASH_COLUMN not in results.columns:
        return
    checked = results[PROMPT_HASH_COLUMN].notna().to_numpy()
    if not checked.any():
        return
    ids = results["id"].to_numpy()[checked]
    subset = prompts[prompts["id"].isin(pd.unique(ids))]
    _require_hashed_columns(subset, results)
    current = dict(zip(subset["id"], item_hashes(subset), strict=True))
    differ = np.array([current.get(i) for i in ids], dtype=object) != results[PROMPT_HASH_COLUMN].to_numpy()[checked]
    if differ.any():
        rows = np.flatnonzero(checked)[differ]
        _bad_value(
            results,
            int(rows[0]),
            PROMPT_HASH_COLUMN,
            "scored on another prompt than the prompt config holds for this id (its text, options or range "
            "changed); analyse it with the prompts it was scored on, or rerun the model on these prompts",
            f"{len(rows)} such rows",
        )


def _require_hashed_columns(prompts: pd.DataFrame, results: pd.DataFrame) -> None:
    tasks = set(prompts["task"].dropna()) if "task" in prompts.columns else set()
    needed = ["task", "prompt", "messages", *(c for t in sorted(tasks) for c in TASK_COLUMNS.get(str(t), ()))]
    missing = [c for c in needed if c not in prompts.columns]
    if missing:
        raise ProbeError(
            f"cannot check the prompt_sha256 of {_files(results)}: the prompt frame lacks column(s) "
            f"{', '.join(missing)}; read the prompt config with all its columns"
        )


def item_hashes(prompts: pd.DataFrame) -> list[str]:
    """`runners.results.prompt_sha256` of each prompt row, from the frame `load_prompts` returns.

    pandas holds lists as arrays and nullable integers as floats; `_plain` turns them back into
    the Python values the runners hashed, so the digests are the runners' own.
    """
    columns = [_column_values(prompts[f]) if f in prompts.columns else [None] * len(prompts) for f in PROMPT_FIELDS]
    return [prompt_sha256(dict(zip(PROMPT_FIELDS, values, strict=True))) for values in zip(*columns, strict=True)]


def _column_values(column: pd.Series) -> list[Any]:
    """A prompt column's cells as plain Python values, converted per column where its dtype allows."""
    if column.dtype.kind in "iub":
        return column.tolist()
    return [_plain(v) for v in column.tolist()]


def _plain(value: Any) -> Any:
    """A pandas cell as the Python value Arrow gave the runners (lists, dicts, ints, None)."""
    if isinstance(value, str):
        return value
    if value is None or value is pd.NA:
        return None
    if isinstance(value, np.ndarray | list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, float | np.floating):
        if math.isnan(value):
            return None
        return int(value) if float(value).is_integer() else float(value)
    return value


#: result columns holding a number answer, each within its item's [number_min, number_max]
NUMBER_ANSWER_COLUMNS = ("expected_value", "argmax_value", "parsed_value")
#: result columns holding a choice answer, each an index into its item's options
CHOICE_ANSWER_COLUMNS = ("chosen_index", "parsed_value")
ANSWER_COLUMNS = tuple(dict.fromkeys((*NUMBER_ANSWER_COLUMNS, *CHOICE_ANSWER_COLUMNS)))


def check_result_values(joined: pd.DataFrame) -> None:
    """Refuse answers that cannot be answers to their item, naming file, row id and column.

    A number answer outside its item's range (an expected value of 1e6 on a 0-100 item made a
    cell mean 62,504), a choice index past the options, and a choice item scored (not generated)
    and not refused whose `choice_probs` is null or has another length than its options: each
    would move or drop a metric without any error downstream.
    """
    task = joined["task"].to_numpy() if "task" in joined.columns else np.full(len(joined), None)
    refused = np.zeros(len(task), bool)
    if "refused" in joined.columns:
        refused = joined["refused"].fillna(False).astype(bool).to_numpy()
    # a generated answer outside the range is kept as parsed and the row refused (`runners.scoring.parse`)
    answered = {column: ~refused if column == "parsed_value" else True for column in ANSWER_COLUMNS}
    if {"number_min", "number_max"} <= set(joined.columns):
        number = task == "number"
        low = pd.to_numeric(joined["number_min"], errors="coerce").to_numpy(dtype="float64")
        high = pd.to_numeric(joined["number_max"], errors="coerce").to_numpy(dtype="float64")
        parsed_high = high
        if "scoring" in joined.columns:
            # the empathy authors' rule accepts 0-100 on every scale ("70" on the 10-point scale is 70):
            # rows parsed by it may hold up to its own bound (`runners.scoring.parse.FIRST_INTEGER_MAX`)
            wide = {s: _number_parser(s) == "first-integer" for s in pd.unique(joined["scoring"])}
            first = joined["scoring"].map(wide).fillna(False).astype(bool).to_numpy()
            parsed_high = np.where(first, np.maximum(high, FIRST_INTEGER_MAX), high)
        for column in NUMBER_ANSWER_COLUMNS:
            rows = number & answered[column]
            top = parsed_high if column == "parsed_value" else high
            _refuse_outside(joined, column, rows, low, top, "of its item (number_min, number_max)")
        _check_number_probs(joined, number, low)
    _check_refused(joined, refused)
    if "choices" not in joined.columns:
        return
    choice = task == "choice"
    n_options = np.array([len(c) if c is not None else 0 for c in joined["choices"]], dtype="float64")
    for column in CHOICE_ANSWER_COLUMNS:
        rows = choice & answered[column]
        _refuse_outside(joined, column, rows, np.zeros(len(joined)), n_options - 1, "of its item's options")
    if "choice_probs" not in joined.columns:
        return
    generated: Any = False
    if "scoring" in joined.columns:  # one JSON parse per distinct scoring, not per row
        by_scoring = {s: _generated(s) for s in pd.unique(joined["scoring"])}
        generated = joined["scoring"].map(by_scoring).fillna(True).astype(bool).to_numpy()
    lengths = np.array([len(p) if p is not None else -1 for p in joined["choice_probs"]], dtype="float64")
    scored = choice & ~refused & ~generated
    missing = scored & (lengths < 0)
    if missing.any():
        row = int(np.flatnonzero(missing)[0])
        problem = "null on a choice item that is scored and not refused"
        _bad_value(joined, row, "choice_probs", problem, f"{int(missing.sum())} such rows")
    wrong = choice & (lengths >= 0) & (lengths != n_options)
    if wrong.any():
        row = int(np.flatnonzero(wrong)[0])
        problem = f"has {int(lengths[row])} values, its item {int(n_options[row])} options"
        _bad_value(joined, row, "choice_probs", problem, f"{int(wrong.sum())} such rows")


def _refuse_outside(
    frame: pd.DataFrame, column: str, rows: np.ndarray, low: np.ndarray, high: np.ndarray, what: str
) -> None:
    if column not in frame.columns:
        return
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype="float64")
    with np.errstate(invalid="ignore"):
        bad = rows & ~np.isnan(values) & ((values < low) | (values > high) | np.isinf(values))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        problem = f"value {float(values[row])!r} is outside [{low[row]:g}, {high[row]:g}] {what}"
        _bad_value(frame, row, column, problem, f"{int(bad.sum())} such rows")


#: how far a stored expected value may be from the one its `number_probs` give (float32 storage, 0-100)
NUMBER_TOLERANCE = 1e-4


def _check_number_probs(joined: pd.DataFrame, number: np.ndarray, low: np.ndarray, *, chunk: int = 65_536) -> None:
    """A number row's `expected_value` and `argmax_value` are those of its own `number_probs`: recomputed here
    (vectorised, rows of one range length at a time), a contradiction (an edited or mixed-up row) is refused."""
    columns = [c for c in ("expected_value", "argmax_value") if c in joined.columns]
    if "number_probs" not in joined.columns or not columns:
        return
    probs = joined["number_probs"].to_numpy()
    lengths = np.fromiter((len(v) if v is not None else 0 for v in probs), dtype=np.int64, count=len(probs))
    stored = {c: pd.to_numeric(joined[c], errors="coerce").to_numpy(dtype="float64") for c in columns}
    for length in np.unique(lengths[number & (lengths > 0)]):
        rows = np.flatnonzero(number & (lengths == length))
        for start in range(0, len(rows), chunk):
            at = rows[start : start + chunk]
            p = np.asarray(np.stack([np.asarray(v, dtype="float64") for v in probs[at]]), dtype="float64")
            usable = np.isfinite(p).all(axis=1) & (p.sum(axis=1) > 0)
            values = low[at][:, None] + np.arange(length)[None, :]
            with np.errstate(invalid="ignore", divide="ignore"):
                expected = (values * p).sum(axis=1) / p.sum(axis=1)
            scale = np.maximum(1.0, np.abs(values).max(axis=1))
            for column in columns:
                got = stored[column][at]
                check = usable & ~np.isnan(got)
                if column == "expected_value":
                    bad = check & ~(np.abs(got - expected) <= NUMBER_TOLERANCE * scale)
                else:
                    k = np.clip(np.rint(got - low[at]), 0, length - 1).astype(np.int64)
                    in_range = (got - low[at] >= 0) & (got - low[at] <= length - 1)
                    top = p[np.arange(len(at)), k] >= p.max(axis=1) - 1e-9
                    bad = check & ~(in_range & top)
                if bad.any():
                    b = int(np.flatnonzero(bad)[0])
                    want = expected[b] if column == "expected_value" else values[b, int(np.argmax(p[b]))]
                    what = "expected value" if column == "expected_value" else "most probable number"
                    problem = f"{got[b]:.6g} is not the {what} {want:.6g} of its number_probs"
                    _bad_value(joined, int(at[b]), column, problem, f"{int(bad.sum())} such rows in a batch")


def _check_refused(joined: pd.DataFrame, refused: np.ndarray) -> None:
    """A scored row's `refused` is the refusal rule (`runners.scoring.distributions.refused_by_mass`) applied to its
    `valid_mass` under its own scoring's threshold: a contradiction is refused, naming the row."""
    if "valid_mass" not in joined.columns or "scoring" not in joined.columns or "refused" not in joined.columns:
        return
    from runners.scoring.distributions import refused_mask

    thresholds = {s: _threshold(s) for s in pd.unique(joined["scoring"])}
    threshold = joined["scoring"].map(thresholds).to_numpy(dtype="float64")
    mass = pd.to_numeric(joined["valid_mass"], errors="coerce").to_numpy(dtype="float64")
    bound = np.zeros(len(joined))
    if "number_bound" in joined.columns:
        bound = pd.to_numeric(joined["number_bound"], errors="coerce").fillna(0.0).to_numpy(dtype="float64")
    checked = ~np.isnan(mass) & ~np.isnan(threshold) & pd.notna(joined["refused"]).to_numpy()
    with np.errstate(invalid="ignore"):
        want = refused_mask(mass, threshold, bound)
        # bounded rows scored before the interval rule were refused on their resolved mass alone: still consistent
        earlier = (bound > 0) & (refused == (mass < threshold))
    bad = checked & (refused != want) & ~earlier
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        problem = (
            f"{bool(refused[row])} contradicts its valid_mass {mass[row]:.6g} under its scoring's refusal "
            f"threshold {threshold[row]:g} (refused means below it)"
        )
        _bad_value(joined, row, "refused", problem, f"{int(bad.sum())} such rows")


def _threshold(scoring: Any) -> float:
    """The refusal threshold of a row's scoring settings; NaN when they read no distribution (or are unknown)."""
    try:
        settings = json.loads(scoring)
    except (TypeError, ValueError):
        return float("nan")
    if not isinstance(settings, dict) or settings.get("mode") == "generate":
        return float("nan")
    value = settings.get("refusal_threshold", 0.5)
    return float(value) if isinstance(value, int | float) else float("nan")


def _number_parser(scoring: Any) -> Any:
    """The rule a row's generated numbers were read by (None: not a generation key)."""
    try:
        return json.loads(scoring).get("number_parser")
    except (TypeError, ValueError, AttributeError):
        return None


def _generated(scoring: Any) -> bool:
    """Whether a row's scoring settings generated its answer (no distribution to read)."""
    try:
        return json.loads(scoring).get("mode") == "generate"
    except (TypeError, ValueError, AttributeError):
        return True  # unknown settings: no distribution is required
