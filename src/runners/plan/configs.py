"""The prompt configs a plan prices, and row access to one without loading it (`ConfigRows`).

A config of the full empathy sweep has 1.78 M rows: a plan reads only the row groups of the
calls it samples, so memory stays that of one row group plus one call. The folder's layout is
`promptgen.hub.read`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from promptgen.core.contract import check_column_types, check_number_ranges
from promptgen.core.errors import ProbeError
from promptgen.hub.read import (
    config_files,
    config_names,
    config_schema,
    data_folder,
    parquet_errors,
    read_build_manifest,
)
from promptgen.protocols import Protocol, manifest_protocol
from runners.selection.sample import SampleDraw, UnitIndex, unit_columns
from runners.selection.select import Selection, select_rows


def item_configs(dataset: Path) -> list[str]:
    """The configs whose rows are scored items (`task` choice or number in the first row group), in name order.

    Tables (events, identities) have no `task`; free-text items (`task` text, e.g. the empathy
    rewrite prompts) can only be generated: a plan prices them only when named (`--config`).
    """
    import pyarrow.parquet as pq

    if not data_folder(dataset).is_dir():
        raise ProbeError(f"{dataset} is not a prompt dataset folder (no data/ folder)")
    out = []
    for name in config_names(dataset):
        schema = config_schema(dataset, name, "prompt")
        if schema is None or "task" not in schema.names:
            continue
        first = config_files(dataset, name)[0]
        with parquet_errors(first, "prompt"):
            tasks = set(pq.ParquetFile(first).read_row_group(0, columns=["task"]).column("task").to_pylist())
        if tasks & {"choice", "number"}:
            out.append(name)
    return out


def config_protocols(dataset: Path, configs: Sequence[str]) -> dict[str, Protocol]:
    """The protocol the dataset's build manifest declares for each config that has one (`probes run`'s default)."""

    manifest = read_build_manifest(dataset)
    found = {c: manifest_protocol(manifest, c, f"{dataset}/build_manifest.json") for c in configs}
    return {c: protocol for c, protocol in found.items() if protocol is not None}


#: the item columns `prepare_request` reads (others are not loaded)
ITEM_COLUMNS = ("id", "task", "prompt", "messages", "choices", "choice_labels", "number_min", "number_max")


class ConfigRows:
    """Row access to one config's parquet files without loading them: counts from the footers, rows by range.

    With `where` (a protocol's row selection, `runners.selection.select.select_rows`), only the rows it keeps
    count, in table order: their positions come from the selection's columns alone. With `limit`, only
    the first `limit` of them (`probes run --limit`).
    """

    def __init__(
        self, files: Sequence[Path], where: Mapping[str, Sequence[str]] | None = None, limit: int | None = None
    ) -> None:
        import pyarrow.parquet as pq

        self.paths = list(files)
        self.files = []
        for path in self.paths:
            with parquet_errors(path, "prompt"):
                self.files.append(pq.ParquetFile(path))
        #: (file index, row group index, first row, rows) of every row group, in row order
        self.groups: list[tuple[int, int, int, int]] = []
        first = 0
        for k, pf in enumerate(self.files):
            for g in range(pf.metadata.num_row_groups):
                n = pf.metadata.row_group(g).num_rows
                self.groups.append((k, g, first, n))
                first += n
        self.rows = first
        names = self.files[0].schema_arrow.names if self.files else []
        self.columns = [c for c in ITEM_COLUMNS if c in names]
        for path, pf in zip(self.paths, self.files, strict=True):
            self._check_contract(path, pf)
        #: the kept rows' positions in the whole table (None: every row)
        self.kept: list[int] | None = None
        if where:
            self.kept = self._where(where)
            self.rows = len(self.kept)
        #: the rows the selection keeps, before the limit
        self.total_kept = self.rows
        self.limit = limit
        if limit is not None:  # the first `limit` rows (kept ones), as `probes run --limit`
            self.rows = min(self.rows, limit)

    def unit_index(self, seed: int) -> UnitIndex:
        """The config's sample units in their seeded order (`runners.selection.sample.UnitIndex`), over its kept
        rows; read once per seed from the unit columns alone."""
        cache = self.__dict__.setdefault("_unit_indexes", {})
        if seed not in cache:
            import pyarrow as pa

            names = self.files[0].schema_arrow.names if self.files else []
            columns = [c for c in names if c in unit_columns()]
            tables = []
            for path, pf in zip(self.paths, self.files, strict=True):
                with parquet_errors(path, "prompt"):
                    tables.append(pf.read(columns=columns))
            table = pa.concat_tables(tables) if tables else pa.table({})
            if self.kept is not None:
                table = table.take(self.kept)
            what = f"config {self.paths[0].parent.name!r}" if self.paths else "config"
            cache[seed] = UnitIndex.of(table, seed, what)
        return cache[seed]

    def sampled(self, size: int, seed: int) -> tuple[ConfigRows, SampleDraw]:
        """These rows narrowed to the sample of `size` units (`probes run --sample`, after the protocol's `where`),
        and the draw; the limit, if any, applies after it, as the run's does."""
        import copy

        # `select_rows`' sample step, from units indexed once per seed (a budget's bisection prices many sizes)
        draw = self.unit_index(seed).draw(size)
        out = copy.copy(self)
        base = self.kept if self.kept is not None else range(self.total_kept)
        out.kept = [base[i] for i in draw.rows]
        out.rows = len(out.kept) if self.limit is None else min(len(out.kept), self.limit)
        return out, draw

    def _where(self, where: Mapping[str, Sequence[str]]) -> list[int]:
        import pyarrow as pa

        names = self.files[0].schema_arrow.names if self.files else []
        columns = [c for c in where if c in names]
        tables = []
        for path, pf in zip(self.paths, self.files, strict=True):
            with parquet_errors(path, "prompt"):
                tables.append(pf.read(columns=columns))
        table = pa.concat_tables(tables) if tables else pa.table({})
        what = f"config {self.paths[0].parent.name!r}" if self.paths else "config"
        return list(select_rows(table, Selection(where=where), what).rows)

    @staticmethod
    def _check_contract(path: Path, pf: Any) -> None:
        """The item contract's column types and number ranges (a range of 2e9 values would be priced by
        building its trie), from the schema and four light columns: never the prompts themselves."""
        check_column_types(pf.schema_arrow, str(path))
        light = [c for c in ("id", "task", "number_min", "number_max") if c in pf.schema_arrow.names]
        with parquet_errors(path, "prompt"):
            table = pf.read(columns=light)
        check_number_ranges(table, str(path))

    def read(self, start: int, stop: int) -> list[dict[str, Any]]:
        """Rows `start` to `stop` (exclusive) as dicts of the item columns; reads only their row groups."""
        if self.kept is None:
            return self._read_range(start, stop)
        import bisect

        wanted = self.kept[start:stop]  # in table order
        firsts = [first for _, _, first, _ in self.groups]
        out: list[dict[str, Any]] = []
        at = 0
        while at < len(wanted):
            k, g, first, n = self.groups[bisect.bisect_right(firsts, wanted[at]) - 1]
            end = bisect.bisect_left(wanted, first + n, at)
            with parquet_errors(self.paths[k], "prompt"):
                table = self.files[k].read_row_group(g, columns=self.columns)
            out.extend(table.take([p - first for p in wanted[at:end]]).to_pylist())
            at = end
        return out

    def _read_range(self, start: int, stop: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for k, g, first, n in self.groups:
            if first + n <= start or first >= stop:
                continue
            with parquet_errors(self.paths[k], "prompt"):
                table = self.files[k].read_row_group(g, columns=self.columns)
            lo, hi = max(start, first) - first, min(stop, first + n) - first
            out.extend(table.slice(lo, hi - lo).to_pylist())
        return out
