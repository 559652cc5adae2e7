"""At resume, a served model scores one done item again: new rows must come from the model the old ones did.

A served model has no weights here to hash: its key is what the server says of it
(`runners.backends.openai.identity`: address, served name, `/v1/models` card, `system_fingerprint`).
Other weights redeployed behind the same name, root and fingerprint keep that key, and the rows a
resumed run adds would mix two models under it unnoticed. So before a resumed run of a served model
(`BackendSpec.served`) scores anything, `check_served_unchanged` scores the first item of its selection
that is already done once more (one item: a few prompts) and compares the probabilities stored for it
(`choice_probs`, `number_probs`) with the new ones; a difference over `TOLERANCE` is one line, and nothing is
scored. A greedy generation run (temperature 0, as the empathy protocol is) is rechecked by the answer it
read: the item generated again must give the same parsed value and status (`ANSWER_COLUMNS`). The text
itself is not compared: a server's greedy decoding may vary in a late token with its batching, which
changes no answer; another model changes answers. A sampled generation need not repeat, and is not
rechecked. The rescored row is only compared, never written.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
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
#: the row columns compared for a greedy generation: the answer read from the text, and how it was read
ANSWER_COLUMNS = ("parsed_value", "parse_status")


def check_served_unchanged(
    dataset: Any,
    selected: Sequence[int],
    todo: Sequence[int] | npt.NDArray[np.int64],
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
    generated = settings.mode == "generate"
    if spec is None or not spec.served or (generated and settings.temperature > 0) or not len(todo):
        return
    pending = set(todo)
    done = next((row for row in selected if row not in pending), None)
    if done is None:
        return
    item = dataset.select([done]).to_list()[0]
    compared = ANSWER_COLUMNS if generated else COMPARED
    stored = _stored_row(folder, str(item["id"]), compared)
    if stored is None or all(stored.get(c) is None for c in compared):
        return
    ((_, (new,)),) = list(scored_batches([lambda: [item]], backend, tokenizer, chat, settings=settings))
    if generated:
        was, now = (tuple(row.get(c) for c in ANSWER_COLUMNS) for row in (stored, new))
        if was != now:
            raise ProbeError(
                f"{folder}: the served model's answers changed since these rows were generated: item {item['id']!r} "
                f"generated again (greedy) reads as {now[0]!r} ({now[1]}), stored as {was[0]!r} ({was[1]}) "
                "(redeployed weights behind the same name and fingerprint?), so new rows would mix two models under "
                f"one key. Write to a new --out, or delete {folder} to generate every item again"
            )
        return
    for column in COMPARED:
        gap = _gap(stored.get(column), new.get(column))
        if gap > TOLERANCE:
            raise ProbeError(
                f"{folder}: the served model's answers changed since these rows were scored: item {item['id']!r} "
                f"scored again differs in {column} by {gap:.3g} (over {TOLERANCE:g}; redeployed weights behind the "
                "same name and fingerprint?), so new rows would mix two models under one key. Write to a new "
                f"--out, or delete {folder} to score every item again"
            )


def _stored_row(folder: Path, item_id: str, compared: Sequence[str] = COMPARED) -> dict[str, Any] | None:
    """The newest stored row of `item_id` under the key folder (its `compared` columns), or None."""
    found = None
    for path in res.part_files(folder):
        names = set(res.part_schema(path).names)
        columns = ["id", *(c for c in compared if c in names)]
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
