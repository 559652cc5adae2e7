"""What the import formats share: the files found, a file's checked rows, the row template, cell errors.

A format (`ImportFormat`) finds its files in the folder it is given (`discover`), says how
their answers were scored (the scoring settings, chat or plain), prepares a lookup per prompt
config (`prepare`), and turns one file into checked result rows, raising one `ProbeError` line
naming the file, the row and the field for anything it cannot take. `probes.importer.import_results`
reads each file once: from a stream, chunk by chunk, when the format can (`read`, a generator of
checked chunks: what a release's files of hundreds of MB need, so memory holds a chunk, never a
file), else as its bytes (`parse`: the file as one chunk). Each chunk's rows are made as it is
read and kept on disk until every file is checked; only then is anything written.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import numpy as np
import pyarrow as pa

from promptgen.core.contract import arrow_table, take_chunked
from promptgen.core.errors import ProbeError
from promptgen.core.memory import release_mapped
from runners.prompts import PromptConfig
from runners.results import RESULT_SCHEMA, rows_table
from runners.scoring.settings import ScoringSettings


@dataclass(frozen=True)
class SourceFile:
    """One file of an import: where it is here, its name relative to the imported folder, its config."""

    path: Path
    #: the posix path relative to the imported folder: what the manifest records (never a local path)
    name: str
    config: str
    #: what the file's path says of its rows (the release's outcome and dimension, the authors' group)
    meta: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ParsedFile:
    """A file's rows (or a chunk's), checked against its prompt config: the prompt rows they answer, the result rows."""

    #: each row's position in the prompt config, in file order
    positions: np.ndarray
    #: the result rows, in the order of `positions`: dicts, or an Arrow table of result columns (those it lacks
    #: are null); made on demand, once the chunk is checked
    rows: Callable[[], list[dict[str, Any]] | pa.Table]


class ImportFormat(Protocol):
    """One `probes import --format`: its files, how their answers were scored, their rows."""

    name: str
    #: the `backend` the rows and the key record: `import:<format>`
    backend: str
    #: one line for --help and errors: the layout this format reads
    layout: str

    def scoring(self) -> tuple[ScoringSettings, bool]:
        """The scoring settings and chat form the format's answers were produced with (the key's)."""
        ...

    def configs(self) -> Collection[str]:
        """Every prompt config the format can hold (what `--config` may name)."""
        ...

    def discover(self, folder: Path, source_model: str | None) -> list[SourceFile]:
        """The format's files in `folder`, sorted by name; a file that breaks the layout is an error."""
        ...

    def prepare(self, prompts: PromptConfig) -> Any:
        """What `parse` looks items up in, made once per prompt config; missing columns are an error."""
        ...

    def parse(self, source: SourceFile, data: bytes, prompts: PromptConfig, index: Any) -> ParsedFile:
        """The checked rows of one file's bytes; anything wrong is one `ProbeError` line."""
        ...


class ChunkedImportFormat(ImportFormat, Protocol):
    """A format that reads a file once, as a stream, in chunks (the importer uses `read` where a format has it)."""

    def read(self, source: SourceFile, stream: BinaryIO, prompts: PromptConfig, index: Any) -> Iterator[ParsedFile]:
        """The file's rows from `stream`, a chunk at a time, each checked as it is read (anything wrong is one
        `ProbeError` line naming the file's row); the importer makes a chunk's rows before it asks for the next.
        Every row read is in one chunk; a chunk may come after a later one (a format that must see the whole file
        to make some rows)."""
        ...


def rows_to_arrow(rows: Iterable[Mapping[str, Any]], batch: int = 8_192) -> pa.Table:
    """Result rows (dicts) as an Arrow table of `RESULT_SCHEMA`, `batch` dicts at a time: a chunk of rows made one
    by one never holds them all as dicts."""
    tables, pending = [], []
    for row in rows:
        pending.append(row)
        if len(pending) == batch:
            tables.append(rows_table(pending))
            pending = []
    if pending or not tables:
        tables.append(rows_table(pending))
    return pa.concat_tables(tables)


def prompt_rows(prompts: PromptConfig, positions: np.ndarray, columns: Sequence[str]) -> pa.Table:
    """The `columns` of the prompt rows at `positions` (in that order), reading only the record batches they fall in
    (`take_chunked`: Arrow's `take` on a table of many record batches joins each column's batches into one first, a
    whole config's messages for a chunk's rows); the pages read given back (`promptgen.core.memory`)."""
    table = arrow_table(prompts.dataset.select_columns(list(columns)))
    taken = take_chunked(table, positions)  # copies: nothing here points into the mapped file
    del table
    release_mapped(prompts.dataset)  # the pages read stay resident otherwise
    return taken


def layout_files(folder: Path, suffix: str, *, recursive: bool, fmt: str, under: str = "") -> list[Path]:
    """Every path in `folder / under` whose name ends in `suffix` (its subfolders too when `recursive`), sorted:
    the files a format reads. A folder reached through a link is followed, as the release's own folders are, so a
    layout assembled from links reads as the same layout (each file is named by its path in `folder`, never where
    the link points). A name that ends in `suffix` but is no file the import can read is one line naming it and what
    to do, never a silent skip that would import fewer files than the folder shows: a link to nothing, a folder,
    FIFO or device, a file this user may not read, a folder that cannot be listed or that a link leads back to.
    """
    found: list[Path] = []
    top = folder / under
    ancestors = {folder.resolve(), top.resolve()}

    def walk(directory: Path, above: frozenset[Path]) -> None:
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            raise _unusable(folder, directory, fmt, f"cannot list it ({exc.strerror or exc})") from exc
        for entry in entries:
            path = Path(entry.path)
            if recursive and entry.is_dir(follow_symlinks=True):
                real = path.resolve()
                if real in above:
                    raise _unusable(folder, path, fmt, f"a link to {real}, a folder above it: the walk would not end")
                walk(path, above | {real})
            elif path.name.endswith(suffix):
                found.append(_readable(folder, path, fmt))

    walk(top, frozenset(ancestors))
    return sorted(found)


def _readable(folder: Path, path: Path, fmt: str) -> Path:
    """`path`, a file the import can open and read to its end; anything else is one line naming it."""
    if path.is_symlink() and not path.exists():
        target = os.readlink(path)
        raise _unusable(
            folder, path, fmt, f"a link to {target}, which does not exist: remove it, or point it at the file"
        )
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise _unusable(folder, path, fmt, f"cannot read it ({exc.strerror or exc})") from exc
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
        raise _unusable(folder, path, fmt, f"{kind}, not a file: put the file itself there, or move it out")
    if not os.access(path, os.R_OK):
        raise _unusable(folder, path, fmt, "cannot read it (permission denied): give this user read permission")
    return path


#: what `stat` calls each kind of path that is not a regular file
_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def _unusable(folder: Path, path: Path, fmt: str, problem: str) -> ProbeError:
    name = path.relative_to(folder).as_posix() if path != folder else str(folder)
    return ProbeError(f"{name}: {problem} (--format {fmt})")


def empty_row(item_id: str, backend: str) -> dict[str, Any]:
    """A result row with every column of the schema empty but the id and backend (the session stamps the key)."""
    row: dict[str, Any] = dict.fromkeys(RESULT_SCHEMA.names)
    row.update(id=item_id, backend=backend, valid_mass=math.nan, refused=False)
    return row


def row_error(source: SourceFile, row: int, column: str, problem: str) -> ProbeError:
    """`<file>: row <n>, column <name>: <problem>`; rows count from 1 after the header."""
    return ProbeError(f"{source.name}: row {row + 1}, column {column!r}: {problem}")


def first(mask: np.ndarray) -> int | None:
    """The first True position of a boolean mask, or None."""
    hits = np.flatnonzero(mask)
    return int(hits[0]) if len(hits) else None


def need_columns(prompts: PromptConfig, columns: Sequence[str], why: str) -> None:
    """Refuse a prompt config that lacks a column the format joins or checks on."""
    missing = [c for c in columns if c not in prompts.dataset.column_names]
    if missing:
        raise ProbeError(
            f"{prompts.path} config {prompts.config!r} has no column(s) {', '.join(missing)}, which {why} needs"
        )


def first_difference(a: str, b: str) -> str:
    """Where two texts first differ, shown short: `at character 12: '...x' vs '...y'`."""
    k = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    lo = max(0, k - 20)
    return f"at character {k}: {a[lo : k + 20]!r} vs {b[lo : k + 20]!r}"
