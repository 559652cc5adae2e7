"""The T2 rewriters: the rule-based `to_third_person` against hand-written rewrites, and the LLM prompt."""

import re

import pytest

from promptgen.empathy.third_person import parse_rewrite, rewrite_prompt, to_third_person

# (phenomenon, first-person input, what a careful human rewriter writes)
CASES = [
    # the DESIGN example and the basic first-mention / later-mention split
    (
        "design",
        "I felt sad when I received dozens of job rejections.",
        "The person felt sad when they received dozens of job rejections.",
    ),
    (
        "design-label",
        "I felt sadness when my dog died last week.",
        "The person felt sadness when their dog died last week.",
    ),
    # be / have / do after the sentence-initial subject
    ("am", "I am so proud of my son.", "The person is so proud of their son."),
    (
        "was",
        "I was furious when my sister read my diary.",
        "The person was furious when their sister read their diary.",
    ),
    ("have", "I have never felt so relieved in my life.", "The person has never felt so relieved in their life."),
    ("do", "I do everything for my kids.", "The person does everything for their kids."),
    ("don't", "I don't trust my neighbours anymore.", "The person doesn't trust their neighbours anymore."),
    ("do not", "I do not like it when people lie to me.", "The person does not like it when people lie to them."),
    ("haven't", "I haven't slept since my mother died.", "The person hasn't slept since their mother died."),
    ("I'm not", "I'm not sure why I was so angry.", "The person is not sure why they were so angry."),
    # present tense gets -s / -es / -ies; past and modals stay
    ("-s", "I feel guilty whenever I think about it.", "The person feels guilty whenever they think about it."),
    (
        "-es o",
        "I go to work every day and nobody notices me.",
        "The person goes to work every day and nobody notices them.",
    ),
    ("-ies", "I try my best but I always fail.", "The person tries their best but they always fail."),
    (
        "-es ch",
        "I watch the news and I worry about my family.",
        "The person watches the news and they worry about their family.",
    ),
    ("-es ss", "I miss my grandmother.", "The person misses their grandmother."),
    ("vowel+y", "I enjoy my job.", "The person enjoys their job."),
    ("need", "I need a break from my family.", "The person needs a break from their family."),
    ("adverb", "I really feel bad for myself.", "The person really feels bad for themselves."),
    ("-ly adverb", "I sincerely hope my mom gets better.", "The person sincerely hopes their mom gets better."),
    ("past stays", "I lost my wallet on the bus.", "The person lost their wallet on the bus."),
    ("modal stays", "I can't believe I passed.", "The person can't believe they passed."),
    # contractions at the start
    ("I've", "I've been waiting for this moment for years.", "The person has been waiting for this moment for years."),
    ("I'd had", "I'd never seen anything like it.", "The person had never seen anything like it."),
    ("I'd would", "I'd love to go back there.", "The person would love to go back there."),
    ("I'll", "I'll never forget the day my father left.", "The person will never forget the day their father left."),
    # contractions later in the sentence keep their contracted form
    (
        "later I'm",
        "I felt scared because I'm afraid of the dark.",
        "The person felt scared because they're afraid of the dark.",
    ),
    (
        "later I've",
        "I felt joy because I've passed my driving test.",
        "The person felt joy because they've passed their driving test.",
    ),
    (
        "later I'd",
        "I felt relief when I'd finished my exams.",
        "The person felt relief when they'd finished their exams.",
    ),
    (
        "later I'll",
        "I felt fear because I'll have to move out.",
        "The person felt fear because they'll have to move out.",
    ),
    # curly apostrophes, no apostrophe, lowercase i
    (
        "curly",
        "I’m so happy that I’ve finally found a job.",
        "The person is so happy that they’ve finally found a job.",
    ),
    (
        "curly don’t",
        "I don’t know what I’d do without my dog.",
        "The person doesn’t know what they’d do without their dog.",
    ),
    ("no apostrophe", "Im scared because Im alone at night.", "The person is scared because they're alone at night."),
    (
        "no apostrophe Ive",
        "Ive lost my wallet and Ill have to cancel my cards.",
        "The person has lost their wallet and they'll have to cancel their cards.",
    ),
    ("lowercase i", "i felt sad when i lost my phone", "The person felt sad when they lost their phone"),
    ("lowercase i'm", "i'm happy because i got the job.", "The person is happy because they got the job."),
    # plural agreement after a later `they`
    (
        "later am",
        "I felt hopeful because I am finally healthy.",
        "The person felt hopeful because they are finally healthy.",
    ),
    (
        "later was",
        "I felt sad when I was told I was not wanted.",
        "The person felt sad when they were told they were not wanted.",
    ),
    (
        "later wasn't",
        "I felt ashamed because I wasn't prepared.",
        "The person felt ashamed because they weren't prepared.",
    ),
    (
        "later I'm not",
        "I felt bad because I'm not good enough.",
        "The person felt bad because they're not good enough.",
    ),
    # first person plural
    ("we our", "We lost our house in the fire.", "They lost their house in the fire."),
    (
        "we us",
        "I felt proud when we won and everyone cheered for us.",
        "The person felt proud when they won and everyone cheered for them.",
    ),
    (
        "we're ours",
        "We're moving, and the house will no longer be ours.",
        "They're moving, and the house will no longer be theirs.",
    ),
    ("ourselves", "I felt guilt because we blamed ourselves.", "The person felt guilt because they blamed themselves."),
    (
        "we've we'll",
        "We've been friends for years, so we'll be fine.",
        "They've been friends for years, so they'll be fine.",
    ),
    ("we'd", "I felt joy when we'd finally made it home.", "The person felt joy when they'd finally made it home."),
    ("we then I", "We went hiking and I got lost.", "They went hiking and the person got lost."),
    # the referent is introduced wherever the first singular mention is
    ("my first", "My dog died and I cried all night.", "The person's dog died and they cried all night."),
    ("me first", "Someone stole my bike and laughed at me.", "Someone stole the person's bike and laughed at them."),
    ("I mid-sentence", "Yesterday I got fired.", "Yesterday the person got fired."),
    ("mine first", "A friend of mine betrayed me.", "A friend of the person's betrayed them."),
    (
        "mine later",
        "I felt disgust when the mess turned out to be mine.",
        "The person felt disgust when the mess turned out to be theirs.",
    ),
    (
        "Me and",
        "Me and my brother fought over my inheritance.",
        "The person and their brother fought over their inheritance.",
    ),
    ("I myself", "I myself saw it happen.", "The person themselves saw it happen."),
    # sentence starts inside multi-sentence text
    ("new sentence", "My dog died. I cried all night.", "The person's dog died. They cried all night."),
    (
        "! ? starts",
        "I felt sad. I was alone! I am still alone?",
        "The person felt sad. They were alone! They are still alone?",
    ),
    ("My later", "I felt joy. My sister had a baby!", "The person felt joy. Their sister had a baby!"),
    ("first mention after a sentence", "The dog barked. I ran away.", "The dog barked. The person ran away."),
    # inverted questions
    ("do I", "Why do I always fail?", "Why does the person always fail?"),
    ("was I", "I felt fear. Was I going to die?", "The person felt fear. Were they going to die?"),
    ("am I", "I felt stupid. Am I really that naive?", "The person felt stupid. Are they really that naive?"),
    # look-alike words and protected text
    (
        "look-alikes",
        "I felt joy when Mike gave me his old iPhone.",
        "The person felt joy when Mike gave them his old iPhone.",
    ),
    (
        "contains me/my/i",
        "I felt uneasy about the mystery at the time Jimmy came home.",
        "The person felt uneasy about the mystery at the time Jimmy came home.",
    ),
    ("US", "I felt surprise when we moved to the US.", "The person felt surprise when they moved to the US."),
    (
        "i.e.",
        "I felt relieved when I got the results, i.e. I was healthy.",
        "The person felt relieved when they got the results, i.e. they were healthy.",
    ),
    (
        "roman I",
        "I felt fear when I was diagnosed with Type I diabetes.",
        "The person felt fear when they were diagnosed with Type I diabetes.",
    ),
    (
        "noun mine",
        "I felt afraid when my uncle took me down a coal mine.",
        "The person felt afraid when their uncle took them down a coal mine.",
    ),
    (
        "quoted speech",
        'I felt pride when my daughter said "I love you, mom."',
        'The person felt pride when their daughter said "I love you, mom."',
    ),
    (
        "curly quotes",
        "I felt anger when he called me “useless” in front of my team.",
        "The person felt anger when he called them “useless” in front of their team.",
    ),
    (
        "punctuation",
        "I, for one, was shocked (and my wife too)...",
        "The person, for one, was shocked (and their wife too)...",
    ),
    ("whitespace kept", "I felt sad  when I lost.\n", "The person felt sad  when they lost.\n"),
]

# first-person words a rewrite must not leave behind (outside quotes and known look-alikes)
FIRST_PERSON = re.compile(
    r"\b(?:[Ii]|[Ii]['’]?(?:m|ve|d|ll)|[Mm]e|[Mm]y|[Mm]ine|[Mm]yself|[Ww]e|[Ww]e['’](?:re|ve|d|ll)|[Uu]s|[Oo]urs?|"
    r"[Oo]urselves)\b"
)
LOOK_ALIKES = ("i.e.", "Type I", "coal mine")


def remaining_first_person(text: str) -> list[str]:
    text = re.sub(r'"[^"]*"|“[^”]*”', " ", text)
    for phrase in LOOK_ALIKES:
        text = text.replace(phrase, " ")
    return FIRST_PERSON.findall(text)


def test_the_table_is_large_and_unique():
    assert len(CASES) >= 40
    assert len({source for _, source, _ in CASES}) == len(CASES)


@pytest.mark.parametrize(("phenomenon", "source", "expected"), CASES, ids=[c[0] for c in CASES])
def test_to_third_person(phenomenon, source, expected):
    assert to_third_person(source) == expected


@pytest.mark.parametrize(("phenomenon", "source", "expected"), CASES, ids=[c[0] for c in CASES])
def test_rewrites_leave_no_first_person_and_start_capitalised(phenomenon, source, expected):
    out = to_third_person(source)
    assert remaining_first_person(source), "every table input has something to rewrite"
    assert remaining_first_person(out) == []
    assert out[:1].isupper()
    assert to_third_person(out) == out  # a rewrite is a fixed point


NO_FIRST_PERSON = [
    "The person felt sad when they received dozens of job rejections.",
    "Time is a mystery to Mike, who loves his iPhone.",
    'She said "I quit" and left.',
    "The US team won the game, i.e. late.",
    "They worked in a gold mine in Maine.",
    "  Nothing here,\tat all!  \n",
    "MY GOD, it was awful.",
]


@pytest.mark.parametrize("text", NO_FIRST_PERSON)
def test_text_without_first_person_is_unchanged(text):
    assert to_third_person(text) == text


@pytest.mark.parametrize("blank", ["", "   ", "\n\t"])
def test_blank_input_is_an_error(blank):
    with pytest.raises(ValueError, match="empty"):
        to_third_person(blank)


def test_rewrite_prompt_is_design_byte_for_byte():
    expected = (
        "Rewrite the text.\nExample:\nText: {The person: I am thinking about this situation.}\n"
        "Rewrite: {The person is thinking about this situation.}\n"
        "Text: {The person: I felt sad when I received dozens of job rejections.}\nRewrite: {"
    )
    assert rewrite_prompt("I felt sad when I received dozens of job rejections.") == expected


def test_rewrite_prompt_keeps_braces_in_the_narrative():
    assert rewrite_prompt("I felt {odd}.").endswith("Text: {The person: I felt {odd}.}\nRewrite: {")
    with pytest.raises(ValueError):
        rewrite_prompt("  ")


@pytest.mark.parametrize(
    ("generated", "expected"),
    [
        (
            "The person felt sad when they received dozens of job rejections.}",
            "The person felt sad when they received dozens of job rejections.",
        ),
        (" The person is happy. }\nText: {more", "The person is happy."),
        ("The person is happy.", "The person is happy."),
        ("first} second}", "first"),
        ("}", None),
        ("   }", None),
        ("", None),
        ("  \n ", None),
    ],
)
def test_parse_rewrite(generated, expected):
    assert parse_rewrite(generated) == expected
