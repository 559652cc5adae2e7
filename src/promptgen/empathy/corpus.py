"""Read the crowd-enVent generation corpus (Troiano, Oberländer & Klinger 2023).

The file is `corpus/crowd-enVent_generation.tsv` of the authors' zip: tab-separated with a
header and quoted fields (quotes and tabs inside a field are escaped the csv way). Only
five columns are used; the many appraisal and demographic columns are ignored. Every
problem names the file, the line and the column, because one silently dropped event
would shift every per-emotion mean downstream.
"""

from __future__ import annotations

import csv
import io
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pandas as pd

from ..core.errors import SourceFormatError
from .narratives import EMOTIONS

REQUIRED_COLUMNS: tuple[str, ...] = ("text_id", "emotion", "generated_text", "hidden_emo_text", "intensity")
NO_EMOTION = "no-emotion"
#: the published corpus after dropping `no-emotion`: 6,050 events, 550 per emotion and 275 each
#: for guilt and shame (which share one 550 slot). docs/DESIGN.md section 4 and the issue print 225, but
#: 10 x 550 + 2 x 225 = 5,950, not the 6,050 they also state; 275 is the figure consistent with
#: the total (and with the corpus's 6,600 texts including 550 no-emotion).
EXPECTED_TOTAL = 6_050
EXPECTED_PER_EMOTION: dict[str, int] = {e: (275 if e in ("guilt", "shame") else 550) for e in EMOTIONS}
assert sum(EXPECTED_PER_EMOTION.values()) == EXPECTED_TOTAL


@dataclass(frozen=True)
class Event:
    text_id: str
    emotion: str
    generated_text: str
    hidden_emo_text: str
    intensity: int | None
    line: int  # file line, for messages about this event later


def read_tsv(path: Path, display: str) -> pd.DataFrame:
    """The TSV as text cells (nothing coerced, so checks see exactly what the file holds)."""
    try:
        data = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SourceFormatError(display, "(whole file)", f"not UTF-8: {exc}") from exc
    try:
        return pd.read_csv(
            io.StringIO(data),
            sep="\t",
            dtype=str,
            keep_default_na=False,
            na_filter=False,
            quoting=csv.QUOTE_MINIMAL,
            engine="python",
        )
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise SourceFormatError(display, "(whole file)", f"not a readable TSV: {exc}") from exc


def parse_events(frame: pd.DataFrame, display: str) -> list[Event]:
    """Validated events with `no-emotion` rows dropped, in file order."""
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise SourceFormatError(display, "header", f"missing column(s) {missing}; found {list(frame.columns)[:12]}...")
    events: list[Event] = []
    seen: dict[str, int] = {}
    allowed = (*EMOTIONS, NO_EMOTION)
    for i, row in enumerate(frame[list(REQUIRED_COLUMNS)].itertuples(index=False)):
        line = i + 2  # header is line 1
        _check_complete(frame, i, row, display, line)
        text_id, emotion, text, hidden, intensity = (str(v) for v in row)
        where = f"line {line} (text_id {text_id!r})"
        emotion = emotion.strip()
        if not text_id.strip():
            raise SourceFormatError(display, f"line {line}", "empty text_id")
        if emotion not in allowed:
            raise SourceFormatError(
                display, f"{where}, column 'emotion'", f"unknown emotion {emotion!r}; expected one of {list(allowed)}"
            )
        if emotion == NO_EMOTION:
            continue
        if text_id in seen:
            raise SourceFormatError(display, f"{where}, column 'text_id'", f"duplicate of line {seen[text_id]}")
        seen[text_id] = line
        if not text.strip():
            raise SourceFormatError(display, f"{where}, column 'generated_text'", "empty narrative")
        value = _parse_intensity(intensity, display, f"{where}, column 'intensity'")
        events.append(Event(text_id.strip(), emotion, text, hidden, value, line))
    if not events:
        raise SourceFormatError(display, "(whole file)", "no events after dropping no-emotion rows")
    return events


def _check_complete(frame: pd.DataFrame, i: int, row: tuple, display: str, line: int) -> None:
    """A row shorter than the header: pandas fills the absent cells with NaN, which would
    otherwise reach the checks below as the text 'nan'; name the first missing field instead."""
    missing = [c for c, v in zip(REQUIRED_COLUMNS, row, strict=True) if not isinstance(v, str)]
    if missing:
        fields = sum(isinstance(v, str) for v in frame.iloc[i])
        raise SourceFormatError(
            display,
            f"line {line}, column {missing[0]!r}",
            f"field missing: the row has {fields} of the header's {len(frame.columns)} fields",
        )


def _parse_intensity(text: str, display: str, where: str) -> int | None:
    """The annotated intensity as an integer; empty is None (not annotated). `inf`, `nan` and
    values beyond float range are errors: they cannot be an intensity and `int()` would raise."""
    if not text.strip():
        return None
    try:
        number = float(text)
    except ValueError as exc:
        raise SourceFormatError(display, where, f"{text!r} is not a number") from exc
    if not math.isfinite(number):
        raise SourceFormatError(display, where, f"{text!r} is not a finite number")
    return int(number)


def load_events(path: Path, display: str) -> list[Event]:
    return parse_events(read_tsv(path, display), display)


class _Emotional(Protocol):
    """What the count reads of an event: its emotion (a corpus `Event` or a release `ReleaseEvent`)."""

    @property
    def emotion(self) -> str: ...


def count_deviations(events: Sequence[_Emotional]) -> list[str]:
    """How a full corpus differs from the published counts (empty when it matches)."""
    counts = Counter(e.emotion for e in events)
    out = []
    if len(events) != EXPECTED_TOTAL:
        out.append(f"{len(events)} events after dropping no-emotion, expected {EXPECTED_TOTAL}")
    for emotion, expected in EXPECTED_PER_EMOTION.items():
        if counts.get(emotion, 0) != expected:
            out.append(f"{emotion}: {counts.get(emotion, 0)} events, expected {expected}")
    return out
