"""The crowd-enVent emotion labels the intergroup-empathy probe keeps, and a word-table helper.

The narratives themselves are the authors' released texts (`promptgen.empathy.release`): T0, T1
and T2 are their `generated_text`, `first_person_text` and `third_person_text`. An earlier version
built T1 by rule from the paper's example (an adjective: `I felt sad when ...`); the authors' data
has the label noun (`I felt sadness when ...`) and the participant's own ending, so the rule went.
"""

from __future__ import annotations


def word_set(text: str) -> frozenset[str]:
    """A word table written as whitespace-separated words, so long tables stay readable."""
    return frozenset(text.split())


#: the 12 crowd-enVent emotion labels the probe keeps (`no-emotion` is dropped), alphabetically;
#: the release's file order is `promptgen.empathy.release.RELEASE_EMOTIONS`
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
