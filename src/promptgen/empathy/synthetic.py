"""A synthetic corpus in crowd-enVent's generation-TSV format, for machines without the real one.

The crowd-enVent corpus cannot be downloaded everywhere and is not redistributed with the other
sources. The demo, the sweep and the GPU benchmark each build intergroup-empathy from a stand-in
instead: invented events, `events_per_emotion` per emotion label, written where a `--sources`
folder holds the real file. Its results test the pipeline only (the demo and the sweep say so).
"""

from __future__ import annotations

import csv
import random
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from .corpus import REQUIRED_COLUMNS
from .narratives import EMOTIONS

#: where a `--sources` folder holds the extracted corpus (the recipe's `path`)
CORPUS_FILE = Path("crowd-envent") / "corpus" / "crowd-enVent_generation.tsv"
#: the demo's events: short, so the demo stays quick to score
DEMO_EVENTS = (
    "when my best friend forgot my birthday",
    "because my team won the final match after a long season",
    "I lost my keys on the way to an important interview.",
    "when my neighbour helped me carry the groceries",
    "because I failed the exam I had studied for all month",
    "when a stranger shouted at me on the bus",
)


def write_corpus_rows(root: Path, rows: Iterable[Sequence[str]], header: Sequence[str] = REQUIRED_COLUMNS) -> Path:
    """Write `header` and `rows` as the corpus TSV of the `--sources` folder `root`; the file's path."""
    path = root / CORPUS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return path


def write_synthetic_corpus(
    root: Path,
    events_per_emotion: int = 2,
    *,
    invent: Callable[[random.Random], str] | None = None,
    seed: int = 0,
    id_format: str = "demo{:04d}",
) -> Path:
    """A `--sources` folder `root` (returned) whose corpus holds `events_per_emotion` invented events per emotion.

    Each event is `invent(rng)`, or by default one of `DEMO_EVENTS` drawn without replacement
    per emotion; `rng` is seeded with `seed`. Event n (from 1) has id `id_format.format(n)`, its
    text as both the generated and the hidden-emotion text, and intensity 1 + n % 5.
    """
    rng = random.Random(seed)

    def texts(emotion: str) -> list[str]:
        if invent is None:
            return rng.sample(DEMO_EVENTS, events_per_emotion)
        return [invent(rng) for _ in range(events_per_emotion)]

    events = ((emotion, text) for emotion in EMOTIONS for text in texts(emotion))
    rows = ([id_format.format(n), emotion, text, text, str(1 + n % 5)] for n, (emotion, text) in enumerate(events, 1))
    write_corpus_rows(root, rows)
    return root
