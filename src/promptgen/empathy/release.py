"""Read the empathy authors' released narratives (docs/DESIGN.md section 4), as their own code reads them.

The release (`houyu0930/intergroup-empathy-bias` at cdfd1a6, folder `data/`) holds the paper's
6,050 crowd-enVent events in twelve TSVs, one per emotion, with the three narrative forms the
prompts use: `generated_text` (T0), `first_person_text` (T1, "I felt sadness when ...") and
`third_person_text` (T2, the authors' Llama-3-70B-Instruct rewrite). Their `read_all_data` reads
each file with `pandas.read_csv(path, sep='\\t')` and its defaults and concatenates them in
`const.py`'s emotion order (`RELEASE_EMOTIONS`); the prompts hold the text as parsed that way, so
this module does exactly the same: a field that opens with a double quote loses its quotes
(145 of them in the release), and nothing is stripped or normalised. A narrative pandas reads as
missing would be the text `nan` in the authors' prompts; here it is an error naming the file,
line and column, since the pinned files have none.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..core.errors import SourceFormatError

#: `const.py`'s `crowd_enVent_emotions`: the order the authors concatenate the files in, which is
#: the order of the events in every prompt config (and so of their `idx`)
RELEASE_EMOTIONS: tuple[str, ...] = (
    "anger",
    "disgust",
    "fear",
    "guilt",
    "sadness",
    "shame",
    "boredom",
    "joy",
    "pride",
    "trust",
    "relief",
    "surprise",
)
COLUMNS: tuple[str, ...] = ("emotion", "text_id", "generated_text", "first_person_text", "third_person_text")
#: the T2 method of the release's `third_person_text` (the paper's appendix A.2)
RELEASE_T2_METHOD = "authors-llama-3-70b-instruct"


def source_id(emotion: str) -> str:
    """The recipe's source id of one emotion's file."""
    return f"empathy-release-{emotion}"


@dataclass(frozen=True)
class ReleaseEvent:
    """One event of the release, its three narratives as the authors' prompts hold them."""

    text_id: str
    emotion: str
    generated_text: str
    first_person_text: str
    third_person_text: str
    #: its position in the concatenated 6,050 events: the last factor of the authors' `idx`
    position: int


def read_release_file(path: Path, display: str, emotion: str) -> pd.DataFrame:
    """One emotion's TSV, read as `read_all_data` reads it (pandas defaults), columns checked."""
    try:
        frame = pd.read_csv(path, sep="\t")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise SourceFormatError(display, "(whole file)", f"not a readable TSV: {exc}") from exc
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise SourceFormatError(display, "header", f"missing column(s) {missing}; found {list(frame.columns)}")
    for i, row in enumerate(frame[list(COLUMNS)].itertuples(index=False)):
        line = f"row {i + 1} (text_id {row.text_id!r})"
        for column in COLUMNS:
            value = getattr(row, column)
            if not isinstance(value, str) and pd.isna(value):
                raise SourceFormatError(display, f"{line}, column {column!r}", "empty: pandas reads it as missing")
        if row.emotion != emotion:
            raise SourceFormatError(display, f"{line}, column 'emotion'", f"{row.emotion!r} in the {emotion} file")
    return frame


def load_release(paths: dict[str, tuple[Path, str]]) -> list[ReleaseEvent]:
    """The events of the twelve files (emotion -> (path, display name)), concatenated in `RELEASE_EMOTIONS` order."""
    events: list[ReleaseEvent] = []
    seen: dict[str, str] = {}
    for emotion in RELEASE_EMOTIONS:
        path, display = paths[emotion]
        frame = read_release_file(path, display, emotion)
        for i, row in enumerate(frame[list(COLUMNS)].itertuples(index=False)):
            text_id = str(row.text_id)
            if text_id in seen:
                raise SourceFormatError(
                    display, f"row {i + 1}, column 'text_id'", f"{text_id!r} is also an event of {seen[text_id]}"
                )
            seen[text_id] = display
            events.append(
                ReleaseEvent(
                    text_id,
                    emotion,
                    str(row.generated_text),
                    str(row.first_person_text),
                    str(row.third_person_text),
                    len(events),
                )
            )
    return events
