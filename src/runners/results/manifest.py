"""The result folder's provenance (`results_manifest.json`, updated under a lock) and its card.

Also one key's rows with the provenance `probes run` recorded for them (`load_key_rows`), for derived datasets.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from promptgen.core.errors import ProbeError
from promptgen.core.files import atomic_write_text, read_json
from promptgen.hub.cards import card_environment
from promptgen.hub.folder import yaml_dump

from .layout import CARD_NAME, DATA_DIR, KEY_FILE, MANIFEST_NAME, key_folders, read_key_file
from .parts import file_lock, missing_columns, part_files, read_key_rows, row_counts

CARD_TEMPLATE = "results.md.j2"


def recorded_keys(manifest: Mapping[str, Any]) -> set[tuple[str, str]]:
    """The (config, key folder) pairs a finished run recorded: its `runs` entry names both.

    A run writes its entry only when it finishes (`runners.run.session.Session.finish`), so a key
    folder holding parts that no entry names was left by a run killed or stopped on an error:
    no record says which prompt build its rows were scored on, nor when. Such a folder is
    unfinished (`summarize`, the card) and `probes publish` refuses it (`results.check`).
    """
    out = set()
    for run in manifest.get("runs", {}).values():
        config, key = (run.get("prompt_dataset") or {}).get("config"), run.get("key")
        if isinstance(config, str) and isinstance(key, str):
            out.add((config, key))
    return out


#: the manifest's record of each `probes import` (its id: the key's revision, `imported-<digest>`): its format, model
#: and the key folder of every config it writes (`configs`), recorded before it writes any
IMPORTS = "imports"


def planned_imports(manifest: Mapping[str, Any]) -> dict[tuple[str, str], Mapping[str, Any]]:
    """(config, key folder) -> the record of the import that writes it (`IMPORTS`)."""
    return {
        (config, key): record
        for record in manifest.get(IMPORTS, {}).values()
        for config, key in (record.get("configs") or {}).items()
    }


def finished_keys(manifest: Mapping[str, Any]) -> set[tuple[str, str]]:
    """The keys a finished run recorded (`recorded_keys`), less every key of an import not yet finished.

    An import records the configs it writes before it writes any (`record_import`); it finished
    when each of them has its run recorded. Until then its recorded configs are unfinished too: a
    folder of an import killed between configs is not a complete import of fewer configs (its
    revision is the digest of every config's files).
    """
    recorded = recorded_keys(manifest)
    planned = planned_imports(manifest)
    return {pair for pair in recorded if pair not in planned or _missing(planned[pair], recorded) == []}


def _missing(record: Mapping[str, Any], recorded: set[tuple[str, str]]) -> list[str]:
    """The configs of an import record whose run is not recorded."""
    return sorted(c for c, k in (record.get("configs") or {}).items() if (c, k) not in recorded)


def finishing_command(results: Path, manifest: Mapping[str, Any], config: str, key: str) -> str:
    """The command that finishes a key folder: the `probes import` that records it as its own, or whose backend
    (`import:<format>`, in its key.json's scoring) its rows have; else the `probes run` that wrote it."""
    record = planned_imports(manifest).get((config, key))
    fmt = record.get("format") if record is not None else None
    if fmt is None:
        try:
            scoring = json.loads(str(read_key_file(Path(results) / DATA_DIR / config / key).get("scoring")))
        except (ProbeError, ValueError):
            scoring = None
        backend = scoring.get("backend") if isinstance(scoring, dict) else None
        if isinstance(backend, str) and backend.startswith("import:"):
            fmt = backend.removeprefix("import:")
    return f"probes import --format {fmt}" if fmt else "probes run"


def unfinished_problem(results: Path, manifest: Mapping[str, Any], config: str, key: str) -> str | None:
    """None when a finished run (or import) recorded the key folder `data/<config>/<key>`; else the one line
    that says so, naming the folder, the command that finishes it and the folder to delete to leave it out.

    The one rule of what a reader may take as results: `probes publish` (`results.check`),
    `probes analyze` and `probes export` (`analysis.load`), the derived datasets (`load_key_rows`),
    and the manifest's and card's `finished` (`summarize`) all ask it.
    """
    if (config, key) in finished_keys(manifest):
        return None
    rel = f"{DATA_DIR}/{config}/{key}"
    command = finishing_command(results, manifest, config, key)
    fix = f"rerun the same `{command}` command to finish it, or delete {Path(results) / rel} to leave it out"
    record = planned_imports(manifest).get((config, key))
    if (config, key) in recorded_keys(manifest) and record is not None:
        missing = _missing(record, recorded_keys(manifest))
        return (
            f"{rel}: its import of {len(record['configs'])} configs did not finish ({', '.join(missing)} not "
            f"recorded in {MANIFEST_NAME}; the import's revision covers the files of them all): {fix}"
        )
    if command.startswith("probes import"):
        return (
            f"{rel}: no finished import recorded in {MANIFEST_NAME} (an import killed or stopped on an error left "
            f"its parts): {fix}"
        )
    return (
        f"{rel}: no finished run recorded in {MANIFEST_NAME} (a run killed or stopped on an error left its parts, "
        f"scored on a prompt build nothing records): {fix}"
    )


def summarize(results: Path, recorded: set[tuple[str, str]] | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """{config: {key slug: {key..., rows, refusals, finished}}} for every key folder that has parts.

    `finished`: a finished run recorded the key (`recorded`, from `finished_keys`; None: none did).
    """
    recorded = recorded or set()
    out: dict[str, dict[str, dict[str, Any]]] = {}
    data = Path(results) / DATA_DIR
    if not data.is_dir():
        return out
    for config_dir in sorted(p for p in data.iterdir() if p.is_dir()):
        for folder in key_folders(results, config_dir.name):
            rows, refusals = row_counts(folder)
            key = read_key_file(folder) if (folder / KEY_FILE).is_file() else {}
            out.setdefault(config_dir.name, {})[folder.name] = {
                **key,
                "rows": rows,
                "refusals": refusals,
                "finished": (config_dir.name, folder.name) in recorded,
            }
    return out


def read_manifest(results: Path) -> dict[str, Any]:
    """results_manifest.json ({} when absent), its shape checked: every reader (run, analyze, publish) indexes it."""
    path = Path(results) / MANIFEST_NAME
    if not path.is_file():
        return {}
    manifest = read_json(path, hint="move it away to start a new manifest")
    check_manifest_shape(path, manifest)
    return manifest


def check_manifest_shape(path: Path, manifest: Any) -> None:
    """An object whose `runs` (run id -> entry) and `configs` (config -> key -> summary) are objects of objects.

    A hand-edited or foreign file of another shape would otherwise fail deep inside a reader
    (`'list' object has no attribute 'get'`), far from the file that caused it.
    """
    fix = "move it away to start a new manifest (rerun `probes run` to record the runs)"
    if not isinstance(manifest, dict):
        raise ProbeError(f"{path}: expected a JSON object, got {type(manifest).__name__}; {fix}")
    for field, depth in (("runs", 1), ("configs", 2)):
        value = manifest.get(field, {})
        if not isinstance(value, dict):
            raise ProbeError(f"{path}: `{field}` must be an object, got {type(value).__name__}; {fix}")
        for name, entry in value.items():
            nested = depth == 1 or (isinstance(entry, dict) and all(isinstance(v, dict) for v in entry.values()))
            if not isinstance(entry, dict) or not nested:
                what = "an object" if depth == 1 else "an object of objects"
                raise ProbeError(f"{path}: `{field}` entry {name!r} is not {what}; {fix}")
            if depth == 1 and not isinstance(entry.get("prompt_dataset", {}), dict):
                raise ProbeError(f"{path}: `runs` entry {name!r}: `prompt_dataset` is not an object; {fix}")
    imports = manifest.get(IMPORTS, {})
    if not isinstance(imports, dict):
        raise ProbeError(f"{path}: `{IMPORTS}` must be an object, got {type(imports).__name__}; {fix}")
    for name, record in imports.items():
        configs = record.get("configs") if isinstance(record, dict) else None
        if not isinstance(configs, dict) or not all(isinstance(k, str) for k in configs.values()):
            raise ProbeError(f"{path}: `{IMPORTS}` entry {name!r} has no `configs` object (config -> key); {fix}")


def update_manifest(
    results: Path,
    run_id: str,
    entry: Mapping[str, Any],
    *,
    keep_if: Callable[[Mapping[str, Any]], bool] | None = None,
    after: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Record one run (a config + key + shard) in results_manifest.json, keeping the others.

    Read, update and write happen under the manifest's lock, so concurrent runs and shards
    finishing together each add their entry and none is lost. An existing entry for `run_id`
    stays when `keep_if(old)` says so (a rerun that scored nothing keeps the figures of the
    run that did). `after(manifest)` runs under the same lock (the card, from this manifest).
    """

    def record(manifest: dict[str, Any]) -> None:
        runs = manifest.setdefault("runs", {})
        if not (run_id in runs and keep_if is not None and keep_if(runs[run_id])):
            runs[run_id] = dict(entry)
        manifest["runs"] = dict(sorted(runs.items()))

    return _update(results, record, after)


def record_import(results: Path, import_id: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """Record an import's `record` (`IMPORTS`: its format, model and `configs`, config -> key folder) before it
    writes any row: until each of those configs has its run recorded, every one of them is unfinished (`finished_keys`).
    """

    def plan(manifest: dict[str, Any]) -> None:
        manifest[IMPORTS] = dict(sorted({**manifest.get(IMPORTS, {}), import_id: dict(record)}.items()))

    return _update(results, plan, None)


def _update(
    results: Path, change: Callable[[dict[str, Any]], None], after: Callable[[dict[str, Any]], None] | None
) -> dict[str, Any]:
    """Read, `change`, summarize and write results_manifest.json, then `after(manifest)`, all under its lock.

    Every writer of the manifest and of the card writes under this lock, so a temporary file of
    either found here was left by a writer that was killed: it is removed.
    """
    path = Path(results) / MANIFEST_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path):
        for name in (MANIFEST_NAME, CARD_NAME):
            for left in path.parent.glob(f".{name}.*.tmp"):
                left.unlink(missing_ok=True)
        manifest = read_manifest(results)
        change(manifest)
        manifest["configs"] = summarize(results, finished_keys(manifest))
        atomic_write_text(path, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        if after is not None:
            after(manifest)
    return manifest


def render_results_card(manifest: Mapping[str, Any], *, pretty_name: str, license: str) -> str:
    """README.md of a result folder: YAML front matter from data, prose from cards/results.md.j2."""
    configs = manifest.get("configs", {})
    header = {
        "pretty_name": pretty_name,
        "license": license,
        "tags": ["social-bias", "llm-evaluation", "model-results"],
        "configs": [
            {"config_name": name, "data_files": [{"split": "test", "path": f"data/{name}/*/part-*.parquet"}]}
            for name in configs
        ],
    }
    runs = manifest.get("runs", {})
    # runs of a model behind a server (`runners.backends.openai`): what the server said of it, for the card's caveat
    served = {
        k: r["hardware"]["server"] for k, r in runs.items() if isinstance((r.get("hardware") or {}).get("server"), dict)
    }
    body = (
        card_environment()
        .get_template(CARD_TEMPLATE)
        .render(
            pretty_name=pretty_name,
            configs=configs,
            runs=runs,
            served=served,
            # runs of a seeded sample of their config's units (`runners.selection.sample`): the card's Samples table
            sampled={k: r["sample"] for k, r in runs.items() if isinstance(r.get("sample"), dict)},
            unfinished=[
                f"`{DATA_DIR}/{config}/{slug}`"
                for config, keys in configs.items()
                for slug, k in keys.items()
                if k.get("finished") is False
            ],
            first_config=next(iter(configs), "CONFIG"),
        )
    )
    return f"---\n{yaml_dump(header)}---\n\n{body.lstrip()}"


def write_card(results: Path, manifest: Mapping[str, Any], *, pretty_name: str, license: str) -> Path:
    path = Path(results) / CARD_NAME
    atomic_write_text(path, render_results_card(manifest, pretty_name=pretty_name, license=license))
    return path


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
    results = Path(results)
    config_dir = results / DATA_DIR / config
    if not config_dir.is_dir():
        raise ProbeError(
            f"results folder {results} has no {config} results (expected {config_dir}/<key>/part-*.parquet); "
            f"make them first: {hint}"
        )
    keys = [p.name for p in key_folders(results, config)]
    if not keys:
        raise ProbeError(f"{config_dir}: no result parts")
    if key is None:
        if len(keys) > 1:
            raise ProbeError(f"{config_dir} holds several result keys {keys}; choose one with --key")
        key = keys[0]
    if key not in keys:
        raise ProbeError(f"--key {key!r}: no such result key under {config_dir}; found {keys}")
    folder = config_dir / key
    if not (folder / KEY_FILE).is_file():
        raise ProbeError(f"{folder}: no {KEY_FILE}; not a result folder written by probes run")
    info = read_key_file(folder)
    for path in part_files(folder):
        missing = missing_columns(path, columns)
        if missing:
            raise ProbeError(f"{path}: missing column(s) {missing}")
    manifest = read_manifest(results)
    problem = unfinished_problem(results, manifest, config, key)
    if problem is not None:
        raise ProbeError(problem)
    # one row per id: where parts repeat an id (a rescored item), the newest part's row wins
    rows = read_key_rows(folder, list(columns), file_column="file").to_pandas()
    runs = [
        run
        for run in manifest.get("runs", {}).values()
        if run.get("key") == key and run.get("prompt_dataset", {}).get("config") == config
    ]
    return KeyRows(rows, key, info["model"], info["model_revision"], json.loads(info["scoring"]), runs)
