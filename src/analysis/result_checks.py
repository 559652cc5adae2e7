"""The checks of result values: what `probes analyze` refuses in result rows, one clear error each.

A value the runners cannot have written moves a metric without any error downstream: a
probability outside [0, 1], a distribution that does not sum to 1 (or holds a NaN on an item
not refused), a number answer outside its item's range, a choice index past its options, a
scored choice item without its `choice_probs`, an expected or most probable number that is not
its own `number_probs`, a `refused` that contradicts its `valid_mass`. Each check refuses the
first such value with one error naming its file, row id and column, and how many such values
the config holds. `analysis.load` runs them: `check_probabilities` (with `check_logprobs`) as results are read,
`check_result_values` as they are joined to their prompts (and `_bad_value` words its
prompt-hash check).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from promptgen.core.errors import ProbeError
from runners.results.rules import breaches
from runners.scoring.parse import FIRST_INTEGER_MAX

from .columns import RESULT_FILE_COLUMN

#: result columns that hold probabilities: each value in [0, 1], each distribution summing to 1
DISTRIBUTION_COLUMNS = ("choice_probs", "number_probs")
PROBABILITY_COLUMNS = (*DISTRIBUTION_COLUMNS, "valid_mass")
#: slack for float rounding (a renormalised float64 distribution sums to 1 within ~1e-15)
PROBABILITY_TOLERANCE = 1e-6


def check_probabilities(frame: pd.DataFrame) -> None:
    """Refuse result rows whose probabilities cannot be probabilities, naming file, row id and column.

    A value outside [0, 1] or a distribution that does not sum to 1 moves every metric built on
    it (the attribution d by up to 104 in a tampered folder) without any error downstream. NaN is
    the runners' record of "cannot be computed" (e.g. a distribution with no valid mass, always
    refused; `valid_mass` in sentence mode) and is accepted there; a NaN in the distribution of
    an item that is not refused is a value missing where the metrics need one.
    """
    refused = frame["refused"].fillna(False).astype(bool).to_numpy() if "refused" in frame.columns else None
    for column in PROBABILITY_COLUMNS:
        if column not in frame.columns:
            continue
        values = frame[column]
        present = np.flatnonzero(values.notna().to_numpy())
        if not len(present):
            continue
        if column in DISTRIBUTION_COLUMNS:
            cells = [np.asarray(values.iloc[i], dtype="float64") for i in present]
            lengths = np.array([len(c) for c in cells])
            flat = np.concatenate(cells) if cells else np.empty(0)
            row_of = np.repeat(present, lengths)
        else:
            flat = values.to_numpy(dtype="float64")[present]
            row_of = present
        with np.errstate(invalid="ignore"):
            outside = (flat < -PROBABILITY_TOLERANCE) | (flat > 1 + PROBABILITY_TOLERANCE)
        if outside.any():
            k = int(np.flatnonzero(outside)[0])
            count = f"{int(outside.sum())} such values"
            _bad_value(frame, int(row_of[k]), column, f"value {float(flat[k])!r} is outside [0, 1]", count)
        if column not in DISTRIBUTION_COLUMNS:
            continue
        nan = np.isnan(flat)
        if refused is not None:
            nan &= ~refused[row_of]
        if nan.any():
            k = int(np.flatnonzero(nan)[0])
            problem = "NaN in the distribution of an item that is not refused"
            _bad_value(frame, int(row_of[k]), column, problem, f"{int(nan.sum())} such values")
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(int)
        with np.errstate(invalid="ignore"):
            sums = np.add.reduceat(flat, starts) if len(flat) else np.empty(0)
        off = (lengths > 0) & ~np.isnan(sums) & (np.abs(sums - 1) > PROBABILITY_TOLERANCE * np.maximum(lengths, 1))
        if off.any():
            k = int(np.flatnonzero(off)[0])
            _bad_value(
                frame, int(present[k]), column, f"sums to {float(sums[k])!r}, not 1", f"{int(off.sum())} such rows"
            )
    check_logprobs(frame)


#: the columns the rule of raw log-probabilities reads (`runners.results.rules`)
LOGPROB_RULE_COLUMNS = {
    "id": pa.string(),
    "choice_logprobs": pa.list_(pa.float64()),
    "choice_probs": pa.list_(pa.float64()),
    "choice_tokens": pa.list_(pa.int64()),
    "refused": pa.bool_(),
}


def check_logprobs(frame: pd.DataFrame) -> None:
    """Refuse rows whose `choice_logprobs` break the rule of result numbers (`runners.results.rules`).

    A published log-probability column must be log-probabilities (finite or -inf, at most 0) that
    give the distribution beside it: `[5.0]*4` next to a uniform `choice_probs` contradicts it.
    The rule is the runners' own, applied to the rows as read; the first breach is named.
    """
    if "choice_logprobs" not in frame.columns or not frame["choice_logprobs"].notna().any():
        return
    columns = {name: kind for name, kind in LOGPROB_RULE_COLUMNS.items() if name in frame.columns}
    table = pa.table({name: pa.array(frame[name], kind, from_pandas=True) for name, kind in columns.items()})
    found = [b for b in breaches(table) if b.column == "choice_logprobs"]
    if found:
        b = min(found, key=lambda b: b.rows[0])
        row = int(b.rows[0])
        shown = [float(v) for v in frame["choice_logprobs"].iloc[row]]
        _bad_value(frame, row, b.column, f"{shown!r} {b.problem}", f"{len(b.rows)} such rows")


def _bad_value(frame: pd.DataFrame, row: int, column: str, problem: str, count: str) -> None:
    file = frame[RESULT_FILE_COLUMN].iloc[row] if RESULT_FILE_COLUMN in frame.columns else "results"
    raise ProbeError(f"{file}: row id {frame['id'].iloc[row]!r}, column {column!r}: {problem} ({count} in this config)")


#: result columns holding a number answer, each within its item's [number_min, number_max]
NUMBER_ANSWER_COLUMNS = ("expected_value", "argmax_value", "parsed_value")
#: result columns holding a choice answer, each an index into its item's options
CHOICE_ANSWER_COLUMNS = ("chosen_index", "parsed_value")
ANSWER_COLUMNS = tuple(dict.fromkeys((*NUMBER_ANSWER_COLUMNS, *CHOICE_ANSWER_COLUMNS)))


def check_result_values(joined: pd.DataFrame) -> None:
    """Refuse answers that cannot be answers to their item, naming file, row id and column.

    A number answer outside its item's range (an expected value of 1e6 on a 0-100 item made a
    cell mean 62,504), a choice index past the options, and a choice item scored (not generated)
    and not refused whose `choice_probs` is null or has another length than its options: each
    would move or drop a metric without any error downstream.
    """
    task = joined["task"].to_numpy() if "task" in joined.columns else np.full(len(joined), None)
    refused = np.zeros(len(task), bool)
    if "refused" in joined.columns:
        refused = joined["refused"].fillna(False).astype(bool).to_numpy()
    # a generated answer outside the range is kept as parsed and the row refused (`runners.scoring.parse`)
    answered = {column: ~refused if column == "parsed_value" else True for column in ANSWER_COLUMNS}
    if {"number_min", "number_max"} <= set(joined.columns):
        number = task == "number"
        low = pd.to_numeric(joined["number_min"], errors="coerce").to_numpy(dtype="float64")
        high = pd.to_numeric(joined["number_max"], errors="coerce").to_numpy(dtype="float64")
        parsed_high = high
        if "scoring" in joined.columns:
            # the empathy authors' rule accepts 0-100 on every scale ("70" on the 10-point scale is 70):
            # rows parsed by it may hold up to its own bound (`runners.scoring.parse.FIRST_INTEGER_MAX`)
            wide = {s: _number_parser(s) == "first-integer" for s in pd.unique(joined["scoring"])}
            first = joined["scoring"].map(wide).fillna(False).astype(bool).to_numpy()
            parsed_high = np.where(first, np.maximum(high, FIRST_INTEGER_MAX), high)
        for column in NUMBER_ANSWER_COLUMNS:
            rows = number & answered[column]
            top = parsed_high if column == "parsed_value" else high
            _refuse_outside(joined, column, rows, low, top, "of its item (number_min, number_max)")
        _check_number_probs(joined, number, low)
    _check_refused(joined, refused)
    if "choices" not in joined.columns:
        return
    choice = task == "choice"
    n_options = np.array([len(c) if c is not None else 0 for c in joined["choices"]], dtype="float64")
    for column in CHOICE_ANSWER_COLUMNS:
        rows = choice & answered[column]
        _refuse_outside(joined, column, rows, np.zeros(len(joined)), n_options - 1, "of its item's options")
    if "choice_probs" not in joined.columns:
        return
    generated: Any = False
    if "scoring" in joined.columns:  # one JSON parse per distinct scoring, not per row
        by_scoring = {s: _generated(s) for s in pd.unique(joined["scoring"])}
        generated = joined["scoring"].map(by_scoring).fillna(True).astype(bool).to_numpy()
    lengths = np.array([len(p) if p is not None else -1 for p in joined["choice_probs"]], dtype="float64")
    scored = choice & ~refused & ~generated
    missing = scored & (lengths < 0)
    if missing.any():
        row = int(np.flatnonzero(missing)[0])
        problem = "null on a choice item that is scored and not refused"
        _bad_value(joined, row, "choice_probs", problem, f"{int(missing.sum())} such rows")
    wrong = choice & (lengths >= 0) & (lengths != n_options)
    if wrong.any():
        row = int(np.flatnonzero(wrong)[0])
        problem = f"has {int(lengths[row])} values, its item {int(n_options[row])} options"
        _bad_value(joined, row, "choice_probs", problem, f"{int(wrong.sum())} such rows")


def _refuse_outside(
    frame: pd.DataFrame, column: str, rows: np.ndarray, low: np.ndarray, high: np.ndarray, what: str
) -> None:
    if column not in frame.columns:
        return
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype="float64")
    with np.errstate(invalid="ignore"):
        bad = rows & ~np.isnan(values) & ((values < low) | (values > high) | np.isinf(values))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        problem = f"value {float(values[row])!r} is outside [{low[row]:g}, {high[row]:g}] {what}"
        _bad_value(frame, row, column, problem, f"{int(bad.sum())} such rows")


#: how far a stored expected value may be from the one its `number_probs` give (float32 storage, 0-100)
NUMBER_TOLERANCE = 1e-4


def _check_number_probs(joined: pd.DataFrame, number: np.ndarray, low: np.ndarray, *, chunk: int = 65_536) -> None:
    """A number row's `expected_value` and `argmax_value` are those of its own `number_probs`: recomputed here
    (vectorised, rows of one range length at a time), a contradiction (an edited or mixed-up row) is refused."""
    columns = [c for c in ("expected_value", "argmax_value") if c in joined.columns]
    if "number_probs" not in joined.columns or not columns:
        return
    probs = joined["number_probs"].to_numpy()
    lengths = np.fromiter((len(v) if v is not None else 0 for v in probs), dtype=np.int64, count=len(probs))
    stored = {c: pd.to_numeric(joined[c], errors="coerce").to_numpy(dtype="float64") for c in columns}
    for length in np.unique(lengths[number & (lengths > 0)]):
        rows = np.flatnonzero(number & (lengths == length))
        for start in range(0, len(rows), chunk):
            at = rows[start : start + chunk]
            p = np.asarray(np.stack([np.asarray(v, dtype="float64") for v in probs[at]]), dtype="float64")
            usable = np.isfinite(p).all(axis=1) & (p.sum(axis=1) > 0)
            values = low[at][:, None] + np.arange(length)[None, :]
            with np.errstate(invalid="ignore", divide="ignore"):
                expected = (values * p).sum(axis=1) / p.sum(axis=1)
            scale = np.maximum(1.0, np.abs(values).max(axis=1))
            for column in columns:
                got = stored[column][at]
                check = usable & ~np.isnan(got)
                if column == "expected_value":
                    bad = check & ~(np.abs(got - expected) <= NUMBER_TOLERANCE * scale)
                else:
                    # a NaN (a row without its argmax: not checked) must not become an index
                    k = np.clip(np.rint(np.nan_to_num(got - low[at])), 0, length - 1).astype(np.int64)
                    in_range = (got - low[at] >= 0) & (got - low[at] <= length - 1)
                    top = p[np.arange(len(at)), k] >= p.max(axis=1) - 1e-9
                    bad = check & ~(in_range & top)
                if bad.any():
                    b = int(np.flatnonzero(bad)[0])
                    want = expected[b] if column == "expected_value" else values[b, int(np.argmax(p[b]))]
                    what = "expected value" if column == "expected_value" else "most probable number"
                    problem = f"{got[b]:.6g} is not the {what} {want:.6g} of its number_probs"
                    _bad_value(joined, int(at[b]), column, problem, f"{int(bad.sum())} such rows in a batch")


def _check_refused(joined: pd.DataFrame, refused: np.ndarray) -> None:
    """A scored row's `refused` is the refusal rule (`runners.scoring.distributions.refused_by_mass`) applied to its
    `valid_mass` under its own scoring's threshold: a contradiction is refused, naming the row."""
    if "valid_mass" not in joined.columns or "scoring" not in joined.columns or "refused" not in joined.columns:
        return
    from runners.scoring.distributions import refused_mask

    thresholds = {s: _threshold(s) for s in pd.unique(joined["scoring"])}
    threshold = joined["scoring"].map(thresholds).to_numpy(dtype="float64")
    mass = pd.to_numeric(joined["valid_mass"], errors="coerce").to_numpy(dtype="float64")
    bound = np.zeros(len(joined))
    if "number_bound" in joined.columns:
        bound = pd.to_numeric(joined["number_bound"], errors="coerce").fillna(0.0).to_numpy(dtype="float64")
    checked = ~np.isnan(mass) & ~np.isnan(threshold) & pd.notna(joined["refused"]).to_numpy()
    with np.errstate(invalid="ignore"):
        want = refused_mask(mass, threshold, bound)
        # bounded rows scored before the interval rule were refused on their resolved mass alone: still consistent
        earlier = (bound > 0) & (refused == (mass < threshold))
    bad = checked & (refused != want) & ~earlier
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        problem = (
            f"{bool(refused[row])} contradicts its valid_mass {mass[row]:.6g} under its scoring's refusal "
            f"threshold {threshold[row]:g} (refused means below it)"
        )
        _bad_value(joined, row, "refused", problem, f"{int(bad.sum())} such rows")


def _threshold(scoring: Any) -> float:
    """The refusal threshold of a row's scoring settings; NaN when they read no distribution (or are unknown)."""
    try:
        settings = json.loads(scoring)
    except (TypeError, ValueError):
        return float("nan")
    if not isinstance(settings, dict) or settings.get("mode") == "generate":
        return float("nan")
    value = settings.get("refusal_threshold", 0.5)
    return float(value) if isinstance(value, int | float) else float("nan")


def _number_parser(scoring: Any) -> Any:
    """The rule a row's generated numbers were read by (None: not a generation key)."""
    try:
        return json.loads(scoring).get("number_parser")
    except (TypeError, ValueError, AttributeError):
        return None


def _generated(scoring: Any) -> bool:
    """Whether a row's scoring settings generated its answer (no distribution to read)."""
    try:
        return json.loads(scoring).get("mode") == "generate"
    except (TypeError, ValueError, AttributeError):
        return True  # unknown settings: no distribution is required
