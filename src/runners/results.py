"""The result dataset folder (DESIGN section 2 and 7): keyed parts, atomic writes, card, manifest.

Layout::

    <results>/README.md                                   card; `configs:` globs each config's parts
    <results>/results_manifest.json                       provenance of the runs (one entry per config+key)
    <results>/data/<config>/<key-slug>/key.json           the key the folder holds
    <results>/data/<config>/<key-slug>/part-<shard>-<time>-<writer>.parquet

A result is keyed by (item id, model revision, scoring): the revision is the model's content
(`runners.model_identity`), the scoring JSON holds the scoring settings, chat or plain, the
dtype and the backend. They make a `ResultKey`, whose digest names the folder its rows live in
(after a readable model name, which is not part of the identity), so a run with anything
changed never sees (or reuses) another key's rows. Each row also carries `prompt_sha256`, a
hash of what was scored (prompt, messages, options, range): a resumed item whose prompt
changed is scored again, never reused.

A part's metadata (`PART_CONTENT`) names the prompt content its rows were scored on: a run on
that content trusts their `prompt_sha256` unhashed; other rows are hashed (`runners.resume`).

Every part is written to a hidden temporary file and renamed into place, so a killed run
leaves only complete parts; its name holds the writing time and a per-process writer tag, so
concurrent writers never collide. Readers merge on read: when an id appears in several parts
of a key (two processes on one key, or an item rescored after its prompt changed), the row of
the newest part wins, deterministically. At the end of a run the key folder is compacted
under a lock (the merged rows rewritten as one part per prompt content, with the current
schema, the parts read removed), so a finished folder has one row per id and one schema, as
`probes publish` requires. The manifest is updated under a lock too.

This module is the one home of the layout: the file names (`CARD_NAME`, `MANIFEST_NAME`,
`DATA_DIR`, `KEY_FILE`) and the readers every stage uses (`read_manifest`, `read_key_file`,
`part_schema`, `read_key_rows`); `runners.results_check` validates a folder before publishing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from promptgen.core.errors import ProbeError
from promptgen.core.files import atomic_write, atomic_write_text, read_json
from promptgen.core.layout import RESULTS_MANIFEST
from promptgen.hub.folder import check_path_segment

#: the names of a results folder's files (module docstring), one home each for every writer and reader
CARD_NAME = "README.md"
MANIFEST_NAME = RESULTS_MANIFEST
DATA_DIR = "data"
KEY_FILE = "key.json"
#: everything a results folder holds at its top; all else it holds is under DATA_DIR
TOP_ENTRIES = (CARD_NAME, MANIFEST_NAME, DATA_DIR)
CARD_TEMPLATE = "results.md.j2"

RESULT_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("model", pa.string()),
        ("model_revision", pa.string()),
        ("backend", pa.string()),
        #: the dtype and device the weights were actually loaded in (the dtype is also in `scoring`)
        ("dtype", pa.string()),
        ("device", pa.string()),
        ("scoring", pa.string()),
        ("chat", pa.bool_()),
        ("choice_logprobs", pa.list_(pa.float64())),
        ("choice_probs", pa.list_(pa.float64())),
        ("choice_tokens", pa.list_(pa.int64())),
        ("chosen_index", pa.int64()),
        ("number_probs", pa.list_(pa.float64())),
        ("expected_value", pa.float64()),
        ("argmax_value", pa.int64()),
        ("valid_mass", pa.float64()),
        ("refused", pa.bool_()),
        ("context_tokens", pa.int64()),
        ("generated_text", pa.string()),
        ("parsed_value", pa.int64()),
        ("parse_status", pa.string()),
        ("finish_reason", pa.string()),
        ("number_bound", pa.float64()),  # number items: certified L1 bound (`runners.number_bound`); trie positions
        ("trie_positions", pa.int64()),
        ("prompt_sha256", pa.string()),
    ]
)

#: a part's Parquet metadata key for the prompt content its rows were scored on (module docstring)
PART_CONTENT = b"probes.prompt_content"

#: `seq` is the writing time in ns (older layouts: a per-shard counter); `writer` tells concurrent writers apart
_PART = re.compile(r"^part-(?P<shard>[0-9]+of[0-9]+)-(?P<seq>[0-9]+)(?:-(?P<writer>[0-9a-z]+))?\.parquet$")
#: this process's writer tag: its pid and a random suffix (pids are reused across machines)
_WRITER = f"{os.getpid():x}{uuid.uuid4().hex[:6]}"


def short_model_name(model: str) -> str:
    """The last component of a model's path or repo id (may be empty): how cards and labels name it."""
    return model.rstrip("/").split("/")[-1]


@dataclass(frozen=True)
class ResultKey:
    """What a result depends on besides the item id."""

    #: portable display name (`--model-name`); names the folder, not part of the identity
    model: str
    #: the model's content revision (`runners.model_identity`)
    model_revision: str
    #: canonical JSON of everything else that changes the scores: scoring settings, chat, dtype, backend
    scoring: str

    def as_dict(self) -> dict[str, str]:
        return {"model": self.model, "model_revision": self.model_revision, "scoring": self.scoring}

    @property
    def digest(self) -> str:
        """sha256 of the identity: the same model and settings under any name give the same digest."""
        payload = json.dumps(
            {"model_revision": self.model_revision, "scoring": self.scoring}, sort_keys=True, separators=(",", ":")
        )
        return hashlib.sha256(payload.encode()).hexdigest()

    @property
    def name(self) -> str:
        """The model's folder or Hub name: the last component of its path or repo id (may be empty)."""
        return short_model_name(self.model)

    @property
    def slug(self) -> str:
        """Folder name: a readable model name and a hash of the identity."""
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", self.name).strip("._") or "model"
        return f"{name[:48]}-{self.digest[:16]}"

    @property
    def label(self) -> str:
        """How reports and figures name a run: `<model folder or Hub name>·<first 8 of the digest>`.

        Short, and unique per key: the digest prefix tells apart one model at two settings, and
        two models of one name (`org-a/m`, `org-b/m`) at different revisions.
        """
        return f"{self.name or 'model'}·{self.digest[:8]}"


#: the item fields `prompt_sha256` covers: what the runners read to score an item
PROMPT_FIELDS = ("task", "prompt", "messages", "choices", "choice_labels", "number_min", "number_max", "stop")


def prompt_sha256(item: Mapping[str, Any]) -> str:
    """sha256 of what a model is asked in an item: the fields the runners read to score it.

    A rebuilt dataset that keeps an id but changes its prompt, messages, options or range
    gets another hash, so a resumed run scores that item again.
    """
    payload = json.dumps({f: item.get(f) for f in PROMPT_FIELDS}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def parse_shard(text: str | None) -> tuple[int, int]:
    """`i/n` -> (i, n) with 0 <= i < n; None -> (0, 1)."""
    if text is None:
        return 0, 1
    m = re.fullmatch(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*", text)
    if not m:
        raise ProbeError(f"--shard must look like i/n (e.g. 0/4), got {text!r}")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 0 <= i < n:
        raise ProbeError(f"--shard {text}: need 0 <= i < n")
    return i, n


def shard_of(item_id: str, n: int) -> int:
    """The shard of an item: a hash of its id, so shards do not depend on row order."""
    return int.from_bytes(hashlib.sha256(item_id.encode("utf-8")).digest()[:8], "big") % n


def key_dir(results: Path, config: str, key: ResultKey) -> Path:
    """The folder of `key`: an existing one with the same digest (under any model name), else its slug.

    The config name is checked here too (`check_path_segment`), the last line before it names a
    folder: `""` would put rows in `data/<key>/`, `..` outside `data/`.
    """
    check_path_segment(config, "config name")
    config_dir = Path(results) / DATA_DIR / config
    if config_dir.is_dir():
        same = sorted(p for p in config_dir.glob(f"*-{key.digest[:16]}") if p.is_dir())
        if same:
            return same[0]
    return config_dir / key.slug


class KeyFileError(ProbeError):
    """A key folder's key.json is missing, unreadable or not a JSON object; `problem` says which."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path} {problem}")
        self.path = path
        self.problem = problem


def read_key_file(folder: Path) -> dict[str, Any]:
    """The key a key folder holds (its key.json), the one reader of it: a `KeyFileError` when it cannot be.

    Every reader (resume, the manifest summary, derived datasets, publishing) gets the same
    refusal for the same fault, and `problem` lets a checker that collects problems name the file its own way.
    """
    path = Path(folder) / KEY_FILE
    if not path.is_file():
        raise KeyFileError(path, "is missing")
    try:
        key = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise KeyFileError(path, f"is not readable JSON ({exc})") from exc
    if not isinstance(key, dict):
        raise KeyFileError(path, "is not a JSON object")
    return key


def part_schema(path: Path) -> pa.Schema:
    """A result part's schema (with its metadata), or one line naming the file when it cannot be read."""
    try:
        return pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise ProbeError(f"{path}: cannot read result part parquet ({exc})") from exc


def missing_columns(path: Path, columns: Sequence[str]) -> list[str]:
    """Which of `columns` the result part `path` lacks, in the order asked."""
    names = part_schema(path).names
    return [c for c in columns if c not in names]


def named_elsewhere(results: Path, key: ResultKey) -> tuple[Path, str] | None:
    """A key folder of the same identity recorded under another model name, in any config, or None.

    The digest leaves the name out, so a run under a new `--model-name` would add rows with a
    second name to the folder (and another config's folder) of the same model: one model
    would appear as two, and publishing refuses such a folder.
    """
    data = Path(results) / DATA_DIR
    if not data.is_dir():
        return None
    for folder in sorted(p for p in data.glob(f"*/*-{key.digest[:16]}") if p.is_dir()):
        try:
            name = read_key_file(folder).get("model")
        except KeyFileError:
            continue
        if isinstance(name, str) and name != key.model:
            return folder, name
    return None


def _part_order(path: Path) -> tuple[int, str, str]:
    m = _PART.match(path.name)
    assert m is not None
    return int(m["seq"]), m["writer"] or "", path.name


def part_files(folder: Path) -> list[Path]:
    """The parts of a key folder, oldest first (the order in which later rows win)."""
    if not folder.is_dir():
        return []
    return sorted((p for p in folder.iterdir() if _PART.match(p.name)), key=_part_order)


def read_part(path: Path, columns: Sequence[str] | None = None) -> pa.Table:
    """One part (its schema keeps the part's metadata), or one line naming the file when it cannot be read.

    Asked columns a part lacks (an older layout) come back as nulls.
    """
    try:
        names = pq.read_schema(path).names
        present = None if columns is None else [c for c in columns if c in names]
        table = pq.read_table(path, columns=present)
    except (OSError, pa.ArrowException) as exc:
        raise ProbeError(
            f"{path}: cannot read result part parquet ({exc}); move it away and rerun to score its items again"
        ) from exc
    for name in columns or ():
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(len(table), RESULT_SCHEMA.field(name).type))
    return table.select(list(columns)) if columns is not None else table


def read_key_rows(folder: Path, columns: Sequence[str] | None = None, *, file_column: str | None = None) -> pa.Table:
    """Every row of a key folder, one per id: where parts repeat an id, the newest part's row wins.

    `file_column` names a column to add with each row's part file (for error messages).
    """
    cols = None if columns is None else list(dict.fromkeys(["id", *columns]))
    tables = []
    for path in part_files(folder):
        table = read_part(path, cols)
        if file_column is not None:
            table = table.append_column(file_column, pa.array([str(path)] * len(table), pa.string()))
        tables.append(table)
    if not tables:
        empty = RESULT_SCHEMA.empty_table().select(cols) if cols else RESULT_SCHEMA.empty_table()
        return empty.append_column(file_column, pa.array([], pa.string())) if file_column else empty
    table = pa.concat_tables(tables, promote_options="default")
    keep = newest_rows(table.column("id"))
    return table if keep is None else table.take(keep)


def newest_rows(ids: pa.ChunkedArray | pa.Array) -> pa.Array | None:
    """The row of each id's last occurrence, in row order (None when no id repeats): the merge rule, in Arrow."""
    if pc.count_distinct(ids).as_py() == len(ids):
        return None
    rows = pa.table({"id": ids, "row": pa.array(np.arange(len(ids), dtype=np.int64))})
    last = rows.group_by("id", use_threads=False).aggregate([("row", "max")]).column("row_max")
    return pa.array(np.sort(last.to_numpy()))


def read_done(folder: Path) -> dict[str, tuple[bool, str | None]]:
    """{item id: (refused, prompt_sha256)} over a key folder, merged as `read_key_rows` merges."""
    rows = read_key_rows(folder, ["refused", "prompt_sha256"]).to_pydict()
    return {i: (bool(r), h) for i, r, h in zip(rows["id"], rows["refused"], rows["prompt_sha256"], strict=True)}


def write_key_file(folder: Path, key: ResultKey) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / KEY_FILE
    if not target.exists():
        atomic_write_text(target, json.dumps(key.as_dict(), indent=2, sort_keys=True) + "\n")


def write_part(
    folder: Path, shard: tuple[int, int], rows: Sequence[Mapping[str, Any]], *, content: str | None = None
) -> Path:
    """Write rows as a new `part-<i>of<n>-<time>-<writer>.parquet`, atomically; `content`: see `PART_CONTENT`."""
    label = f"{shard[0]:05d}of{shard[1]:05d}"
    table = pa.Table.from_pylist([{name: row.get(name) for name in RESULT_SCHEMA.names} for row in rows], RESULT_SCHEMA)
    return _write_new_part(folder, label, table, content=content)


def part_content(schema: pa.Schema) -> str | None:
    """The prompt content a part's rows were scored on, from its schema's metadata (None: not recorded)."""
    value = (schema.metadata or {}).get(PART_CONTENT)
    return value.decode("ascii", "replace") if value else None


def _write_new_part(
    folder: Path, label: str, table: pa.Table, seq: int | None = None, content: str | None = None
) -> Path:
    table = table.replace_schema_metadata({PART_CONTENT: content.encode("ascii")} if content else None)
    seq = time.time_ns() if seq is None else seq
    while True:
        path = folder / f"part-{label}-{seq:020d}-{_WRITER}.parquet"
        if not path.exists():
            break
        seq += 1
    atomic_write(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))
    return path


def _lock(path: Path):
    """An inter-process lock file beside `path` (hidden, so never published)."""
    from filelock import FileLock

    return FileLock(str(path.parent / f".{path.name}.lock"))


def compact_key(
    folder: Path, *, content: str | None = None, checked: Collection[str] = (), ids: pa.Array | None = None
) -> bool:
    """Rewrite a key folder as one part per prompt content with one row per id (True when it did; else as it was).

    The rows of the parts `checked` (those whose id is in `ids`, when given) were found current
    under `content` by a run (`runners.resume`): they join its part. Under the folder's lock;
    only the parts read are removed, after the merged ones are in place, so a part another
    process adds meanwhile is kept, and a crash at any point leaves rows that merge the same.
    """
    with _lock(folder / "parts"):
        parts = part_files(folder)
        schemas = [part_schema(p) for p in parts]  # one footer read per part: its content label and columns
        stored = [part_content(schema) for schema in schemas]
        relabel = [k for k, p in enumerate(parts) if content and p.name in checked and stored[k] != content]
        current = all(set(RESULT_SCHEMA.names) <= set(s.names) for s in schemas)  # else: older columns, added null
        if not relabel and len(set(stored)) == len(parts) and not _repeats(parts) and current:
            return False
        tables = [read_part(p, RESULT_SCHEMA.names) for p in parts]
        merged = pa.concat_tables(tables, promote_options="default")
        origin = np.repeat(np.arange(len(parts)), [len(t) for t in tables])
        keep = newest_rows(merged.column("id"))
        merged, origin = (merged, origin) if keep is None else (merged.take(keep), origin[keep.to_numpy()])
        labels = [*sorted({*stored, content} - {None}), None]
        row_label = np.array([labels.index(c) for c in stored], dtype=np.int64)[origin]
        moved = np.isin(origin, relabel)
        if ids is not None:
            moved &= pc.is_in(merged.column("id"), value_set=ids).to_numpy(zero_copy_only=False)
        row_label[moved] = labels.index(content)
        newest = _PART.match(parts[-1].name)
        assert newest is not None
        for n, code in enumerate(np.unique(row_label).tolist()):
            rows = merged.take(pa.array(np.flatnonzero(row_label == code))).cast(RESULT_SCHEMA)
            _write_new_part(folder, newest["shard"], rows, int(newest["seq"]) + 1 + n, labels[code])
        for path in parts:
            path.unlink(missing_ok=True)
        return True


def _repeats(parts: list[Path]) -> bool:
    """Whether an id has rows in two of `parts`."""
    return len(parts) > 1 and newest_rows(pa.concat_tables(read_part(p, ["id"]) for p in parts)["id"]) is not None


def key_folders(results: Path, config: str) -> list[Path]:
    """The key folders of one config that hold result parts (`data/<config>/<key>/part-*.parquet`), sorted."""
    config_dir = Path(results) / DATA_DIR / config
    if not config_dir.is_dir():
        return []
    return [p for p in sorted(config_dir.iterdir()) if p.is_dir() and part_files(p)]


def result_configs(results: Path) -> list[str]:
    """The configs a local results folder holds (those with at least one key folder of parts)."""
    data = Path(results) / DATA_DIR
    if not data.is_dir():
        return []
    return [p.name for p in sorted(data.iterdir()) if p.is_dir() and key_folders(results, p.name)]


def summarize(results: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """{config: {key slug: {key..., rows, refusals}}} for every key folder that has parts."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    data = Path(results) / DATA_DIR
    if not data.is_dir():
        return out
    for config_dir in sorted(p for p in data.iterdir() if p.is_dir()):
        for folder in key_folders(results, config_dir.name):
            refused = read_key_rows(folder, ["refused"]).column("refused")
            key = read_key_file(folder) if (folder / KEY_FILE).is_file() else {}
            out.setdefault(config_dir.name, {})[folder.name] = {
                **key,
                "rows": len(refused),
                "refusals": pc.sum(refused.cast(pa.int64())).as_py() or 0,
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
    path = Path(results) / MANIFEST_NAME
    with _lock(path):
        manifest = read_manifest(results)
        runs = manifest.setdefault("runs", {})
        if not (run_id in runs and keep_if is not None and keep_if(runs[run_id])):
            runs[run_id] = dict(entry)
        manifest["runs"] = dict(sorted(runs.items()))
        manifest["configs"] = summarize(results)
        atomic_write_text(path, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        if after is not None:
            after(manifest)
    return manifest


def render_results_card(manifest: Mapping[str, Any], *, pretty_name: str, license: str) -> str:
    """README.md of a result folder: YAML front matter from data, prose from cards/results.md.j2."""
    from promptgen.hub.cards import card_environment
    from promptgen.hub.folder import yaml_dump

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
    body = (
        card_environment()
        .get_template(CARD_TEMPLATE)
        .render(pretty_name=pretty_name, configs=configs, runs=runs, first_config=next(iter(configs), "CONFIG"))
    )
    return f"---\n{yaml_dump(header)}---\n\n{body.lstrip()}"


def write_card(results: Path, manifest: Mapping[str, Any], *, pretty_name: str, license: str) -> Path:
    path = Path(results) / CARD_NAME
    atomic_write_text(path, render_results_card(manifest, pretty_name=pretty_name, license=license))
    return path


# ----------------------------------------------------------------------------- one key, for derived datasets
# Two dataset versions are made from a model's results: the trust game's curated pairs (from
# `race_probe` results) and the empathy dataset's LLM third-person rewrites (from `rewrite_t2`
# results, `probes.derive`). Both read one key folder, check that rows merge to one per id (the
# newest part wins), and keep the provenance `probes run` recorded.


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
