"""`ColumnBatches` against the row path it replaces: the same rows as dicts through `row_batches` and the
writer's `pa.Table.from_pydict` give equal tables, cut at the same rows, and equal parquet bytes."""

from __future__ import annotations

import io
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets import List, Value

from promptgen.core.contract import contract_row, item_features
from promptgen.hub.column_batches import ColumnBatches
from promptgen.hub.folder import PARQUET_OPTIONS, row_batches

FEATURES = item_features({"group": Value("string"), "k": Value("int64"), "tags": List(Value("string"))})


def _groups(seed: int, count: int) -> list[tuple[str, list[str], list[int], list[str]]]:
    """Random groups of rows: a shared label, per-row prompts and numbers, and two tags per row."""
    rng = random.Random(seed)
    groups = []
    for g in range(count):
        n = rng.randint(1, 7)
        prompts = [f"prompt {g}.{i} {'x' * rng.randint(0, 30)}" for i in range(n)]
        groups.append((f"g{g % 5}", prompts, [rng.randint(-5, 10**12) for _ in range(n)], ["a", "b"] * n))
    return groups


def _rows(groups):
    for label, prompts, ks, tags in groups:
        for i, (prompt, k) in enumerate(zip(prompts, ks, strict=True)):
            row = contract_row(f"{label}.{k}.{i}", "p", "choice", prompt, [{"role": "user", "content": prompt}])
            row.update(choices=["yes", "no"], choice_labels=["A", "B"], group=label, k=k, tags=tags[2 * i : 2 * i + 2])
            yield row


def _column_tables(groups, size: int) -> list[pa.Table]:
    batches = ColumnBatches(FEATURES, size=size)
    tables = []
    for label, prompts, ks, tags in groups:
        batches.add(
            len(prompts),
            same={"probe": "p", "task": "choice", "choices": ["yes", "no"], "choice_labels": ["A", "B"]}
            | {"choice_types": [], "number_min": None, "number_max": None, "group": label},
            each={"id": [f"{label}.{k}.{i}" for i, k in enumerate(ks)], "prompt": prompts, "k": ks},
            flat={"tags": (tags, 2)},
        )
        tables += batches.tables()
    return tables + list(batches.tables(final=True))


def _parquet(tables: list[pa.Table]) -> bytes:
    sink = io.BytesIO()
    with pq.ParquetWriter(sink, FEATURES.arrow_schema, **PARQUET_OPTIONS) as writer:
        writer.write_table(pa.concat_tables(tables), row_group_size=10**6)
    return sink.getvalue()


@pytest.mark.parametrize(("seed", "count", "size"), [(0, 40, 16), (1, 300, 100), (2, 3, 1000)])
def test_the_same_tables_and_bytes_as_the_row_path(seed, count, size):
    groups = _groups(seed, count)
    schema = FEATURES.arrow_schema
    expected = [pa.Table.from_pydict(b, schema=schema) for b in row_batches(_rows(groups), schema.names, size)]
    got = _column_tables(groups, size)
    assert [len(t) for t in got] == [len(t) for t in expected]
    assert all(t.schema.equals(schema) for t in got)
    assert pa.concat_tables(got).to_pylist() == pa.concat_tables(expected).to_pylist()
    assert _parquet(got) == _parquet(expected)


def test_columns_must_match_the_features():
    batches = ColumnBatches(FEATURES)
    complete = {
        "same": {"probe": "p", "task": "t", "choices": [], "choice_labels": [], "choice_types": []}
        | {"number_min": None, "number_max": None, "group": "g"},
        "each": {"id": ["a"], "prompt": ["p"], "k": [1]},
        "flat": {"tags": (["t"], 1)},
    }
    batches.add(1, **complete)
    with pytest.raises(ValueError, match=r"missing \['k'\]"):
        batches.add(1, same=complete["same"], each={"id": ["b"], "prompt": ["q"]}, flat=complete["flat"])
    with pytest.raises(ValueError, match=r"extra \['nope'\]"):
        batches.add(1, same={**complete["same"], "nope": 1}, each=complete["each"], flat=complete["flat"])
    with pytest.raises(ValueError, match=r"scalars as lists \['tags'\]"):
        batches.add(1, same=complete["same"], each={**complete["each"], "tags": ["t"]})
    with pytest.raises(ValueError, match="2 values expected"):
        batches.add(2, **complete)
    with pytest.raises(ValueError, match="1 rows of 2 expected"):
        batches.add(1, same=complete["same"], each=complete["each"], flat={"tags": (["t"], 2)})
    assert [len(t) for t in batches.tables(final=True)] == [1]
