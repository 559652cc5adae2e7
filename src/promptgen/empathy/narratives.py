"""Narrative forms of a crowd-enVent event for the intergroup-empathy probe (docs/DESIGN.md section 4).

The corpus's `generated_text` is what a participant typed to complete "I felt <emotion>
when/because ...": usually a fragment (`because my friend lied to me`), sometimes a full
sentence that already names the feeling (`I felt so proud when my son graduated.`), with
stray whitespace, quotes, a lowercase start or no final punctuation. Two forms are built:

- T0 (`build_t0`): the participant's own text. Only whitespace is normalised (stripped,
  every run of spaces, tabs and newlines collapsed to one space) so that prompt bytes do
  not depend on how the TSV was edited; no word is changed.
- T1 (`build_t1`): a full first-person sentence that contains the emotion as an adjective, of
  the form `I felt {adjective} when ...` (`EMOTION_ADJECTIVES`: sadness -> sad, anger -> angry,
  pride -> proud, ...), as the paper's example has it (`I felt sad when receiving the job
  rejections.`); the question after it still names the corpus label (`How much sadness ...`).
  Rules, applied in this order after whitespace normalisation:

  q. A single pair of double quotes (`"..."` or curly) enclosing the whole text is removed:
     the templates already quote the narrative. Inner quotes are kept.
  a. Connective: the text starts with one of `CONNECTIVES` (when, whenever, because, that,
     after, as, while, since, if; case-insensitive, whole word) -> `I felt {adjective} {text}`
     with the connective lowercased (`When my dog died` -> `I felt sad when my dog died.`).
  b. Already a sentence about the feeling: the text starts with `I felt`, `I feel`, `I was`,
     `I am`, `I'm`, `I got` or `I became` (case-insensitive, any apostrophe) and contains,
     as a whole word anywhere, a form of the emotion from `EMOTION_FORMS` (`proud` or
     `pride` for pride, `scared` for fear, `happy` for joy, ...) -> kept as written. This is
     also how an `I felt <emotion> when ...` already present is not doubled.
  c. Otherwise (a fragment or a sentence that does not name the feeling) ->
     `I felt {adjective} when {text}`, the text's first letter lowercased only when its first
     word is a common sentence opener (`COMMON_OPENERS`: `My`, `The`, `Someone`, ...) or a
     gerund (`Getting`, `Finding`): an unknown capitalised word may be a name (`Mike`,
     `Christmas`) and is left as written; `I` and its contractions stay capitalised.

  In every rule a leading standalone `i` (`i got a promotion`) is capitalised, and the
  sentence ends with terminal punctuation: a final `.`, `!`, `?` or `…` (possibly followed by
  closing quotes or brackets) is kept, trailing `,`, `;`, `:` are dropped, a doubled final
  `..` becomes `.`, and one `.` is appended when nothing terminal ends the text.

Empty, whitespace-only or wordless text (`...`) and an emotion outside the 12 labels are errors, never a
silent placeholder: `no-emotion` rows are dropped before narratives are built.
"""

from __future__ import annotations

import re


def word_set(text: str) -> frozenset[str]:
    """A word table written as whitespace-separated words, so long tables stay readable."""
    return frozenset(text.split())


#: the 12 crowd-enVent emotion labels the probe keeps (`no-emotion` is dropped).
EMOTIONS: tuple[str, ...] = (
    "anger",
    "boredom",
    "disgust",
    "fear",
    "guilt",
    "joy",
    "pride",
    "relief",
    "sadness",
    "shame",
    "surprise",
    "trust",
)

#: words that name each emotion in a participant's sentence (noun and adjective forms), for rule b.
EMOTION_FORMS: dict[str, frozenset[str]] = {
    "anger": word_set("anger angry angered"),
    "boredom": word_set("boredom bored"),
    "disgust": word_set("disgust disgusted"),
    "fear": word_set("fear fearful afraid scared frightened"),
    "guilt": word_set("guilt guilty"),
    "joy": word_set("joy joyful happy happiness"),
    "pride": word_set("pride proud"),
    "relief": word_set("relief relieved"),
    "sadness": word_set("sadness sad"),
    "shame": word_set("shame ashamed"),
    "surprise": word_set("surprise surprised"),
    "trust": word_set("trust trusting trusted"),
}

#: the adjective T1 writes for each emotion (`I felt sad when ...`, the paper's example's form)
EMOTION_ADJECTIVES: dict[str, str] = {
    "anger": "angry",
    "boredom": "bored",
    "disgust": "disgusted",
    "fear": "afraid",
    "guilt": "guilty",
    "joy": "joyful",
    "pride": "proud",
    "relief": "relieved",
    "sadness": "sad",
    "shame": "ashamed",
    "surprise": "surprised",
    "trust": "trusting",
}

#: words that can directly continue `I felt {adjective} ...` (rule a).
CONNECTIVES: tuple[str, ...] = ("when", "whenever", "because", "that", "after", "as", "while", "since", "if")

#: capitalised first words that are safe to lowercase after `when` (rule c); anything else may be a name.
COMMON_OPENERS: frozenset[str] = word_set(
    """
    a an the my our your his her their its this that these those there here it he she we they you me someone
    somebody something everyone everybody everything nobody nothing no none one two three several some many most
    all both each every another other mine at in on during before for with without by from to about over under
    into through last yesterday today tonight recently finally then now just only even almost nearly also not
    and but or so although though where what how why which who is are was were do does did have has had can
    could will would should
    """
)

_QUOTE_PAIRS = (('"', '"'), ("“", "”"))
_APOSTROPHES = "'’"
_FEELING_START = re.compile(rf"^i(?:\s+(?:felt|feel|was|am|got|became)|[{_APOSTROPHES}]?m)\b", re.IGNORECASE)
_CONNECTIVE = re.compile(rf"^(?:{'|'.join(CONNECTIVES)})\b", re.IGNORECASE)
_FIRST_WORD = re.compile(r"^[^\W\d_]+(?:['’][^\W\d_]+)*")
_LEADING_LOWER_I = re.compile(rf"^i(?=$|[\s{_APOSTROPHES},])")
_CLOSERS = "\"”’')]"
_TERMINAL = ".!?…"


def normalise_whitespace(text: str) -> str:
    """Strip and collapse every run of whitespace (spaces, tabs, newlines, NBSP) to one space."""
    return " ".join(text.split())


def _require_text(text: str) -> str:
    if not isinstance(text, str):
        raise ValueError(f"narrative text must be a string, got {type(text).__name__}")
    normalised = normalise_whitespace(text)
    if not normalised:
        raise ValueError("narrative text is empty or whitespace-only; drop the event instead of prompting with it")
    if not any(ch.isalnum() for ch in normalised):
        raise ValueError(f"narrative text {normalised!r} has no words; drop the event instead of prompting with it")
    return normalised


def _require_emotion(emotion: str) -> str:
    if emotion not in EMOTION_FORMS:
        raise ValueError(
            f"unknown emotion {emotion!r}; expected one of {', '.join(EMOTIONS)} (no-emotion rows are dropped)"
        )
    return emotion


def build_t0(text: str) -> str:
    """The participant's own text (T0), whitespace-normalised only.

    Kept verbatim otherwise because T0 is the condition that shows the model exactly what
    the participant wrote.
    """
    return _require_text(text)


def _strip_enclosing_quotes(text: str) -> str:
    for opening, closing in _QUOTE_PAIRS:
        inner = text[1:-1]
        if (
            len(text) >= 2
            and text[0] == opening
            and text[-1] == closing
            and opening not in inner
            and closing not in inner
        ):
            return inner.strip()
    return text


def _finish_sentence(text: str) -> str:
    """Exactly one terminal mark at the end: keep `.!?…`, drop trailing `,;:`, else add `.`."""
    text = text.rstrip(",;: ")
    if text.endswith("..") and not text.endswith("..."):
        text = text[:-1]
    if text.rstrip(_CLOSERS)[-1:] in tuple(_TERMINAL):
        return text
    return text + "."


def _mentions_emotion(text: str, emotion: str) -> bool:
    words = {w.lower() for w in re.findall(r"[^\W\d_]+", text)}
    return not words.isdisjoint(EMOTION_FORMS[emotion])


def _lower_opener(text: str) -> str:
    """Lowercase the first letter when the first word is a known common opener or a gerund (rule c)."""
    match = _FIRST_WORD.match(text)
    if match is None:
        return text
    word = match.group(0)
    if not (word[:1].isupper() and word[1:].islower()):
        return text  # `I`, `I'm`, acronyms (`NASA`), mixed case (`iPhone`), already lowercase
    lower = word.lower()
    if lower in COMMON_OPENERS or (lower.endswith("ing") and len(lower) >= 5):
        return text[0].lower() + text[1:]
    return text


def build_t1(text: str, emotion: str) -> str:
    """A full first-person sentence naming the emotion (T1): `I felt {adjective} when ...`.

    T1 controls for the corpus's fragments: the model always reads a complete sentence in
    which the narrator states the feeling. The rules are in the module docstring.
    """
    emotion = _require_emotion(emotion)
    body = _strip_enclosing_quotes(_require_text(text))
    if not body:
        raise ValueError("narrative text is empty once its enclosing quotes are removed")
    body = _LEADING_LOWER_I.sub("I", body)
    adjective = EMOTION_ADJECTIVES[emotion]
    if _CONNECTIVE.match(body):
        sentence = f"I felt {adjective} {body[0].lower()}{body[1:]}"
    elif _FEELING_START.match(body) and _mentions_emotion(body, emotion):
        sentence = body[0].upper() + body[1:]
    else:
        sentence = f"I felt {adjective} when {_lower_opener(body)}"
    return _finish_sentence(sentence)
