"""The synthetic release narratives (`promptgen.empathy.synthetic`), read back with the builder's own reader."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from promptgen.empathy.release import RELEASE_EMOTIONS, load_release
from promptgen.empathy.synthetic import DEMO_EVENTS, release_file, write_release_rows, write_synthetic_corpus


def _events(root: Path):
    return load_release({e: (release_file(root, e), e) for e in RELEASE_EMOTIONS})


@pytest.mark.parametrize("per_emotion", [1, 4])
def test_demo_events_per_emotion_read_back_by_the_builder(tmp_path: Path, per_emotion: int) -> None:
    root = write_synthetic_corpus(tmp_path / "sources", per_emotion)
    assert root == tmp_path / "sources"
    events = _events(root)
    assert Counter(e.emotion for e in events) == dict.fromkeys(RELEASE_EMOTIONS, per_emotion)
    assert [e.text_id for e in events] == [f"demo{n:04d}" for n in range(1, len(events) + 1)]
    assert [e.position for e in events] == list(range(len(events)))
    for emotion in RELEASE_EMOTIONS:  # drawn without replacement per emotion
        texts = [e.generated_text for e in events if e.emotion == emotion]
        assert len(set(texts)) == per_emotion and set(texts) <= set(DEMO_EVENTS)
    for e in events:  # the release's shapes: the label noun after "I felt", "The person felt"
        assert e.first_person_text.startswith(f"I felt {e.emotion} ")
        assert e.third_person_text.startswith(f"The person felt {e.emotion} ")


def test_invented_events_follow_the_seeded_rng_in_file_order(tmp_path: Path) -> None:
    def invent(rng: random.Random) -> str:
        return f"event {rng.randrange(10**9)} happened."

    write_synthetic_corpus(tmp_path, 3, invent=invent, seed=7, id_format="gen{:05d}")
    rng = random.Random(7)
    expected = [invent(rng) for _ in range(3 * len(RELEASE_EMOTIONS))]  # release emotion order, as written
    events = _events(tmp_path)
    assert [e.generated_text for e in events] == expected
    assert [e.emotion for e in events] == [e for e in RELEASE_EMOTIONS for _ in range(3)]
    assert events[0].text_id == "gen00001"


def test_rows_with_tabs_and_quotes_round_trip_through_pandas(tmp_path: Path) -> None:
    """What is written is what the authors' reader (`read_csv(sep='\\t')`) reads back."""
    row = ["joy", "g1", 'she said "yes"\tat last', "I felt joy when\nshe said yes", "x"]
    write_release_rows(tmp_path, {"joy": [row]})
    frame = pd.read_csv(release_file(tmp_path, "joy"), sep="\t")
    assert [str(v) for v in frame.iloc[0]] == row
    assert pd.read_csv(release_file(tmp_path, "anger"), sep="\t").empty
