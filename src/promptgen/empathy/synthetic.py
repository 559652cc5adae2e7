"""Synthetic narratives in the release's format, for machines without the authors' files.

The recipe reads the empathy authors' twelve TSVs (`promptgen.empathy.release`), which a
`--sources` folder holds as `intergroup-empathy-release/data/crowd-enVent_<emotion>.tsv`. Where
that folder lacks them and nothing may be downloaded, the sweep and the GPU benchmarks build
intergroup-empathy from a stand-in instead: invented events, `events_per_emotion` per emotion,
in the same files and columns. Its results test the pipeline only (the sweep says so).
"""

from __future__ import annotations

import csv
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import yaml

from ..recipe import find_recipe
from .release import COLUMNS, RELEASE_EMOTIONS

#: where a `--sources` folder holds the release's files (the recipe's `path`s)
RELEASE_DIR = Path("intergroup-empathy-release") / "data"
#: the recipe a synthetic `--sources` folder builds with: the real one with the release's files unpinned
#: (they are not the release), written into the folder beside them
RECIPE_FILE = "recipe.yaml"
#: the demo's events: short, so the demo stays quick to score
DEMO_EVENTS = (
    "when my best friend forgot my birthday",
    "because my team won the final match after a long season",
    "I lost my keys on the way to an important interview.",
    "when my neighbour helped me carry the groceries",
    "because I failed the exam I had studied for all month",
    "when a stranger shouted at me on the bus",
)


def release_file(root: Path, emotion: str) -> Path:
    """The path of one emotion's TSV in the `--sources` folder `root`."""
    return root / RELEASE_DIR / f"crowd-enVent_{emotion}.tsv"


def write_release_rows(
    root: Path, rows: Mapping[str, Iterable[Sequence[str]]], header: Sequence[str] = COLUMNS
) -> Path:
    """Write each emotion's `rows` (with `header`) as its TSV of the `--sources` folder `root`; returns `root`.

    Written with the csv module's minimal quoting, as pandas' `to_csv` writes a TSV: a field with a
    tab, a newline or a double quote is quoted.
    """
    for emotion in RELEASE_EMOTIONS:
        path = release_file(root, emotion)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
            writer.writerow(header)
            writer.writerows(rows.get(emotion, ()))
    return root


def write_synthetic_recipe(root: Path) -> Path:
    """`root/recipe.yaml`: the intergroup-empathy recipe with the release's sources unpinned, so stand-in
    files build (the manifest and card then show them unpinned) while the real recipe stays pinned."""
    recipe = yaml.safe_load(find_recipe("intergroup-empathy").read_text(encoding="utf-8"))
    for source in recipe["sources"]:
        if source["path"].startswith(str(RELEASE_DIR)):
            source["sha256"] = None
    path = root / RECIPE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def narrative_row(text_id: str, emotion: str, text: str) -> list[str]:
    """One release row of an invented event: T0 as typed, T1 and T2 in the release's shapes."""
    clause = text[0].lower() + text[1:] if text[:2] != "I " else text
    return [emotion, text_id, text, f"I felt {emotion} {clause}", f"The person felt {emotion} {clause}"]


def write_synthetic_corpus(
    root: Path,
    events_per_emotion: int = 2,
    *,
    invent: Callable[[random.Random], str] | None = None,
    seed: int = 0,
    id_format: str = "demo{:04d}",
) -> Path:
    """A `--sources` folder `root` (returned) whose release files hold `events_per_emotion` invented events each,
    with the unpinned recipe they build with (`write_synthetic_recipe`: `root/recipe.yaml`).

    Each event is `invent(rng)`, or by default one of `DEMO_EVENTS` drawn without replacement
    per emotion; `rng` is seeded with `seed`. Event n (from 1, in the release's emotion order) has
    id `id_format.format(n)`.
    """
    rng = random.Random(seed)

    def texts(emotion: str) -> list[str]:
        if invent is None:
            return rng.sample(DEMO_EVENTS, events_per_emotion)
        return [invent(rng) for _ in range(events_per_emotion)]

    rows: dict[str, list[list[str]]] = {}
    n = 0
    for emotion in RELEASE_EMOTIONS:
        rows[emotion] = []
        for text in texts(emotion):
            n += 1
            rows[emotion].append(narrative_row(id_format.format(n), emotion, text))
    write_synthetic_recipe(root)
    return write_release_rows(root, rows)
