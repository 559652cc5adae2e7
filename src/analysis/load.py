"""Prompt and result datasets -> pandas frames, and the one join every probe's analysis starts from.

Both kinds of dataset are read either from a local Hub-ready folder or from a Hub repo id at a
revision. Local folders are read as parquet directly: `datasets` keys its cache of a local
folder by the folder's name, so a rebuilt or re-run folder could come back with stale rows.
Hub repos go through `datasets.load_dataset(..., revision=...)`, which is what a reader of the
published data does.

Result rows carry their key (model, model revision, scoring settings) and where they were read
from (`results_file`), so a bad join names the file to look at. A local folder's keys are read
only when a finished run or import recorded them (`runners.results.unfinished_problem`), as
`probes publish` requires. The checks of their values are
`analysis.result_checks`.
"""

from __future__ import annotations

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
from promptgen.hub.read import local_source, read_build_manifest, read_config, read_config_rows
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
    unfinished_problem,
)
from runners.results import read_manifest as read_results_manifest

from .columns import CORE_RESULT_COLUMNS, RESULT_FILE_COLUMN, RESULT_KEY_COLUMN, RUN_COLUMNS
from .result_checks import _bad_value, check_probabilities, check_result_values


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
    folder = local_source(dataset, "prompt dataset", revision)
    if folder is None:
        frame = _from_hub(str(dataset), config, revision, columns, "prompt dataset")
        return frame if ids is None else frame[frame["id"].isin(set(ids))].reset_index(drop=True)
    if ids is not None:  # only these rows are read into memory (a few rows of a config of millions)
        return read_config_rows(folder, config, ids, columns, "prompt config").to_pandas()
    return read_config(folder, config, columns, "prompt config").to_pandas()


def load_results(results: str | Path, config: str, *, revision: str | None = None) -> pd.DataFrame:
    """Every result row of one config, all keys (models x settings) together.

    Adds `result_key` (the key folder's slug, recomputed from the row so Hub and local reads
    agree) and `results_file` (the part file, or `repo@revision:config` for the Hub). Two rows
    for the same item under the same key are an error: one of them would silently win.
    """
    folder = local_source(results, "results", revision)
    if folder is None:
        frame = _from_hub(str(results), config, revision, None, "results")
        frame[RESULT_FILE_COLUMN] = f"{results}@{revision or 'main'}:{config}"
    else:
        key_dirs = key_folders(folder, config)
        if not key_dirs:
            raise ProbeError(f"{folder / DATA_DIR / config}: no result parts (part-*.parquet) for config {config!r}")
        _refuse_unfinished(folder, config, key_dirs)
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


def _refuse_unfinished(folder: Path, config: str, key_dirs: Sequence[Path]) -> None:
    """Only keys a finished run or import recorded are results (`runners.results.unfinished_problem`, the rule
    `probes publish` refuses by): the parts of a killed one are refused, naming the command that finishes them."""
    manifest = read_results_manifest(folder)
    for key_dir in key_dirs:
        problem = unfinished_problem(folder, manifest, config, key_dir.name)
        if problem is not None:
            raise ProbeError(problem)


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
