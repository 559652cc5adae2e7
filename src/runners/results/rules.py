"""What the numbers of a result row may hold: the one rule, applied where rows are made, reused and published.

A backend's log-probabilities and a row's distribution are numbers a reader cannot check
after the fact: a server answering NaN, +inf or +3.0 gives rows of `choice_probs [nan, nan]`
or a flat 0.5/0.5 that are never refused, and every mean built on them moves silently. So:

- a log-probability (`checked_logprob`, where a backend's reader takes one in) is a number at
  most 0 (`LOGPROB_SLACK` for float noise); -inf is a probability of 0 (vLLM's -9999), NaN,
  +inf and anything positive are no log-probability;
- a row's distribution (`choice_probs`, `number_probs`) holds values in [0, 1] summing to 1
  (`PROBABILITY_TOLERANCE` per value) and no NaN unless the row is refused (NaN is the runners'
  record of "no valid mass": such a row is always refused at any threshold above 0);
- `chosen_index` of a row with a choice distribution is the option of highest probability (any
  of tied ones), and null where that distribution is NaN;
- a row's raw log-probabilities (`choice_logprobs`) are finite or -inf, at most 0, as many as
  its options, and give the distribution beside them: `choice_probs` is their softmax (the
  letter and summed-sentence rules), or the softmax of their per-token means over
  `choice_tokens` (the length-normalised sentence rule). NaN is allowed only in a refused row,
  as in the distributions: a published column that contradicts the distribution next to it
  is worse than none;
- a distribution read from printed numbers (`printed_sum_slack`, an import of a released CSV)
  sums to 1 as closely as its printed precision explains, plus float noise: four values
  rounded to 2 decimals may miss 1 by 4 x 0.005, never more. A row that misses by more is no
  distribution the writer rounded, and is refused rather than divided by its sum.

`breaches` finds the rows of an Arrow table that break it, all at once; rows are made
(`runners.rows`: `check_rows`, never written), reused (`runners.results.resume`: `valid_rows`,
rescored) and published (`runners.results.check`: `part_problems`, refused) by it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: how far above 0 a log-probability may be from float rounding (a log-softmax of float32 logits)
LOGPROB_SLACK = 1e-6
#: slack for float rounding of probabilities (a renormalised float64 distribution sums to 1 within ~1e-15)
PROBABILITY_TOLERANCE = 1e-6
#: how far from 1 a sum of float64 probabilities may be from float rounding alone (beyond printing)
FLOAT_NOISE = 1e-9
#: the columns the rule reads
RULE_COLUMNS = ("id", "choice_logprobs", "choice_probs", "choice_tokens", "number_probs", "chosen_index", "refused")
DISTRIBUTION_COLUMNS = ("choice_probs", "number_probs")


class BadLogprob(ValueError):
    """A number a backend returned where a log-probability belongs, that is none (the message names where)."""


def checked_logprob(value: Any, where: str) -> float:
    """`value` as a float log-probability, or `BadLogprob` naming `where` (e.g. the prompt position)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise BadLogprob(f"{where}: {value!r} is not a number")
    number = float(value)
    if math.isnan(number) or number > LOGPROB_SLACK:
        raise BadLogprob(f"{where}: {number!r} is not a log-probability (a number at most 0)")
    return number


def last_place(text: str) -> int:
    """The power of ten of the last digit `text` prints: "0.33" -> -2, "1e-05" -> -5, "1" -> 0, "0.0" -> -1.

    A number that is not finite (or no number) has no printed precision: `ValueError`.
    """
    try:
        exponent = Decimal(text.strip()).as_tuple().exponent
    except InvalidOperation as exc:
        raise ValueError(f"{text!r} is not a number") from exc
    if not isinstance(exponent, int):  # 'n', 'N', 'F': NaN or infinity
        raise ValueError(f"{text!r} is not a finite number")
    return exponent


def printed_sum_slack(finest_place: np.ndarray | int, count: np.ndarray | int) -> np.ndarray:
    """How far from 1 the sum of `count` printed probabilities may be, the finest printed at `finest_place`.

    Each value may be off by half a unit in the last place the row prints (the writer rounded
    every value of the row alike; a trailing zero it dropped only prints fewer places), plus
    float noise: 0.33/0.33/0.33/0.0 (2 places) may sum to 0.99, 1/1/1/1 (0 places) never to 4.
    """
    places = np.asarray(finest_place, dtype=np.float64)
    return np.asarray(count, dtype=np.float64) * 0.5 * np.power(10.0, places) + FLOAT_NOISE


@dataclass(frozen=True)
class Breach:
    """Rows of a table that break one part of the rule."""

    column: str
    problem: str
    rows: np.ndarray  # row indices, ascending


def _is_number(kind: pa.DataType) -> bool:
    return pa.types.is_floating(kind) or pa.types.is_integer(kind)


def _list_cells(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(present, lengths, flat values with nulls as NaN, row of each flat value) of a list<float64> column."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    present = arr.is_valid().to_numpy(zero_copy_only=False)
    lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    flat = pc.list_flatten(arr)
    values = pc.fill_null(flat.cast(pa.float64()), math.nan).to_numpy(zero_copy_only=False)
    parents = pc.list_parent_indices(arr).to_numpy(zero_copy_only=False).astype(np.int64)
    return present, lengths, np.asarray(values, dtype=np.float64), parents


def breaches(table: pa.Table) -> list[Breach]:
    """Every way the rows of `table` (any columns of the result schema) break the rule (module docstring)."""
    n = len(table)
    names = table.column_names
    typed = {name: table.schema.field(name).type for name in names}  # a column of another type: `schema_problems`
    refused = (
        pc.fill_null(table["refused"], False).to_numpy(zero_copy_only=False).astype(bool)
        if pa.types.is_boolean(typed.get("refused", pa.null()))
        else np.zeros(n, dtype=bool)
    )
    found: list[Breach] = []

    def add(column: str, problem: str, mask: np.ndarray) -> None:
        if mask.any():
            found.append(Breach(column, problem, np.flatnonzero(mask)))

    for column in DISTRIBUTION_COLUMNS:
        if column not in names or not pa.types.is_list(typed[column]) or not _is_number(typed[column].value_type):
            continue
        present, lengths, flat, parents = _list_cells(table[column])
        nan = np.isnan(flat)
        has_nan = np.bincount(parents[nan], minlength=n).astype(bool)
        with np.errstate(invalid="ignore"):
            outside = ~nan & ((flat < -PROBABILITY_TOLERANCE) | (flat > 1 + PROBABILITY_TOLERANCE))
        sums = np.bincount(parents, weights=np.where(nan, 0.0, flat), minlength=n)
        add(column, "is empty", present & (lengths == 0))
        add(column, "holds NaN, and the row is not refused", present & has_nan & ~refused)
        add(column, "holds a value outside [0, 1]", np.bincount(parents[outside], minlength=n).astype(bool))
        off = present & (lengths > 0) & ~has_nan & (np.abs(sums - 1) > PROBABILITY_TOLERANCE * np.maximum(lengths, 1))
        add(column, "does not sum to 1", off)
        if column == "choice_probs" and pa.types.is_integer(typed.get("chosen_index", pa.null())):
            chosen_null = ~table["chosen_index"].is_valid().to_numpy(zero_copy_only=False)
            chosen = pc.fill_null(table["chosen_index"], -1).to_numpy(zero_copy_only=False).astype(np.int64)
            rows = present & (lengths > 0) & ~has_nan
            top = np.full(n, -np.inf)
            np.maximum.at(top, parents, np.where(nan, -np.inf, flat))
            starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
            in_range = (chosen >= 0) & (chosen < lengths)
            at_chosen = np.full(n, np.nan)
            at_chosen[in_range] = flat[starts[in_range] + chosen[in_range]]
            add("chosen_index", "is not the option of highest choice_probs", rows & (chosen_null | (at_chosen != top)))
            add("chosen_index", "names an option, and choice_probs is NaN", present & has_nan & ~chosen_null)
    logprobs = typed.get("choice_logprobs", pa.null())
    if pa.types.is_list(logprobs) and _is_number(logprobs.value_type):
        for problem, mask in _logprob_breaches(table, typed, refused):
            add("choice_logprobs", problem, mask)
    return found


def _row_softmax(values: np.ndarray, parents: np.ndarray, n: int) -> np.ndarray:
    """The softmax of each row's values (flat, `parents` naming each value's row); NaN for a row of only -inf."""
    top = np.full(n, -np.inf)
    np.maximum.at(top, parents, values)
    with np.errstate(invalid="ignore", over="ignore"):
        exp = np.exp(values - top[parents])
        return exp / np.bincount(parents, weights=exp, minlength=n)[parents]


def _logprob_breaches(
    table: pa.Table, typed: Mapping[str, pa.DataType], refused: np.ndarray
) -> list[tuple[str, np.ndarray]]:
    """How rows' `choice_logprobs` break the rule (module docstring): their values, and the distribution beside."""
    n = len(table)
    present, lengths, flat, parents = _list_cells(table["choice_logprobs"])
    nan = np.isnan(flat)
    has_nan = np.bincount(parents[nan], minlength=n).astype(bool)
    with np.errstate(invalid="ignore"):
        above = np.bincount(parents[~nan & (flat > LOGPROB_SLACK)], minlength=n).astype(bool)
    out = [
        ("is empty", present & (lengths == 0)),
        ("holds NaN, and the row is not refused", present & has_nan & ~refused),
        ("holds a value above 0 (no log-probability)", above),
    ]
    probs_type = typed.get("choice_probs", pa.null())
    if not (pa.types.is_list(probs_type) and _is_number(probs_type.value_type)):
        return out
    p_present, p_lengths, p_flat, p_parents = _list_cells(table["choice_probs"])
    p_nan = np.bincount(p_parents[np.isnan(p_flat)], minlength=n).astype(bool)
    both = present & p_present & (lengths > 0) & (p_lengths > 0)
    out.append(("has another length than choice_probs", both & (lengths != p_lengths)))
    compared = both & (lengths == p_lengths) & ~has_nan & ~p_nan & ~above
    mine, theirs = compared[parents], compared[p_parents]  # equal lengths: the flat values line up
    lp, p, rows = flat[mine], p_flat[theirs], parents[mine]

    def gives_probs(values: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            off = ~(np.abs(_row_softmax(values, rows, n) - p) <= PROBABILITY_TOLERANCE)
        return compared & ~np.bincount(rows[off], minlength=n).astype(bool)

    consistent = gives_probs(lp)
    tokens_type = typed.get("choice_tokens", pa.null())
    if pa.types.is_list(tokens_type) and _is_number(tokens_type.value_type):
        t_present, t_lengths, t_flat, t_parents = _list_cells(table["choice_tokens"])
        counted = compared & t_present & (t_lengths == lengths)
        counts = np.full(len(lp), np.nan)
        t_mine = counted[t_parents]
        counts[counted[rows]] = t_flat[t_mine]
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(counts > 0, lp / counts, np.nan)
        consistent |= counted & gives_probs(means)
    out.append(
        (
            "does not give choice_probs (neither their softmax nor that of their per-token means over choice_tokens)",
            compared & ~consistent,
        )
    )
    return out


def valid_rows(table: pa.Table) -> np.ndarray:
    """A boolean mask of the rows of `table` that keep the rule."""
    bad = np.zeros(len(table), dtype=bool)
    for breach in breaches(table):
        bad[breach.rows] = True
    return ~bad


def _row_id(table: pa.Table, row: int) -> Any:
    return table["id"][row].as_py() if "id" in table.column_names else row


def part_problems(part: str, table: pa.Table) -> list[str]:
    """One line per way the rows of the result part `part` break the rule: its first row id, and how many."""
    return [
        f"part {part}: row id {_row_id(table, int(b.rows[0]))!r}, column {b.column!r} {b.problem} "
        f"({len(b.rows)} such row(s)); rerun the key to rescore them"
        for b in breaches(table)
    ]


def check_rows(rows: Sequence[Mapping[str, Any]]) -> None:
    """Raise ValueError naming the first item whose new row breaks the rule (such a row is never written)."""
    table = pa.Table.from_pylist(
        [{**{name: row.get(name) for name in RULE_COLUMNS}, "id": str(row.get("id"))} for row in rows],
        pa.schema(
            [
                ("id", pa.string()),
                ("choice_logprobs", pa.list_(pa.float64())),
                ("choice_probs", pa.list_(pa.float64())),
                ("choice_tokens", pa.list_(pa.int64())),
                ("number_probs", pa.list_(pa.float64())),
                ("chosen_index", pa.int64()),
                ("refused", pa.bool_()),
            ]
        ),
    )
    found = breaches(table)
    if found:
        b = min(found, key=lambda b: b.rows[0])
        row = rows[int(b.rows[0])]
        raise ValueError(
            f"item {row.get('id')!r}: the backend's numbers give a row whose {b.column} {b.problem} "
            f"({b.column} {row.get(b.column)!r}, refused {row.get('refused')}): nothing of its batch was written"
        )
