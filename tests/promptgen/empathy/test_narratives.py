"""T0 and T1 narrative forms of crowd-enVent events, on hand-written corpus-like texts."""

import re

import pytest

from promptgen.empathy.narratives import EMOTION_FORMS, EMOTIONS, build_t0, build_t1

# (rule, participant text as typed, label, the T1 sentence)
T1_CASES = [
    # rule a: a connective continues `I felt {emotion}` directly
    (
        "a when",
        "when I received dozens of job rejections",
        "sadness",
        "I felt sad when I received dozens of job rejections.",
    ),
    ("a because", "because my friend lied to me", "anger", "I felt angry because my friend lied to me."),
    ("a capitalised", "When my cat was sick", "fear", "I felt afraid when my cat was sick."),
    (
        "a that",
        "that my friend trusted me with her secret.",
        "trust",
        "I felt trusting that my friend trusted me with her secret.",
    ),
    ("a after", "After I cheated on my partner", "guilt", "I felt guilty after I cheated on my partner."),
    (
        "a while",
        "while waiting three hours at the airport",
        "boredom",
        "I felt bored while waiting three hours at the airport.",
    ),
    (
        "a since",
        "since I had no idea they were planning a party!",
        "surprise",
        "I felt surprised since I had no idea they were planning a party!",
    ),
    ("a whenever", "whenever my dad yells", "fear", "I felt afraid whenever my dad yells."),
    ("a whole word only", "Asking my boss for a raise", "fear", "I felt afraid when asking my boss for a raise."),
    # rule b: a sentence that already states the feeling is kept
    ("b felt adjective", "I felt so proud when my son graduated.", "pride", "I felt so proud when my son graduated."),
    (
        "b felt label",
        "I felt anger when my boss took credit for my work",
        "anger",
        "I felt anger when my boss took credit for my work.",
    ),
    ("b was", "i was so scared when the plane shook", "fear", "I was so scared when the plane shook."),
    ("b I'm", "I'm so bored at work", "boredom", "I'm so bored at work."),
    ("b happy for joy", "I felt happy when I saw my family again", "joy", "I felt happy when I saw my family again."),
    (
        "b feel noun",
        "I feel a huge relief now that the exam is over",
        "relief",
        "I feel a huge relief now that the exam is over.",
    ),
    (
        "b other emotion's word",
        "I felt happy when my team won",
        "pride",
        "I felt proud when I felt happy when my team won.",
    ),
    (
        "b without the emotion",
        "I felt like nobody cared about me",
        "sadness",
        "I felt sad when I felt like nobody cared about me.",
    ),
    # rule c: anything else follows `I felt {emotion} when`
    ("c fragment", "my dog died last week.", "sadness", "I felt sad when my dog died last week."),
    (
        "c sentence with I",
        "I got a promotion at work and my boss praised me",
        "joy",
        "I felt joyful when I got a promotion at work and my boss praised me.",
    ),
    ("c common opener", "The food smelled rotten", "disgust", "I felt disgusted when the food smelled rotten."),
    ("c someone", "Someone broke into my house!", "fear", "I felt afraid when someone broke into my house!"),
    ("c gerund", "Getting my exam results back", "relief", "I felt relieved when getting my exam results back."),
    ("c name kept", "Mike forgot my birthday", "sadness", "I felt sad when Mike forgot my birthday."),
    ("c holiday kept", "Christmas was cancelled", "sadness", "I felt sad when Christmas was cancelled."),
    (
        "c acronym kept",
        "NASA showed the first image of a black hole",
        "surprise",
        "I felt surprised when NASA showed the first image of a black hole.",
    ),
    ("c lowercase i", "i got a new job", "joy", "I felt joyful when I got a new job."),
    (
        "c I'm kept",
        "I'm not invited to my best friend's wedding",
        "shame",
        "I felt ashamed when I'm not invited to my best friend's wedding.",
    ),
    # whitespace, quotes, final punctuation
    (
        "whitespace",
        "  my   neighbour\tdumped rubbish\nin my garden  ",
        "disgust",
        "I felt disgusted when my neighbour dumped rubbish in my garden.",
    ),
    (
        "enclosing quotes",
        '"my sister borrowed my car without asking"',
        "anger",
        "I felt angry when my sister borrowed my car without asking.",
    ),
    ("curly enclosing quotes", "“I felt so ashamed of myself”", "shame", "I felt so ashamed of myself."),
    (
        "inner quotes",
        'my boss called me "lazy" in front of everyone',
        "shame",
        'I felt ashamed when my boss called me "lazy" in front of everyone.',
    ),
    (
        "two quoted parts kept",
        '"yes" he said, "you got the job"',
        "joy",
        'I felt joyful when "yes" he said, "you got the job".',
    ),
    ("quote after terminal", 'he said "you\'re fired."', "surprise", 'I felt surprised when he said "you\'re fired."'),
    ("trailing comma", "my exam was cancelled,", "relief", "I felt relieved when my exam was cancelled."),
    ("double period", "my exam was cancelled..", "relief", "I felt relieved when my exam was cancelled."),
    ("ellipsis kept", "my exam was cancelled...", "relief", "I felt relieved when my exam was cancelled..."),
    ("question kept", "Did I leave the stove on?", "fear", "I felt afraid when did I leave the stove on?"),
    (
        "typos kept",
        "my freind didnt show up to my birthay",
        "sadness",
        "I felt sad when my freind didnt show up to my birthay.",
    ),
]


def test_the_table_is_large_and_unique():
    assert len(T1_CASES) >= 20
    assert len({(text, emotion) for _, text, emotion, _ in T1_CASES}) == len(T1_CASES)


@pytest.mark.parametrize(("rule", "text", "emotion", "expected"), T1_CASES, ids=[c[0] for c in T1_CASES])
def test_build_t1(rule, text, emotion, expected):
    assert build_t1(text, emotion) == expected


@pytest.mark.parametrize(("rule", "text", "emotion", "expected"), T1_CASES, ids=[c[0] for c in T1_CASES])
def test_t1_is_a_finished_first_person_sentence_naming_the_emotion(rule, text, emotion, expected):
    out = build_t1(text, emotion)
    assert out.startswith("I")
    assert re.search(r"[.!?…][\"”’')\]]*$", out)
    words = {w.lower() for w in re.findall(r"[^\W\d_]+", out)}
    assert words & EMOTION_FORMS[emotion]
    assert build_t1(out, emotion) == out  # a built T1 is already in final form


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("  when my dog died  ", "when my dog died"),
        ("my\tdog\n\ndied.", "my dog died."),
        ('"i got   the job"', '"i got the job"'),
        ("no change, at all", "no change, at all"),
        ("non\u00a0breaking space", "non breaking space"),
    ],
)
def test_build_t0_only_normalises_whitespace(text, expected):
    assert build_t0(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "\n\t ", "...", '""'])
def test_text_without_words_is_an_error(text):
    with pytest.raises(ValueError, match=r"empty|no words"):
        build_t1(text, "joy")
    with pytest.raises(ValueError, match=r"empty|no words"):
        build_t0(text)


@pytest.mark.parametrize("emotion", ["no-emotion", "Joy", "happy", "", "sad"])
def test_unknown_emotion_is_an_error(emotion):
    with pytest.raises(ValueError, match="unknown emotion"):
        build_t1("my dog died", emotion)


def test_emotion_tables_cover_the_twelve_labels():
    assert len(EMOTIONS) == 12 and set(EMOTIONS) == set(EMOTION_FORMS)
    assert all(label in EMOTION_FORMS[label] for label in EMOTIONS)
