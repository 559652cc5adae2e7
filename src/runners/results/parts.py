"""A key folder's parquet parts: the row schema, atomic writes, merged reads (the newest part wins) and compaction."""

from __future__ import annotations

import contextlib
import os
import re
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from promptgen.core.errors import ProbeError
from promptgen.core.files import _umask, atomic_write, writing

T = TypeVar("T")

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
        ("number_bound", pa.float64()),  # number items: certified L1 bound (`scoring.number_bound`); trie positions
        ("trie_positions", pa.int64()),
        ("prompt_sha256", pa.string()),
    ]
)


#: a part's Parquet metadata key for the prompt content its rows were scored on (module docstring)
PART_CONTENT = b"probes.prompt_content"
#: a part's Parquet metadata key saying it holds each id once ("1"): compaction's parts, an import's merged part
PART_UNIQUE = b"probes.one_row_per_id"


#: `seq` is the writing time in ns (older layouts: a per-shard counter); `writer` tells concurrent writers apart
_PART = re.compile(r"^part-(?P<shard>[0-9]+of[0-9]+)-(?P<seq>[0-9]+)(?:-(?P<writer>[0-9a-z]+))?\.parquet$")


#: this process's writer tag: its pid and a random suffix (pids are reused across machines)
_WRITER = f"{os.getpid():x}{uuid.uuid4().hex[:6]}"


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


#: how often a reader lists a key folder again when a part it listed was merged away meanwhile
RELISTS = 20


def read_listed(folder: Path, read: Callable[[list[Path]], T]) -> T:
    """`read(part_files(folder))`, listed again when a part it listed is gone by the time it is read.

    Writers never change a part: they add parts, and a merge removes the parts it read only after the
    merged part is in place (`merge_parts`, `compact_key`, under the folder's lock). A reader that does
    not hold that lock (a second run's start or manifest update on the same key) can list a part that
    another process then merges away; the next listing holds the same rows in the merged part.
    """
    for _ in range(RELISTS):
        paths = part_files(folder)
        try:
            return read(paths)
        except (ProbeError, OSError):
            if all(p.exists() for p in paths):  # a part that cannot be read, not one merged away
                raise
    return read(part_files(folder))  # still changing: this try's error, as it is


def read_key_rows(folder: Path, columns: Sequence[str] | None = None, *, file_column: str | None = None) -> pa.Table:
    """Every row of a key folder, one per id: where parts repeat an id, the newest part's row wins.

    `file_column` names a column to add with each row's part file (for error messages). The parts are
    read as one listing (`read_listed`), so a concurrent merge does not fail the read.
    """
    return read_listed(folder, lambda paths: _merged_rows(paths, columns, file_column))


def _merged_rows(paths: list[Path], columns: Sequence[str] | None, file_column: str | None) -> pa.Table:
    cols = None if columns is None else list(dict.fromkeys(["id", *columns]))
    tables = []
    for path in paths:
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


def row_counts(folder: Path) -> tuple[int, int]:
    """(rows, refused rows) stored under one key folder: every stored row, not one run's.

    A folder of one part that holds each id once (`PART_UNIQUE`) is counted from its `refused` column alone,
    without its ids (a manifest update counts every key folder: millions of ids, each time).
    """

    def refused_column(parts: list[Path]) -> pa.ChunkedArray:
        if len(parts) == 1 and (part_schema(parts[0]).metadata or {}).get(PART_UNIQUE) == b"1":
            return read_part(parts[0], ["refused"]).column("refused")
        return _merged_rows(parts, ["refused"], None).column("refused")

    refused = read_listed(folder, refused_column)
    return len(refused), int(pc.sum(refused.cast(pa.int64())).as_py() or 0)


def newest_rows(ids: pa.ChunkedArray | pa.Array) -> pa.Array | None:
    """The row of each id's last occurrence, in row order (None when no id repeats): the merge rule, in Arrow."""
    if pc.count_distinct(ids).as_py() == len(ids):
        return None
    rows = pa.table({"id": ids, "row": pa.array(np.arange(len(ids), dtype=np.int64))})
    last = rows.group_by("id", use_threads=False).aggregate([("row", "max")]).column("row_max")
    return pa.array(np.sort(last.to_numpy()))


def write_part(
    folder: Path, shard: tuple[int, int], rows: Sequence[Mapping[str, Any]] | pa.Table, *, content: str | None = None
) -> Path:
    """Write rows (dicts, or an Arrow table of the schema's columns) as a new `part-<i>of<n>-<time>-<writer>.parquet`,
    atomically; `content`: see `PART_CONTENT`."""
    label = f"{shard[0]:05d}of{shard[1]:05d}"
    return _write_new_part(folder, label, rows_table(rows), content=content)


def rows_table(rows: Sequence[Mapping[str, Any]] | pa.Table) -> pa.Table:
    """Result rows as an Arrow table of `RESULT_SCHEMA` (a table's columns it lacks added as nulls)."""
    if isinstance(rows, pa.Table):
        columns = [
            rows[name].cast(field.type) if name in rows.column_names else pa.nulls(len(rows), field.type)
            for name, field in zip(RESULT_SCHEMA.names, RESULT_SCHEMA, strict=True)
        ]
        return pa.Table.from_arrays(columns, schema=RESULT_SCHEMA)
    return pa.Table.from_pylist([{name: row.get(name) for name in RESULT_SCHEMA.names} for row in rows], RESULT_SCHEMA)


class PartWriter:
    """One part written as its rows come (row groups per `write`), put in place by `close`, atomically.

    The rows go to a hidden temporary file in the key folder (`.part-*.tmp`, what a killed writer
    leaves and the next one removes); `close` names the part (its time then, so it is the newest) and
    renames it into place; `abort` removes it. Memory holds one `write`'s rows, never the part's.
    """

    def __init__(self, folder: Path, label: str, *, content: str | None = None, unique: bool = False) -> None:
        import tempfile

        self.folder, self.label = Path(folder), label
        self.schema = RESULT_SCHEMA.with_metadata(_part_metadata(content, unique))
        with writing("a result part", self.folder):
            fd, tmp = tempfile.mkstemp(prefix=f".part-{self.label}-", suffix=".tmp", dir=self.folder)
            os.close(fd)
        self.tmp = Path(tmp)
        self.rows = 0
        self._writer: pq.ParquetWriter | None = None
        with self._writing():
            self._writer = pq.ParquetWriter(str(self.tmp), self.schema, compression="zstd")

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """A write error (disk full) is one line naming the key folder; the temporary file is removed."""
        try:
            with writing("a result part", self.folder):
                yield
        except BaseException:
            self.abort()
            raise

    def write(self, rows: pa.Table) -> None:
        """Append `rows` (a `RESULT_SCHEMA` table) as row groups of the part."""
        assert self._writer is not None, "the part is closed"
        if len(rows):
            with self._writing():
                self._writer.write_table(rows.cast(self.schema), row_group_size=len(rows))
            self.rows += len(rows)

    def close(self) -> Path | None:
        """Put the part in place (None when no row was written: the temporary file is removed)."""
        assert self._writer is not None, "the part is closed"
        with self._writing():
            self._writer.close()
        self._writer = None
        if not self.rows:
            self.tmp.unlink(missing_ok=True)
            return None
        os.chmod(self.tmp, 0o666 & ~_umask())
        seq = time.time_ns()
        while True:
            path = self.folder / f"part-{self.label}-{seq:020d}-{_WRITER}.parquet"
            if not path.exists():
                break
            seq += 1
        os.replace(self.tmp, path)
        return path

    def abort(self) -> None:
        """Remove the temporary file (the rows written are lost)."""
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(OSError, pa.ArrowException):
                writer.close()
        self.tmp.unlink(missing_ok=True)


#: rows a merge reads and writes at a time
MERGE_ROWS = 16_384


def merge_parts(folder: Path, parts: Sequence[Path], *, content: str | None = None) -> Path | None:
    """Rewrite `parts` of a key folder as one part, `MERGE_ROWS` rows at a time; for the parts of one writer whose
    rows are each id once (`runners.run.session.Session`'s `merge_parts`), which compaction would read back whole.
    The merged part says so (`PART_UNIQUE`).

    Under the folder's lock, as `compact_key`; the merged part is in place before the parts are removed, so a
    crash leaves the same rows twice at most, which merge the same. A part another run on the key has
    compacted meanwhile is gone, its rows in that run's merged part: it is left out.
    """
    if len(parts) < 2:
        return None
    newest = _PART.match(parts[-1].name)
    assert newest is not None, parts[-1]
    with file_lock(folder / "parts"):
        parts = [p for p in parts if p.exists()]
        if len(parts) < 2:
            return None
        writer = PartWriter(folder, newest["shard"], content=content, unique=True)
        try:
            for path in parts:
                try:
                    batches = pq.ParquetFile(path).iter_batches(batch_size=MERGE_ROWS, columns=RESULT_SCHEMA.names)
                    for batch in batches:
                        writer.write(rows_table(pa.Table.from_batches([batch])))
                    pa.default_memory_pool().release_unused()  # what the part's reading freed, not kept for the next
                except (OSError, pa.ArrowException) as exc:
                    raise ProbeError(f"{path}: cannot read result part parquet ({exc})") from exc
            merged = writer.close()
        except BaseException:
            writer.abort()
            raise
        for path in parts:
            path.unlink(missing_ok=True)
    return merged


def part_content(schema: pa.Schema) -> str | None:
    """The prompt content a part's rows were scored on, from its schema's metadata (None: not recorded)."""
    value = (schema.metadata or {}).get(PART_CONTENT)
    return value.decode("ascii", "replace") if value else None


def _part_metadata(content: str | None, unique: bool) -> dict[bytes, bytes] | None:
    metadata = {PART_CONTENT: content.encode("ascii")} if content else {}
    return {**metadata, PART_UNIQUE: b"1"} if unique else metadata or None


def _write_new_part(
    folder: Path, label: str, table: pa.Table, seq: int | None = None, content: str | None = None, unique: bool = False
) -> Path:
    table = table.replace_schema_metadata(_part_metadata(content, unique))
    seq = time.time_ns() if seq is None else seq
    while True:
        path = folder / f"part-{label}-{seq:020d}-{_WRITER}.parquet"
        if not path.exists():
            break
        seq += 1
    atomic_write(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))
    return path


def file_lock(path: Path):
    """An inter-process lock file beside `path` (hidden, so never published)."""
    from filelock import FileLock

    return FileLock(str(path.parent / f".{path.name}.lock"))


def compact_key(
    folder: Path, *, content: str | None = None, checked: Collection[str] = (), ids: pa.Array | None = None
) -> bool:
    """Rewrite a key folder as one part per prompt content with one row per id (True when it did; else as it was).

    The rows of the parts `checked` (those whose id is in `ids`, when given) were found current
    under `content` by a run (`runners.results.resume`): they join its part. Under the folder's lock;
    only the parts read are removed, after the merged ones are in place, so a part another
    process adds meanwhile is kept, and a crash at any point leaves rows that merge the same.
    """
    with file_lock(folder / "parts"):
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
        labels: list[str | None] = [*sorted({c for c in (*stored, content) if c is not None}), None]
        row_label = np.array([labels.index(c) for c in stored], dtype=np.int64)[origin]
        moved = np.isin(origin, relabel)
        if ids is not None:
            moved &= pc.is_in(merged.column("id"), value_set=ids).to_numpy(zero_copy_only=False)
        row_label[moved] = labels.index(content)
        newest = _PART.match(parts[-1].name)
        assert newest is not None
        for n, code in enumerate(np.unique(row_label).tolist()):
            rows = merged.take(pa.array(np.flatnonzero(row_label == code))).cast(RESULT_SCHEMA)
            _write_new_part(folder, newest["shard"], rows, int(newest["seq"]) + 1 + n, labels[code], unique=True)
        for path in parts:
            path.unlink(missing_ok=True)
        return True


def _repeats(parts: list[Path]) -> bool:
    """Whether an id has rows in two of `parts`."""
    return len(parts) > 1 and newest_rows(pa.concat_tables(read_part(p, ["id"]) for p in parts)["id"]) is not None
