"""`promptgen.core.memory`: the pages of a memory-mapped prompt config a read touched are given back, and the data
still reads the same. Checked in the kernel's own account of the mapping (`/proc/self/smaps`), Linux only."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from promptgen.core.contract import arrow_table
from promptgen.core.memory import release_mapped, resident_columns

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise and /proc/self/smaps: Linux")


def _resident_kb(path: str) -> int:
    """The resident kB of this process's mappings of `path`, as the kernel counts them."""
    real, total, current = os.path.realpath(path), 0, None
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5 and ":" in fields[3]:
                current = fields[5] if len(fields) > 5 else None
            elif fields[0] == "Rss:" and current == real:
                total += int(fields[1])
    return total


@pytest.fixture
def mapped(tmp_path: Path):
    """A dataset read as `datasets` reads a config: memory-mapped from its Arrow file (a few MB of text)."""
    import datasets

    rows = 40_000
    ids = [f"item-{k:06d}" for k in range(rows)]
    texts = [f"prompt {k} " + "x" * 200 for k in range(rows)]
    datasets.Dataset.from_dict({"id": ids, "text": texts, "n": list(range(rows))}).save_to_disk(tmp_path / "ds")
    ds = datasets.load_from_disk(str(tmp_path / "ds"))
    (cache,) = ds.cache_files
    return ds, cache["filename"], ids, texts


def test_release_mapped_gives_back_the_pages_a_read_touched_and_the_data_reads_the_same(mapped) -> None:
    ds, path, ids, texts = mapped
    table = arrow_table(ds)
    assert table["text"].to_pylist() == texts  # every page of the file read
    assert _resident_kb(path) > 4_000  # about 8 MB of text
    assert release_mapped(ds) >= 1
    assert _resident_kb(path) == 0
    assert table["text"].to_pylist() == texts and table["id"].to_pylist() == ids  # mapped again from the file
    release_mapped(ds)
    assert release_mapped(pa.table({"a": [1]})) == 0  # an in-memory table: nothing to give back


def test_resident_columns_copies_a_column_out_of_the_mapping(mapped) -> None:
    ds, path, ids, _ = mapped
    release_mapped(ds)
    table = resident_columns(ds, ["id", "n"], arrow_table(ds), rows=7_000)
    assert _resident_kb(path) == 0  # each slice's pages given back as it was copied
    assert table["id"].to_pylist() == ids and pc.sum(table["n"]).as_py() == sum(range(len(ids)))
    assert _resident_kb(path) == 0  # read again from memory, not from the file
    assert table.column_names == arrow_table(ds).column_names
