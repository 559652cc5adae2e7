"""At resume, a served model scores one done item again: new rows must come from the model the old ones did.

A served model has no weights here to hash: its key is what the server says of it
(`runners.backends.openai.identity`: address, served name, `/v1/models` card, `system_fingerprint`).
Other weights redeployed behind the same name, root and fingerprint keep that key, and the rows a
resumed run adds would mix two models under it unnoticed. So before a resumed run of a served model
(`BackendSpec.served`) scores anything, `check_served_unchanged` scores the first item of its selection
that is already done once more (one item: a few prompts) and compares the probabilities stored for it
(`choice_probs`, `number_probs`) with the new ones; a difference over `TOLERANCE` is one line, and nothing is
scored. Generated answers carry no probabilities to compare (and a sampled text need not repeat), so
generation runs are not rechecked. The rescored row is only compared, never written.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from promptgen.core.errors import ProbeError
from runners import results as res
from runners.backends import BACKENDS
from runners.rows import scored_batches
from runners.scoring.settings import ScoringSettings

#: the largest absolute difference of a stored probability that counts as the same answer
TOLERANCE = 1e-4
#: the row columns compared: the distributions a scored row stores
COMPARED = ("choice_probs", "number_probs")


def check_served_unchanged(
    dataset: Any,
    selected: Sequence[int],
    todo: Sequence[int],
    folder: Path,
    backend: Any,
    tokenizer: Any,
    chat: bool,
    settings: ScoringSettings,
) -> None:
    """Refuse a resumed run of a served model whose answers changed since its rows were scored (module docstring).

    `selected` are the run's dataset rows, `todo` those still to score, `folder` the key folder.
    Nothing is sent unless the backend is served, the run has items to score, and one of its items is done.
    """
    spec = BACKENDS.get(backend.name)  # a backend object made in code need not be registered: not served
    if spec is None or not spec.served or settings.mode == "generate" or not todo:
        return
    pending = set(todo)
    done = next((row for row in selected if row not in pending), None)
    if done is None:
        return
    item = dataset.select([done]).to_list()[0]
    stored = _stored_row(folder, str(item["id"]))
    if stored is None or all(stored.get(c) is None for c in COMPARED):
        return
    ((_, (new,)),) = list(scored_batches([lambda: [item]], backend, tokenizer, chat, settings=settings))
    for column in COMPARED:
        gap = _gap(stored.get(column), new.get(column))
        if gap > TOLERANCE:
            raise ProbeError(
                f"{folder}: the served model's answers changed since these rows were scored: item {item['id']!r} "
                f"scored again differs in {column} by {gap:.3g} (over {TOLERANCE:g}; redeployed weights behind the "
                "same name and fingerprint?), so new rows would mix two models under one key. Write to a new "
                f"--out, or delete {folder} to score every item again"
            )


def _stored_row(folder: Path, item_id: str) -> dict[str, Any] | None:
    """The newest stored row of `item_id` under the key folder (its compared columns), or None."""
    found = None
    for path in res.part_files(folder):
        names = set(res.part_schema(path).names)
        columns = ["id", *(c for c in COMPARED if c in names)]
        rows = pq.read_table(path, columns=columns, filters=[("id", "==", item_id)]).to_pylist()
        found = rows[-1] if rows else found
    return found


def _gap(stored: Sequence[float] | None, new: Sequence[float] | None) -> float:
    """The largest absolute difference of two stored distributions (inf: one is missing or another length)."""
    if stored is None and new is None:
        return 0.0
    if stored is None or new is None or len(stored) != len(new):
        return float("inf")
    a, b = np.asarray(stored, dtype=np.float64), np.asarray(new, dtype=np.float64)
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        return float("inf")
    same = ~np.isnan(a)
    return float(np.max(np.abs(a[same] - b[same]), initial=0.0))
