"""`runners.rows.scored_batches`: the next batch is prepared while the backend scores the current one.

A backend that takes a fixed time per call stands in for the GPU; each batch's preparation
(`rows._prepare`: tokenization and tries) is recorded with its thread and times. The rows must
equal those of preparing and scoring in turn (a second computation), and every batch after the
first must have been prepared, on another thread, while the backend scored the batch before it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from runners import rows as rows_module
from runners.exchange import ContinuationScore, ScoreRequest, ScoreResult
from runners.rows import scored_batches
from runners_fixtures import load_tokenizer, number_items

SCORE_S = 0.15


class SlowBackend:
    """Scores every token log(1/2) after `SCORE_S` seconds per call, recording when each call ran."""

    name = "slow"
    model_id = "slow"
    model_revision = None
    dtype = None
    device = "cpu"

    def __init__(self) -> None:
        self.calls: list[tuple[float, float]] = []

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        start = time.perf_counter()
        time.sleep(SCORE_S)  # the GPU's share: no Python runs here, as in a CUDA wait
        out = []
        for r in requests:
            conts = tuple(
                ContinuationScore(np.full(len(c), np.log(0.5)), np.full((len(c), len(r.candidates)), np.log(0.01)))
                for c in r.continuations
            )
            out.append(ScoreResult(conts, np.full(len(r.candidates), np.log(0.01)), len(r.context), len(r.context)))
        self.calls.append((start, time.perf_counter()))
        return out


def test_preparation_overlaps_scoring_and_rows_are_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    tokenizer = load_tokenizer()
    items = number_items(12)
    batches = [items[k : k + 3] for k in range(0, 12, 3)]
    # the reference: prepare and score each batch in turn, on this thread
    settings = rows_module.ScoringSettings()
    digits = rows_module.cached_digit_start_ids(tokenizer)
    reference_backend = SlowBackend()
    provenance = {"model": "slow", "model_revision": None, "backend": "slow", "dtype": None, "device": "cpu"}
    reference = []
    for batch in batches:
        prepared = [rows_module._prepare(i, tokenizer, False, settings, digits) for i in batch]
        results = reference_backend.score([p.request for p in prepared])
        reference += [
            rows_module._scored_row(p, r, settings, {**provenance, "scoring": settings.key()})
            for p, r in zip(prepared, results, strict=True)
        ]
    real_prepare = rows_module._prepare
    prepared_at: list[tuple[str, float, float, int]] = []  # (first id, start, end, thread)

    def recording(item: Any, *args: Any) -> Any:
        start = time.perf_counter()
        out = real_prepare(item, *args)
        prepared_at.append((item["id"], start, time.perf_counter(), threading.get_ident()))
        return out

    loads = [lambda batch=batch: batch for batch in batches]
    monkeypatch.setattr(rows_module, "_prepare", recording)
    backend = SlowBackend()
    got = [r for _, rows in scored_batches(loads, backend, tokenizer, False) for r in rows]
    assert got == reference and [r["id"] for r in got] == [i["id"] for i in items]
    assert {thread for *_, thread in prepared_at} != {threading.get_ident()}  # prepared off the calling thread
    firsts = {batch[0]["id"]: k for k, batch in enumerate(batches)}
    for item_id, start, _, _ in prepared_at:
        k = firsts.get(item_id)
        if k:  # batch k (after the first) began preparing while call k-1 was scoring
            scored_from, scored_to = backend.calls[k - 1]
            assert scored_from <= start < scored_to, (k, start, backend.calls)
    # scoring waited on preparation only for the first batch: the calls follow each other closely
    gaps = [b[0] - a[1] for a, b in zip(backend.calls, backend.calls[1:], strict=False)]
    assert max(gaps) < SCORE_S / 2, gaps


def test_a_preparation_error_comes_after_the_batches_before_it() -> None:
    tokenizer = load_tokenizer()
    items = number_items(6)
    broken = {**items[4], "number_min": "x"}  # not an integer range: `_prepare` raises ValueError
    batches = [items[0:2], items[2:4], [broken, items[5]]]
    seen = []
    with pytest.raises(ValueError, match="integer `number_min`"):
        for batch, _rows in scored_batches([lambda b=b: b for b in batches], SlowBackend(), tokenizer, False):
            seen.append(batch[0]["id"])
    assert seen == ["n0", "n2"]
