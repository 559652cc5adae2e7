"""Reading an answer out of generated text (generation mode, docs/DESIGN.md section 6). Pure.

Every parse returns a value and a status, so analysis can tell a model that answered
out of range from one that wrote no number at all or named two options; the raw text is
stored next to both. Statuses: `ok`, `no_number`, `out_of_range`, `refusal`, `no_answer`, `ambiguous`,
and for free text `no_stop` (the length limit came before the item's stop string).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_INTEGER = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?![\d])")
_ANSWER_PREFIX = re.compile(r"^\s*(?:the\s+)?(?:correct\s+)?(?:answer|option|choice)\s*(?:is)?\s*[:\-]?\s*", re.I)


#: how parse_number reads an answer; in the result key of generation runs (`ScoringSettings.key`), so
#: rows parsed by an earlier rule are never reused as if parsed by this one
NUMBER_PARSER = 2
#: the ways a generated number can be read (`--number-parser`): `scale-aware` is `parse_number` (the
#: project's rule, version `NUMBER_PARSER`); `first-integer` is the empathy authors' released rule
#: (`parse_number_first_integer`), the intergroup-empathy protocol's default
NUMBER_PARSERS: tuple[str, ...] = ("scale-aware", "first-integer")
#: `first-integer`: answers that start so are refusals (`analysis/process_exp_results.py` of the empathy release)
REFUSAL_PREFIXES: tuple[str, ...] = ("I cannot", "I can't", "I'm not rating")
_WORD_INTEGER = re.compile(r"\b\d+\b")
#: `first-integer` keeps values from 0 to this, on every scale
FIRST_INTEGER_MAX = 100


def _scale_mentions(lo: int, hi: int) -> re.Pattern[str]:
    """The ways an answer restates its item's scale instead of answering: `from 0 to 100`, `0-100`,
    `between 0 and 100`, `(1-10)`, `out of 100`, `/100` (the lower end the item's or 1, the upper the item's)."""
    low = rf"(?:{re.escape(str(lo))}|1)"
    high = re.escape(str(hi))
    return re.compile(
        rf"(?:\bscale\s+)?(?:\b(?:from|of|between)\s+)?(?<![\w.]){low}\s*(?:-|–|—|to|and)\s*{high}(?![\d.,]\d)"
        rf"|\bout\s+of\s+{high}(?!\d)|/\s*{high}(?!\d)",
        re.I,
    )


def parse_number(text: str, lo: int, hi: int) -> tuple[int | None, str]:
    """The number an answer gives (thousands separators allowed), and whether it lies in lo..hi.

    The rule (`NUMBER_PARSER` 2): mentions of the item's scale are set aside first (`from 0 to
    100`, `0-100`, `between 0 and 100`, `out of 100`, `/100`; `_scale_mentions`), then the first
    integer left is the answer: "On a scale from 0 to 100, I would rate it 70." reads 70, where
    the first integer alone read 0. An out-of-range number is returned with status
    `out_of_range` (it is what the model said), so analysis can decide whether to keep it.
    """
    text = _scale_mentions(lo, hi).sub(" ", text)
    match = _INTEGER.search(text)
    if match is None:
        return None, "no_number"
    value = int(match.group(0).replace(",", ""))
    return value, "ok" if lo <= value <= hi else "out_of_range"


def parse_number_first_integer(text: str) -> tuple[int | None, str]:
    """The empathy authors' reading of an answer (`extract_numbers` in their `process_exp_results.py`).

    An answer starting with one of `REFUSAL_PREFIXES` is refused; otherwise the runs of digits
    between word boundaries (`\\b\\d+\\b`) are the candidates: one is the answer; of several, the
    first, or the second where the first is outside 0-100. Outside 0-100 (on every scale: the
    authors check 0-100 on the 10-point scale too) or no candidate is a refusal. So "On a scale
    from 0 to 100, I would rate it 70." reads 0, "1,000" reads 1, and "70" on the 10-point
    scale reads 70: their rule, kept byte for byte, since their tables were computed with it.
    Statuses: `refusal` (a refusal prefix), `no_number`, `out_of_range` (the authors' -1: no value
    is kept), `ok`.
    """
    if text.startswith(REFUSAL_PREFIXES):
        return None, "refusal"
    matches = _WORD_INTEGER.findall(text)
    if not matches:
        return None, "no_number"
    # a run of more than three digits is outside 0-100 whatever it holds (and int() of thousands of
    # digits raises): compare by length first
    first = _small_int(matches[0])
    value = _small_int(matches[1]) if len(matches) > 1 and first is None else first
    return (value, "ok") if value is not None else (None, "out_of_range")


def _small_int(digits: str) -> int | None:
    """The digits' value if it lies in 0-100, else None."""
    value = int(digits) if len(digits.lstrip("0")) <= 3 else FIRST_INTEGER_MAX + 1
    return value if value <= FIRST_INTEGER_MAX else None


def read_number(text: str, lo: int, hi: int, parser: str) -> tuple[int | None, str]:
    """A generated number item's answer by the named rule (`NUMBER_PARSERS`)."""
    if parser == "first-integer":
        return parse_number_first_integer(text)
    if parser == "scale-aware":
        return parse_number(text, lo, hi)
    raise ValueError(f"number parser must be one of {', '.join(NUMBER_PARSERS)}, got {parser!r}")


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


def parse_text(text: str, stop: Sequence[str], finish_reason: str) -> tuple[str | None, str]:
    """The answer of a free-text item (`task` = `text`): the text before the first stop string.

    An item that names stop strings expects the model to close its answer with one (the
    empathy rewrite prompt opens a `{` the model must close with `}`); when the length limit
    came first the text is kept but marked `no_stop`, so nothing truncated is used silently.
    Empty answers are `no_answer`.
    """
    cuts = [text.find(s) for s in stop if s and s in text]
    body = text[: min(cuts)] if cuts else text
    if not body.strip():
        return None, "no_answer"
    if stop and not cuts and finish_reason == "length":
        return body.strip(), "no_stop"
    return body.strip(), "ok"
