"""The synthetic crowd-enVent corpus (`promptgen.empathy.synthetic`), read back with the builder's own reader."""

from __future__ import annotations

import csv
import random
from collections import Counter
from pathlib import Path

import pytest

from promptgen.empathy.corpus import load_events
from promptgen.empathy.narratives import EMOTIONS
from promptgen.empathy.synthetic import CORPUS_FILE, DEMO_EVENTS, write_corpus_rows, write_synthetic_corpus


def _rows(root: Path) -> list[dict[str, str]]:
    with (root / CORPUS_FILE).open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


@pytest.mark.parametrize("per_emotion", [1, 4])
def test_demo_events_per_emotion_read_back_by_the_builder(tmp_path: Path, per_emotion: int) -> None:
    root = write_synthetic_corpus(tmp_path / "sources", per_emotion)
    assert root == tmp_path / "sources"
    rows = _rows(root)
    events = load_events(root / CORPUS_FILE, "synthetic")
    assert [e.text_id for e in events] == [r["text_id"] for r in rows]
    assert Counter(r["emotion"] for r in rows) == dict.fromkeys(EMOTIONS, per_emotion)
    assert [r["text_id"] for r in rows] == [f"demo{n:04d}" for n in range(1, len(rows) + 1)]
    assert [r["intensity"] for r in rows] == [str(1 + n % 5) for n in range(1, len(rows) + 1)]
    for emotion in EMOTIONS:  # drawn without replacement per emotion
        texts = [r["generated_text"] for r in rows if r["emotion"] == emotion]
        assert len(set(texts)) == per_emotion and set(texts) <= set(DEMO_EVENTS)
    assert all(r["hidden_emo_text"] == r["generated_text"] for r in rows)


def test_invented_events_follow_the_seeded_rng_in_file_order(tmp_path: Path) -> None:
    def invent(rng: random.Random) -> str:
        return f"event {rng.randrange(10**9)} happened."

    write_synthetic_corpus(tmp_path, 3, invent=invent, seed=7, id_format="gen{:05d}")
    rng = random.Random(7)
    expected = [invent(rng) for _ in range(3 * len(EMOTIONS))]  # emotion-major, as written
    rows = _rows(tmp_path)
    assert [r["generated_text"] for r in rows] == expected
    assert [r["emotion"] for r in rows] == [e for e in EMOTIONS for _ in range(3)]
    assert rows[0]["text_id"] == "gen00001"


def test_rows_with_tabs_and_quotes_round_trip(tmp_path: Path) -> None:
    rows = [["g1", "joy", 'she said "yes"\tat last', "x", "3"]]
    path = write_corpus_rows(tmp_path, rows, header=["text_id", "emotion", "generated_text", "hidden_emo_text", "x"])
    assert path == tmp_path / CORPUS_FILE
    with path.open(encoding="utf-8", newline="") as fh:
        assert list(csv.reader(fh, delimiter="\t"))[1] == rows[0]
