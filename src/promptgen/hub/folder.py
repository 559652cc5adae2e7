"""Write a Hub-ready dataset folder (docs/DESIGN.md section 2), atomically and deterministically.

Layout::

    <out>/<name>/README.md                                   card with a YAML `configs:` block
    <out>/<name>/data/<config>/test-00000-of-0000N.parquet
    <out>/<name>/build_manifest.json

Determinism: rows are buffered into fixed-size row groups (independent of how the builder
batches them), parquet options are fixed, and nothing time- or path-dependent is written,
so the same recipe and sources give byte-identical files. The fingerprint is a sha256 of
the recipe hash, the effective parameters, the source hashes and the data files' hashes.

Atomicity: everything is written into a hidden temporary folder beside the target and
renamed into place at the end; on any error the temporary folder is removed, so the
target appears complete or not at all. A build killed outright (SIGKILL) cannot remove it;
its folder name records the pid and host, and the next build or report into the same parent
removes the staging folders whose process is gone (`clean_stale_staging`). Memory stays
bounded because configs arrive as iterators of column batches and are written shard by shard.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..core.errors import OutputError, ProbeError
from ..core.files import make_staging_dir, removed_on_error, sha256_file, swap_into_place, write_text, writing
from ..core.layout import BUILD_MANIFEST
from ..core.outputs import Input, Layout, Output, check_output
from .read import config_folder

if TYPE_CHECKING:  # a type only: readers of built folders (run, publish) need not import datasets
    from datasets import Features

log = logging.getLogger(__name__)

#: rows per parquet row group: small enough for the Hub viewer and streaming, large
#: enough to compress well.
ROW_GROUP_ROWS = 10_000
PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "compression_level": 9,
    "use_dictionary": True,
    "write_statistics": True,
    "data_page_version": "2.0",
}

Batch = dict[str, list]
#: a builder may also yield ready `pa.Table` batches with exactly the config's schema


#: rows per batch handed to the writer by `row_batches`
BATCH_ROWS = 5_000


def row_batches(rows: Iterable[dict[str, Any]], columns: Iterable[str], size: int = BATCH_ROWS) -> Iterator[Batch]:
    """Row dicts -> column batches of at most `size` rows, the writer's input format."""
    cols = list(columns)
    batch: Batch = {c: [] for c in cols}
    n = 0
    for row in rows:
        for c in cols:
            batch[c].append(row[c])
        n += 1
        if n == size:
            yield batch
            batch, n = {c: [] for c in cols}, 0
    if n:
        yield batch


@dataclass
class ConfigData:
    """One config of a dataset: its declared schema and a re-iterable source of rows."""

    name: str
    features: Features
    batches: Callable[[], Iterator[Batch | pa.Table]]
    description: str = ""
    expected_rows: int | None = None


@dataclass(frozen=True)
class WrittenConfig:
    name: str
    rows: int
    files: tuple[dict[str, Any], ...]


def check_path_segment(name: str, what: str) -> None:
    """Refuse a name that is not one safe path segment, before it is joined to a folder.

    Config and dataset names come from recipes, dataset cards and flags, and name folders:
    `..`, a separator or a leading dot would write outside `data/` (or into a hidden folder
    that publishing skips); a control character makes an unportable file name.
    """
    if (
        not isinstance(name, str)
        or not name
        or name.startswith(".")
        or any(sep in name for sep in ("/", "\\"))
        or any(ord(ch) < 32 or ord(ch) == 127 for ch in name)
    ):
        raise OutputError(f"invalid {what} {name!r}: must be one path segment (no /, \\, leading dot or control)")


class _ShardWriter:
    """Writes one config's rows into numbered shards of at most `rows_per_shard` rows."""

    def __init__(self, folder: Path, schema: pa.Schema, rows_per_shard: int) -> None:
        self.folder = folder
        self.schema = schema
        self.rows_per_shard = rows_per_shard
        self.shards: list[Path] = []
        self.rows = 0
        self._writer: pq.ParquetWriter | None = None
        self._rows_in_shard = 0
        self._buffer: list[pa.Table] = []
        self._buffered = 0

    def _open_shard(self) -> None:
        path = self.folder / f"shard-{len(self.shards):05d}.parquet.part"
        self.shards.append(path)
        self._writer = pq.ParquetWriter(path, self.schema, **PARQUET_OPTIONS)
        self._rows_in_shard = 0

    def _close_shard(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _write_group(self, table: pa.Table) -> None:
        if self._writer is None:
            self._open_shard()
        assert self._writer is not None
        self._writer.write_table(table, row_group_size=len(table))
        self._rows_in_shard += len(table)
        self.rows += len(table)
        if self._rows_in_shard >= self.rows_per_shard:
            self._close_shard()

    def _drain(self, final: bool) -> None:
        while self._buffered and (final or self._buffered >= ROW_GROUP_ROWS):
            table = pa.concat_tables(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
            room = self.rows_per_shard - (self._rows_in_shard if self._writer is not None else 0)
            take = min(ROW_GROUP_ROWS, room, len(table))
            self._write_group(table.slice(0, take))
            rest = table.slice(take)
            self._buffer = [rest] if len(rest) else []
            self._buffered = len(rest)

    def add(self, table: pa.Table) -> None:
        if len(table):
            self._buffer.append(table)
            self._buffered += len(table)
            self._drain(final=False)

    def finish(self) -> list[Path]:
        self._drain(final=True)
        self._close_shard()
        total = len(self.shards)
        final_paths = []
        for i, part in enumerate(self.shards):
            final = self.folder / f"test-{i:05d}-of-{total:05d}.parquet"
            os.replace(part, final)
            final_paths.append(final)
        return final_paths


def _batch_to_table(batch: Batch | pa.Table, schema: pa.Schema, config: str) -> pa.Table:
    if isinstance(batch, pa.Table):
        # fast path for builders that assemble Arrow columns themselves
        if not batch.schema.equals(schema, check_metadata=False):
            raise ProbeError(f"config {config!r}: batch schema differs from its features:\n{batch.schema}")
        return batch
    missing = [name for name in schema.names if name not in batch]
    extra = [name for name in batch if name not in schema.names]
    if missing or extra:
        raise ProbeError(
            f"config {config!r}: batch columns differ from its features (missing {missing}, extra {extra})"
        )
    try:
        return pa.Table.from_pydict({name: batch[name] for name in schema.names}, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ProbeError(f"config {config!r}: rows do not match the declared features: {exc}") from exc


def write_config(
    folder: Path,
    config: ConfigData,
    *,
    rows_per_shard: int,
    on_rows: Callable[[str, int], None] | None = None,
) -> WrittenConfig:
    """Stream one config into `folder/data/<config>/` and describe the files written."""
    check_path_segment(config.name, "config name")
    target = config_folder(folder, config.name)
    target.mkdir(parents=True, exist_ok=False)
    schema = config.features.arrow_schema
    writer = _ShardWriter(target, schema, rows_per_shard)
    for batch in config.batches():
        table = _batch_to_table(batch, schema, config.name)
        writer.add(table)
        if on_rows is not None:
            on_rows(config.name, len(table))
    paths = writer.finish()
    if writer.rows == 0:
        raise ProbeError(f"config {config.name!r} produced no rows; check the recipe's parameters")
    files = tuple(
        {"path": p.relative_to(folder).as_posix(), "sha256": sha256_file(p), "bytes": p.stat().st_size} for p in paths
    )
    return WrittenConfig(config.name, writer.rows, files)


def compute_fingerprint(
    *, recipe_sha256: str, parameters: dict[str, Any], sources: list[dict[str, Any]], configs: list[WrittenConfig]
) -> str:
    """sha256 of what defines the dataset's content: recipe, parameters, sources, data files."""
    payload = {
        "recipe_sha256": recipe_sha256,
        "parameters": parameters,
        "sources": sorted((s["id"], s["sha256"]) for s in sources),
        "files": sorted((f["path"], f["sha256"]) for c in configs for f in c.files),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=True).encode()).hexdigest()


def card_front_matter(
    *, pretty_name: str, license: str, tags: Iterable[str], configs: list[WrittenConfig], default_config: str | None
) -> str:
    """The YAML header of a dataset card: `configs:` with one `test` split per config."""
    entries = []
    for written in configs:
        entry: dict[str, Any] = {
            "config_name": written.name,
            "data_files": [{"split": "test", "path": f"data/{written.name}/test-*.parquet"}],
        }
        if written.name == default_config:
            entry["default"] = True
        entries.append(entry)
    header = {"pretty_name": pretty_name, "license": license, "tags": list(tags), "configs": entries}
    return yaml_dump(header)


def yaml_dump(data: Any) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=1000)


def write_hub_folder(
    out_dir: Path,
    name: str,
    configs: list[ConfigData],
    *,
    manifest: dict[str, Any],
    render_card: Callable[[dict[str, Any], list[WrittenConfig]], str],
    rows_per_shard: int,
    overwrite: bool = False,
    on_rows: Callable[[str, int], None] | None = None,
) -> Path:
    """Write the whole dataset folder `out_dir/name` atomically; return its path.

    `manifest` holds everything but the per-config rows/files and the fingerprint, which
    are filled in here. `render_card(manifest, written)` returns the README.md text.
    """
    check_path_segment(name, "dataset name")
    if rows_per_shard < 1:
        raise OutputError(f"rows_per_shard must be positive, got {rows_per_shard}")
    out_dir = Path(out_dir)
    target = check_dataset_target(out_dir / name, overwrite=overwrite)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        tmp = make_staging_dir(out_dir, name)
    except OSError as exc:  # read-only or not-a-folder --out: the first write fails here
        raise OutputError(f"cannot write the dataset into {out_dir}: {exc.strerror or exc}") from exc
    with writing("the dataset folder", target), removed_on_error(tmp):
        written = [write_config(tmp, c, rows_per_shard=rows_per_shard, on_rows=on_rows) for c in configs]
        manifest = dict(manifest)
        manifest["configs"] = {w.name: {"rows": w.rows, "files": list(w.files)} for w in written}
        manifest["rows"] = {w.name: w.rows for w in written}
        manifest["fingerprint"] = compute_fingerprint(
            recipe_sha256=manifest["recipe"]["sha256"],
            parameters=manifest["parameters"],
            sources=manifest["sources"],
            configs=written,
        )
        write_text(tmp / BUILD_MANIFEST, json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        write_text(tmp / "README.md", render_card(manifest, written))
        swap_into_place(tmp, target, overwrite=overwrite)
    return target


def built_files(folder: Path) -> list[str] | None:
    """The files a build wrote into `folder`: its manifest, card and the data files the manifest lists."""
    try:
        configs = json.loads((Path(folder) / BUILD_MANIFEST).read_text(encoding="utf-8"))["configs"]
        data = [f["path"] for c in configs.values() for f in c["files"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return [BUILD_MANIFEST, "README.md", *(p for p in data if isinstance(p, str))]


#: a prompt dataset folder: `probes build` (and curate-pairs, rewrite) replace one only when it holds
#: nothing but what its build wrote
DATASET_OUTPUT = Output(
    "dataset folder",
    owns=Layout(
        required=(BUILD_MANIFEST,),
        files=(BUILD_MANIFEST, "README.md", "data/*/*.parquet"),
        folders=("data", "data/*"),
        listed=built_files,
    ),
)


def check_dataset_target(target: Path, *, overwrite: bool, inputs: Iterable[Input] = ()) -> Path:
    """`promptgen.core.outputs.check_output` for a dataset folder `OUT/<name>` (before any work)."""
    return check_output(target, DATASET_OUTPUT, overwrite=overwrite, inputs=inputs)
