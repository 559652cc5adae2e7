"""The item contract and the result-row checks (DESIGN section 2), each one line before anything loads.

Every case here used to pass or crash: `choices` typed as a string was scored as 208
one-character options, an integer id or a null prompt under --no-chat was a traceback, a range
of 2e9 values grew to 19 GB, `-c ..` wrote outside `data/`, an extra parquet in a built folder
was scored under the old fingerprint, and results read without their manifest were analysed
against reordered options. Runs are given a model path that does not exist: an error about
the model would mean the contract check came too late.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from datasets import Features, Value
from typer.testing import CliRunner

import runners.results as res
from analysis.load import join, load_prompts, load_results
from cli_fixture import LIBRARY_PROGRESS, one_line_error
from loop_items import FEATURES, ITEMS, write_loop_prompts
from probes.cli import app
from promptgen.core.errors import ProbeError
from release_fixture import load_config

runner = CliRunner()
SCORING = '{"choice_mode":"sentence"}'


def _items(**change: Any) -> list[dict[str, Any]]:
    """The loop tests' items, the first choice item (k=0) or number item (k=4) changed."""
    items = copy.deepcopy(ITEMS)
    for name, value in change.items():
        k, field = name.split("__")
        items[int(k.removeprefix("i"))][field] = value
    return items


def _run(dataset: Path, tmp_path: Path, *extra: str, config: str = "items"):
    out = tmp_path / "results"
    args = ["run", str(dataset), "-c", config, "--model", str(tmp_path / "no-such-model"), "--out", str(out)]
    result = runner.invoke(app, [*args, "-q", *extra])
    assert not out.exists()  # nothing written
    return result


# ----------------------------------------------------------------------------- bad items


def _string_choices(tmp_path: Path) -> Path:
    items = [{**item, "choices": " / ".join(item["choices"] or [])} for item in copy.deepcopy(ITEMS)]
    return write_loop_prompts(tmp_path / "p", items, Features({**FEATURES, "choices": Value("string")}))


BAD_ITEMS: list[tuple[str, Callable[[Path], Path], tuple[str, ...]]] = [
    ("choices typed string", _string_choices, ("column 'choices' has type string", "list of strings")),
    ("null id", lambda t: write_loop_prompts(t / "p", _items(i1__id=None)), ("row 1", "field 'id' is null")),
    (
        "null choices",
        lambda t: write_loop_prompts(t / "p", _items(i2__choices=None)),
        ("choice-aisha", "field 'choices'"),
    ),
    (
        "range of 2e9 values",
        lambda t: write_loop_prompts(t / "p", _items(i4__number_max=2_000_000_000)),
        ("id 'number-maria'", "field 'number_max'", "more than 10,000 above"),
    ),
    (
        # int64 extremes: their difference wraps around in int64 arithmetic
        "range of int64 extremes",
        lambda t: write_loop_prompts(
            t / "p",
            _items(i4__number_min=-(2**62), i4__number_max=2**62),
            Features({**FEATURES, "number_min": Value("int64"), "number_max": Value("int64")}),
        ),
        ("id 'number-maria'", "field 'number_max'", "more than 10,000 above"),
    ),
    (
        "number_min above number_max",
        lambda t: write_loop_prompts(t / "p", _items(i5__number_min=11)),
        ("id 'number-john'", "field 'number_max' is below `number_min`"),
    ),
]


@pytest.mark.parametrize(("name", "make", "says"), BAD_ITEMS, ids=[c[0] for c in BAD_ITEMS])
def test_bad_items_are_one_line_before_the_model_loads(tmp_path: Path, name: str, make, says) -> None:
    dataset = make(tmp_path)
    one_line_error(_run(dataset, tmp_path), str(dataset), *says, ignore=LIBRARY_PROGRESS)


@pytest.mark.parametrize("config", ["", "..", "../items", ".hidden"])
def test_a_config_name_that_is_not_one_path_segment_is_refused(tmp_path: Path, config: str) -> None:
    dataset = write_loop_prompts(tmp_path / "p", ITEMS)
    one_line_error(
        _run(dataset, tmp_path, config=config), f"invalid config name (--config) {config!r}", ignore=LIBRARY_PROGRESS
    )
    with pytest.raises(ProbeError, match="one path segment"):
        res.key_dir(tmp_path / "r", config, res.ResultKey("m", "rev", SCORING))


def test_an_unlisted_or_changed_data_file_is_refused(tmp_path: Path) -> None:
    dataset = write_loop_prompts(tmp_path / "p", ITEMS)
    shard = dataset / "data" / "items" / "test-00000-of-00001.parquet"
    other = write_loop_prompts(tmp_path / "q", _items(i0__choices=list(reversed(ITEMS[0]["choices"]))))
    extra = shard.with_name("test-00001-of-00001.parquet")
    shutil.copy(other / "data" / "items" / shard.name, extra)
    one_line_error(
        _run(dataset, tmp_path),
        str(dataset),
        f"not listed in the manifest: data/items/{extra.name}",
        ignore=LIBRARY_PROGRESS,
    )
    extra.unlink()
    shutil.copy(other / "data" / "items" / shard.name, shard)
    one_line_error(_run(dataset, tmp_path), f"sha256 differs: data/items/{shard.name}", ignore=LIBRARY_PROGRESS)


# ----------------------------------------------------------------------------- result rows


def _recorded(results: Path, config: str, key: res.ResultKey, items: int) -> None:
    """The run recorded in the results manifest, as a finished run records it (analyze reads only such keys)."""
    entry = {"prompt_dataset": {"config": config}, "model": key.model, "key": key.slug, "items": items}
    res.update_manifest(results, f"{config}/{key.slug}/shard-0of1", entry)


def _results(results: Path, rows: list[dict[str, Any]]) -> Path:
    key = res.ResultKey("org/model", "rev", SCORING)
    folder = res.key_dir(results, "items", key)
    res.write_key_file(folder, key)
    part = res.write_part(folder, (0, 1), [{**key.as_dict(), "refused": False, **r} for r in rows])
    _recorded(results, "items", key, len(rows))
    return part


def _answers() -> list[dict[str, Any]]:
    """Plausible rows for every item: choice items with probabilities, number items with values in 0..10."""
    return [
        {"id": item["id"], "choice_probs": [0.4, 0.3, 0.2, 0.1], "chosen_index": 0, "valid_mass": math.nan}
        if item["task"] == "choice"
        else {"id": item["id"], "expected_value": 4.5, "argmax_value": 4, "valid_mass": 0.9}
        for item in ITEMS
    ]


BAD_ROWS = [
    ("expected_value of 1e6", 4, {"expected_value": 1e6}, "'number-maria', column 'expected_value': value 1000000.0"),
    ("argmax_value below range", 5, {"argmax_value": -1}, "'number-john', column 'argmax_value': value -1.0"),
    ("infinite expected_value", 6, {"expected_value": math.inf}, "column 'expected_value': value inf"),
    ("chosen_index past the options", 1, {"chosen_index": 4}, "'choice-john', column 'chosen_index': value 4.0"),
    ("null choice_probs", 2, {"choice_probs": None}, "'choice-aisha', column 'choice_probs': null on a choice"),
    ("choice_probs too short", 3, {"choice_probs": [0.5, 0.5]}, "column 'choice_probs': has 2 values, its item 4"),
    ("null id", 0, {"id": None}, "row 0, column 'id': null"),
]


@pytest.mark.parametrize(("name", "row", "change", "says"), BAD_ROWS, ids=[c[0] for c in BAD_ROWS])
def test_bad_result_rows_are_refused_by_analyze(tmp_path: Path, name: str, row: int, change, says: str) -> None:
    dataset = write_loop_prompts(tmp_path / "p", ITEMS)
    rows = _answers()
    _results(tmp_path / "ok", rows)
    assert len(join(load_prompts(dataset, "items"), load_results(tmp_path / "ok", "items"))) == len(rows)
    rows[row].update(change)
    part = _results(tmp_path / "r", rows)
    args = ["analyze", "--prompts", str(dataset), "--results", str(tmp_path / "r"), "--out", str(tmp_path / "rep")]
    one_line_error(
        runner.invoke(app, [*args, "--no-figures"], terminal_width=400), str(part), says, ignore=LIBRARY_PROGRESS
    )
    assert not (tmp_path / "rep").exists()


def test_generated_answers_out_of_range_are_refusals_not_bad_rows(tmp_path: Path) -> None:
    """`runners.scoring.parse` keeps what the model said (150 on 0-100) with status out_of_range and refuses the row."""
    dataset = write_loop_prompts(tmp_path / "p", ITEMS)
    rows = [
        {"id": item["id"], "parsed_value": 50 if item["task"] == "number" else 9, "parse_status": "out_of_range"}
        for item in ITEMS
    ]
    key = res.ResultKey("org/model", "rev", '{"mode":"generate"}')
    folder = res.key_dir(tmp_path / "r", "items", key)
    res.write_key_file(folder, key)
    res.write_part(folder, (0, 1), [{**key.as_dict(), "refused": True, **r} for r in rows])
    _recorded(tmp_path / "r", "items", key, len(rows))
    assert len(join(load_prompts(dataset, "items"), load_results(tmp_path / "r", "items"))) == len(rows)
    rows[0]["parse_status"] = "ok"  # the same value on an answer that is not refused is a bad row
    res.write_part(folder, (0, 1), [{**key.as_dict(), "refused": r["parse_status"] != "ok", **r} for r in rows])
    with pytest.raises(ProbeError, match=re.escape("column 'parsed_value': value 9.0")):
        join(load_prompts(dataset, "items"), load_results(tmp_path / "r", "items"))


def test_results_without_a_prompt_fingerprint_are_checked_against_the_prompts(two_builds, tmp_path: Path) -> None:
    """Each row's prompt_sha256 (the runners' own hash) is compared, whatever the manifest records of the prompts.

    A folder with no manifest at all records no finished run: it is refused as unfinished (#69)."""
    first, second = two_builds
    items = load_config(first, "single_actor").to_list()[:40]  # read as the runners read them
    rows = [{"id": i["id"], "choice_probs": [0.7, 0.1, 0.1, 0.1], "prompt_sha256": res.prompt_sha256(i)} for i in items]
    key = res.ResultKey("org/model", "rev", SCORING)
    folder = res.key_dir(tmp_path / "results", "single_actor", key)
    res.write_key_file(folder, key)
    part = res.write_part(folder, (0, 1), [{**key.as_dict(), "refused": False, **r} for r in rows])
    assert not (tmp_path / "results" / res.MANIFEST_NAME).exists()
    args = ["analyze", "--results", str(tmp_path / "results"), "--no-figures", "--permutations", "20"]
    unrecorded = runner.invoke(app, [*args, "--prompts", str(first), "--out", str(tmp_path / "u")], terminal_width=400)
    one_line_error(unrecorded, "no finished run recorded", ignore=LIBRARY_PROGRESS)
    _recorded(tmp_path / "results", "single_actor", key, len(rows))  # no prompt fingerprint: the rows' hashes tell
    same = runner.invoke(app, [*args, "--prompts", str(first), "--out", str(tmp_path / "a")], terminal_width=400)
    assert same.exit_code == 0, same.output  # the hashes computed from the analysis frames are the runners'
    changed = runner.invoke(app, [*args, "--prompts", str(second), "--out", str(tmp_path / "b")], terminal_width=400)
    now = {i["id"]: res.prompt_sha256(i) for i in load_config(second, "single_actor").to_list()}
    first_changed = next(r["id"] for r in rows if now[r["id"]] != r["prompt_sha256"])
    one_line_error(
        changed,
        str(part),
        f"row id {first_changed!r}",
        "column 'prompt_sha256'",
        "another prompt",
        ignore=LIBRARY_PROGRESS,
    )


def test_plan_refuses_a_range_above_the_bound(tmp_path: Path) -> None:
    """`probes plan` prices an item by building its number trie: a range of 2e9 values must be refused first."""
    from runners_fixtures import tiny_llama_folder

    dataset = write_loop_prompts(tmp_path / "p", _items(i4__number_max=2_000_000_000))
    result = runner.invoke(app, ["plan", str(dataset), "-m", str(tiny_llama_folder("float32")), "-q"])
    one_line_error(
        result, "test-00000-of-00001.parquet", "id 'number-maria'", "more than 10,000 above", ignore=LIBRARY_PROGRESS
    )


@pytest.mark.parametrize(
    ("manifest", "says"),
    [
        ("[]", "expected a JSON object, got list"),
        ('{"configs": {"items": []}}', "configs.items.files must be a list"),
        ('{"configs": {"items": {"files": [{"sha256": "x"}]}}}', "configs.items.files must be a list"),
        (b"\xff\xfe{", "not valid JSON"),
    ],
)
def test_a_build_manifest_of_the_wrong_shape_is_one_line(tmp_path: Path, manifest: str | bytes, says: str) -> None:
    dataset = write_loop_prompts(tmp_path / "p", ITEMS)
    target = dataset / "build_manifest.json"
    target.write_bytes(manifest if isinstance(manifest, bytes) else manifest.encode())
    one_line_error(_run(dataset, tmp_path), "build_manifest.json", says, ignore=LIBRARY_PROGRESS)


def test_ids_unique_and_take_chunked_agree_with_plain_python_on_any_chunking() -> None:
    """Random ids in random chunks: `take_chunked` is the list indexed, `ids_unique` is `len(set) == len`."""
    import numpy as np
    import pyarrow as pa

    from promptgen.core.contract import ids_unique, take_chunked

    rng = np.random.default_rng(0)
    for _ in range(300):
        n = int(rng.integers(0, 40))
        values = [f"id{int(v)}" for v in rng.integers(0, 30, n)]
        cuts = sorted(int(c) for c in rng.integers(0, n + 1, int(rng.integers(0, 5))))
        bounds = [0, *cuts, n]
        pieces = [pa.array(values[a:b], pa.string()) for a, b in itertools.pairwise(bounds)]
        chunked = pa.chunked_array(pieces, pa.string())
        positions = rng.integers(0, max(n, 1), int(rng.integers(0, 25))) if n else np.zeros(0, dtype=np.int64)
        assert take_chunked(chunked, positions).to_pylist() == [values[p] for p in positions]
        assert take_chunked(chunked.combine_chunks(), positions).to_pylist() == [values[p] for p in positions]
        table = pa.Table.from_batches(
            [pa.record_batch([piece, pa.array(range(len(piece)), pa.int64())], ["id", "k"]) for piece in pieces],
            schema=pa.schema([("id", pa.string()), ("k", pa.int64())]),
        )
        assert take_chunked(table, positions).column("id").to_pylist() == [values[p] for p in positions]
        assert take_chunked(table, positions).schema == table.schema
        for step in (1, 2, 5, 1 << 16):
            assert ids_unique(chunked, step) is (len(set(values)) == len(values))


@pytest.mark.parametrize("min_max", [[(0, 5), (9, 2), (0, 10), (7, 1)], [(0, 5), (0, 20_000), (3, 4), (1, 50_000)]])
def test_the_number_checks_a_slice_at_a_time_say_what_the_whole_column_says(monkeypatch, min_max) -> None:
    """The range checks hold a slice's float columns at a time; the line (first bad id, the count) is the same as
    checked whole."""
    import pyarrow as pa

    import promptgen.core.contract as contract

    rows = [(f"n{k}", "number", lo, hi) for k in range(9) for lo, hi in min_max]
    names = ["id", "task", "number_min", "number_max"]
    table = pa.table({n: list(v) for n, v in zip(names, zip(*rows, strict=True), strict=True)})
    said = []
    for slice_rows in (1 << 17, 1, 3, 7):
        monkeypatch.setattr(contract, "CHECK_SLICE_ROWS", slice_rows)
        with pytest.raises(ProbeError) as caught:
            contract.check_number_ranges(table, "where")
        said.append(str(caught.value))
    assert len(set(said)) == 1, said
    assert "(9 such rows)" in said[0] or "(18 such rows)" in said[0], said[0]
