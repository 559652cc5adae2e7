"""Give memory back as a long read goes: the allocators' free lists, and a prompt config's mapped pages.

A config of millions of prompts is read through `datasets`, which memory-maps its Arrow cache
files. Every page a read touches then stays counted in the process's resident memory until the
kernel wants it back: reading all of a 2.4 GB config's messages (an import checks each one) left
2.4 GB resident on a machine with room to spare, where what the command holds is a few hundred MB.
`release_mapped` drops those pages from this process's page tables (`madvise(MADV_DONTNEED)`):
the mapping stays valid, the page cache keeps the bytes, and the next read of a dropped page
maps it again from there. Only read-only file mappings of the dataset's own cache files are
touched, so nothing written can be lost. A reader of a config in bounded slices calls it after
each slice, and its resident memory is a slice's, not the config's. Elsewhere than Linux with
glibc, both functions do nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pyarrow as pa

#: `madvise`'s advice: drop the pages of the range from this process; a later access maps them again
MADV_DONTNEED = 4
_MAPS = "/proc/self/maps"


def release_memory(*datasets: Any) -> None:
    """Give back what the allocators keep for reuse (Arrow's pool, glibc's heap: what a freed chunk left) and the
    pages of `datasets`' memory-mapped cache files this process has read (`release_mapped`)."""
    pa.default_memory_pool().release_unused()
    if _LIBC is not None:
        _LIBC.malloc_trim(0)
    release_mapped(*datasets)


def release_mapped(*datasets: Any) -> int:
    """Drop the resident pages of the memory-mapped Arrow cache files of `datasets` (`datasets.Dataset`s; anything
    without `cache_files`, an in-memory table, is skipped); the number of mappings released."""
    names = {os.path.realpath(f["filename"]) for ds in datasets for f in getattr(ds, "cache_files", None) or ()}
    if not names or _LIBC is None:
        return 0
    released = 0
    for start, end in _read_only_mappings(names):
        if _LIBC.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), MADV_DONTNEED) == 0:
            released += 1
    return released


def resident_columns(ds: Any, columns: Sequence[str], table: pa.Table, rows: int = 1 << 17) -> pa.Table:
    """`table` (the Arrow table of `ds`) with its `columns` copied into memory a slice of `rows` at a time, the
    mapped pages each slice read released after it (`release_mapped`); its other columns left as they are.

    A check of every row of a few small columns of a mapped config reads a few bytes of each record batch, and
    the kernel maps the pages around each one it reads too: about 150 MB resident for one int32 column of a
    2.2 M-row config. Copied, the column is its own size (9 MB), and a check that reads it again maps nothing.
    """
    if not getattr(ds, "cache_files", None) or not len(table):
        return table
    for name in columns:
        if name not in table.column_names:
            continue
        column = table[name]
        pieces = []
        for start in range(0, len(column), rows):
            pieces.append(pa.concat_arrays(column.slice(start, rows).chunks))  # a copy, out of the mapping
            release_mapped(ds)
        table = table.set_column(table.schema.get_field_index(name), name, pa.chunked_array(pieces, column.type))
    return table


def _read_only_mappings(names: set[str]) -> Iterable[tuple[int, int]]:
    """(start, end) of each mapping of one of the files `names` that this process can read but not write."""
    try:
        with open(_MAPS, encoding="utf-8", errors="replace") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or "w" in fields[1] or fields[5] not in names:
            continue
        start, _, end = fields[0].partition("-")
        found.append((int(start, 16), int(end, 16)))
    return found


class _Libc:
    """The C library's `madvise` and `malloc_trim` (glibc on Linux)."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.madvise: Callable[..., int] = lib.madvise
        self.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        self.madvise.restype = ctypes.c_int
        self.malloc_trim: Callable[[int], int] = lib.malloc_trim


def _libc() -> _Libc | None:
    if not os.path.exists(_MAPS):
        return None
    try:
        return _Libc(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"))
    except (OSError, AttributeError):
        return None


_LIBC = _libc()
