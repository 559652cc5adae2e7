"""The rule of a result row's numbers (runners.results.rules): made, reused and published by it (issue #51).

`breaches` is compared with the rule spelled out row by row; a finished tiny run (against the
scripted server, tests/openai_fake_server.py) whose part is then edited to hold a NaN row is
rescored by the next run, never counted done, and named by the publish check.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from openai_fake_server import MODEL, FakeServer
from runners import results as res
from runners.backends.load import LoadOptions
from runners.results.check import validate_results
from runners.results.rules import breaches, check_rows, part_problems, valid_rows
from runners.run.runner import run
from runners_fixtures import load_folder, number_items, require_extra, write_prompt_folder

NAN = math.nan
ROWS = [
    # (choice_probs, number_probs, chosen_index, refused, what the rule says, spelled out)
    ([0.25, 0.75], None, 1, False, None),
    ([0.5, 0.5], None, 1, False, None),  # a tie: either option is the argmax
    ([NAN, NAN], None, None, True, None),  # no valid mass: refused, no option chosen
    ([NAN, NAN], None, None, False, ("choice_probs", "holds NaN, and the row is not refused")),
    ([0.25, 0.75], None, 0, False, ("chosen_index", "is not the option of highest choice_probs")),
    ([0.25, 0.75], None, None, False, ("chosen_index", "is not the option of highest choice_probs")),
    ([0.25, 0.75], None, 2, False, ("chosen_index", "is not the option of highest choice_probs")),
    ([NAN, NAN], None, 0, True, ("chosen_index", "names an option, and choice_probs is NaN")),
    ([0.5, 0.6], None, 1, False, ("choice_probs", "does not sum to 1")),
    ([1.5, -0.5], None, 0, False, ("choice_probs", "holds a value outside [0, 1]")),
    (None, [0.1, 0.2, 0.7], None, False, None),
    (None, [NAN, NAN, NAN], None, True, None),
    (None, [0.1, NAN, 0.7], None, False, ("number_probs", "holds NaN, and the row is not refused")),
    (None, [0.1, 0.1, 0.1], None, True, ("number_probs", "does not sum to 1")),
    (None, [], None, False, ("number_probs", "is empty")),
    (None, None, 3, True, None),  # a generated row: its chosen_index is the parsed answer, no distribution
]


def _table() -> pa.Table:
    rows = [
        {"id": f"r{k}", "choice_probs": c, "number_probs": n, "chosen_index": i, "refused": r}
        for k, (c, n, i, r, _) in enumerate(ROWS)
    ]
    return pa.Table.from_pylist(rows, res.RESULT_SCHEMA.empty_table().select(list(rows[0])).schema)


def test_breaches_are_the_rule_row_by_row() -> None:
    found = {(b.column, b.problem): b.rows.tolist() for b in breaches(_table())}
    want: dict[tuple[str, str], list[int]] = {}
    for k, row in enumerate(ROWS):
        if row[-1] is not None:
            want.setdefault(row[-1], []).append(k)
    assert found == want
    np.testing.assert_array_equal(valid_rows(_table()), [row[-1] is None for row in ROWS])


def test_a_new_row_that_breaks_the_rule_is_refused_naming_its_item() -> None:
    good = {"id": "a", "choice_probs": [0.25, 0.75], "chosen_index": 1, "refused": False}
    check_rows([good])
    with pytest.raises(ValueError, match=r"item 'b': .* choice_probs holds NaN, and the row is not refused"):
        check_rows([good, {"id": "b", "choice_probs": [NAN, NAN], "chosen_index": 0, "refused": False}])


@pytest.fixture()
def finished_run(tmp_path: Path):
    """(prompt folder, results folder, server) of a finished 4-item number run against the scripted server,
    which keeps serving (its URL is part of the run's key)."""
    require_extra("openai")
    prompts = write_prompt_folder(tmp_path / "prompts", number_items(4))
    out = tmp_path / "results"
    with FakeServer() as server:
        _run(prompts, out, server)
        yield prompts, out, server


def _run(prompts: Path, out: Path, server: FakeServer):
    load = LoadOptions.of("openai", base_url=server.url, tokenizer=str(load_folder()))
    return run(prompts, "items", MODEL, out, load=load, chat=False)


def _break_row(out: Path, item: str) -> Path:
    """Edit the finished run's part: `item`'s row becomes the issue's `number_probs [nan, ...]`, `refused False`."""
    (part,) = out.rglob("part-*.parquet")
    table = pq.read_table(part)
    k = table["id"].to_pylist().index(item)
    probs, refused = table["number_probs"].to_pylist(), table["refused"].to_pylist()
    probs[k], refused[k] = [NAN] * len(probs[k]), False
    for name, values in (("number_probs", probs), ("refused", refused)):
        index = table.schema.get_field_index(name)
        table = table.set_column(index, table.schema.field(index), pa.array(values, table.schema.field(index).type))
    pq.write_table(table, part)
    return part


def test_a_stored_nan_row_is_rescored_by_the_next_run_and_refused_by_publish(finished_run) -> None:
    """Before: the rerun said every item was done and kept the NaN row; publish's check passed it."""
    prompts, out, server = finished_run
    part = _break_row(out, "n2")
    problems = validate_results(out, res.read_manifest(out)).problems
    rel = part.relative_to(out).as_posix()
    assert problems == [
        f"part {rel}: row id 'n2', column 'number_probs' holds NaN, and the row is not refused (1 such row(s)); "
        "rerun the key to rescore them"
    ]
    summary = _run(prompts, out, server)
    assert (summary.items, summary.skipped) == (1, 3)
    rows = [r for p in out.rglob("part-*.parquet") for r in pq.read_table(p).to_pylist()]
    assert sorted(r["id"] for r in rows) == ["n0", "n1", "n2", "n3"]
    assert all(abs(sum(r["number_probs"]) - 1) < 1e-9 for r in rows)
    assert validate_results(out, res.read_manifest(out)).problems == []


INF = math.inf
LETTER = [0.2, 0.3, 0.5]  # a letter row: log(p x valid mass 0.8)
LOGPROB_ROWS = [
    # (choice_logprobs, choice_probs, choice_tokens, refused)
    ([math.log(p * 0.8) for p in LETTER], LETTER, [1, 1, 1], False),
    ([-1.0, -2.0], [1 / (1 + math.exp(-1)), 1 / (1 + math.exp(1))], [3, 5], False),  # summed sentence
    ([-2.0, -6.0], [1 / (1 + math.exp(-1)), 1 / (1 + math.exp(1))], [2, 3], False),  # length-normalised
    ([0.0, -INF], [1.0, 0.0], [1, 1], False),  # -inf: probability 0
    ([5.0] * 4, [0.25] * 4, [1] * 4, False),  # the repro: positive
    ([NAN] * 4, [0.25] * 4, [1] * 4, False),  # the repro: NaN beside a distribution
    ([NAN] * 4, [NAN] * 4, [1] * 4, True),  # no valid mass: refused, NaN both
    ([INF, -1.0], [1.0, 0.0], [1, 1], False),
    ([-1.0, -2.0], [0.5, 0.5], [1, 1], False),  # contradicts the distribution
    ([-1.0, -2.0, -3.0], [0.5, 0.5], [1, 1, 1], False),
    ([-INF, -INF], [0.5, 0.5], [1, 1], False),
    ([], [], [], False),
    (None, [0.5, 0.5], None, False),  # an imported row: no raw numbers
]


def _spelled_out(lp, p, tokens, refused) -> set[str]:
    """The rule of raw log-probabilities (rules.py's docstring), one row, in plain Python."""
    if lp is None:
        return set()
    if not lp:
        return {"is empty"}
    found = set()
    if any(math.isnan(v) for v in lp) and not refused:
        found.add("holds NaN, and the row is not refused")
    if any(not math.isnan(v) and v > 1e-6 for v in lp):
        found.add("holds a value above 0 (no log-probability)")
    if found or any(math.isnan(v) for v in lp) or not p or any(math.isnan(v) for v in p):
        return found
    if len(lp) != len(p):
        return {"has another length than choice_probs"}

    def softmax(values):
        top = max(values)
        if top == -INF:
            return [NAN] * len(values)
        exp = [math.exp(v - top) for v in values]
        return [e / sum(exp) for e in exp]

    def gives(values):
        return all(abs(a - b) <= 1e-6 for a, b in zip(softmax(values), p, strict=True))

    if not (gives(lp) or gives([v / t for v, t in zip(lp, tokens, strict=True)])):
        found.add(
            "does not give choice_probs (neither their softmax nor that of their per-token means over choice_tokens)"
        )
    return found


def test_raw_logprobs_break_the_rule_as_spelled_out_row_by_row() -> None:
    """Issue #69, finding 5: `[5.0]*4` or NaN beside an untouched distribution passed publish, analyze, export."""
    rows = [
        {"id": f"r{k}", "choice_logprobs": lp, "choice_probs": p, "choice_tokens": t, "refused": r}
        for k, (lp, p, t, r) in enumerate(LOGPROB_ROWS)
    ]
    table = pa.Table.from_pylist(rows, res.RESULT_SCHEMA.empty_table().select(list(rows[0])).schema)
    found: dict[tuple[str, str], list[int]] = {(b.column, b.problem): b.rows.tolist() for b in breaches(table)}
    want: dict[tuple[str, str], list[int]] = {}
    for k, row in enumerate(LOGPROB_ROWS):
        for problem in sorted(_spelled_out(*row)):
            want.setdefault(("choice_logprobs", problem), []).append(k)
    found.pop(("choice_probs", "is empty"), None)  # the empty row breaks the distribution rule too
    assert found == want
    assert {k for rows in want.values() for k in rows} == {4, 5, 7, 8, 9, 10, 11}
    with pytest.raises(ValueError, match=r"item 'r4': .* choice_logprobs holds a value above 0"):
        check_rows([{**rows[0], "chosen_index": 2}, {**rows[4], "chosen_index": 0}])
    assert any("column 'choice_logprobs' holds a value above 0" in line for line in part_problems("p", table))
