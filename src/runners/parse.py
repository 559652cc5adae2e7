"""Reading an answer out of generated text (generation mode, DESIGN section 6). Pure.

Every parse returns a value and a status, so analysis can tell a model that answered
out of range from one that wrote no number at all or named two options; the raw text is
stored next to both. Statuses: `ok`, `no_number`, `out_of_range`, `no_answer`, `ambiguous`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_INTEGER = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?![\d])")
_ANSWER_PREFIX = re.compile(r"^\s*(?:the\s+)?(?:correct\s+)?(?:answer|option|choice)\s*(?:is)?\s*[:\-]?\s*", re.I)


def parse_number(text: str, lo: int, hi: int) -> tuple[int | None, str]:
    """The first integer in `text` (thousands separators allowed), and whether it lies in lo..hi.

    An out-of-range number is returned with status `out_of_range` (it is what the model said),
    so analysis can decide whether to keep it.
    """
    match = _INTEGER.search(text)
    if match is None:
        return None, "no_number"
    value = int(match.group(0).replace(",", ""))
    return value, "ok" if lo <= value <= hi else "out_of_range"


def parse_choice(text: str, labels: Sequence[str], choices: Sequence[str]) -> tuple[int | None, str]:
    """The option a generated answer names: by its label first (`B`, `B)`, `(B)`, `Answer: B`), then by its text.

    A label counts only as a whole token at the start of the answer, so the article "A" at the
    start of a sentence is not read as option A when the sentence goes on with a word; an
    option text counts when exactly one option's text occurs in the answer.
    """
    body = _ANSWER_PREFIX.sub("", text.strip(), count=1)
    for k, label in enumerate(labels):
        if re.match(rf"^[(\[]?{re.escape(label)}(?:[)\].:,]|\s*$|\s+[-:]|\s*\))", body):
            return k, "ok"
    lowered = body.lower()
    hits = [k for k, option in enumerate(choices) if option and option.strip().lower().rstrip(".") in lowered]
    if len(hits) == 1:
        return hits[0], "ok"
    return None, "ambiguous" if hits else "no_answer"
