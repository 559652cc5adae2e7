"""Third-person rewrites of T1 narratives for the T2 setting (docs/DESIGN.md section 4).

Two methods produce T2, and the build records which one made each event's text:

- `rewrite_prompt` / `parse_rewrite`: the paper's 1-shot LLM rewrite, run through the runners
  with any model (generation stops at `}`).
- `to_third_person`: a deterministic rule-based rewriter, the offline default, so a build
  needs no model and gives the same bytes every time. It is table-driven: each table
  below is one phenomenon, so a wrong rewrite is fixed by editing a table, not the logic.

Rules of `to_third_person`, in the order a reader meets them:

1. Pronouns are whole words (letters joined by `'` or `’`), matched in lowercase or
   capitalised spelling (`my`, `My`, never `MY` or `US`, which are usually something else).
   `I`-forms also match lowercase `i`, curly apostrophes and the apostrophe-less `Im`,
   `im`, `Ive`, `ive`, `Ill`, `Id` (lowercase `ill` and `id` are words and stay).
   Words that merely contain the letters (`time`, `mystery`, `Mike`, `iPhone`) never match.
2. The first singular first-person word of the text introduces the referent as a noun
   phrase: `I` -> `the person`, `me` -> `the person`, `my`/`mine` -> `the person's`,
   `I'm` -> `the person is`, `I've` -> `the person has`, `I'll` -> `the person will`, `I'd` ->
   `the person had` before a past participle (`been`, `gone`, `-ed`, ...; adverbs skipped)
   or `better`, else `the person would`. Every later one is a pronoun: `I` -> `they`,
   `me` -> `them`, `my` -> `their`, `mine` -> `theirs`, `myself` -> `themselves` (always),
   `I'm`/`I've`/`I'd`/`I'll` -> `they're`/`they've`/`they'd`/`they'll`. So `I felt sad when I
   received ...` -> `The person felt sad when they received ...`, and `Yesterday I ...` ->
   `Yesterday the person ...` (a `they` with no antecedent would be unclear).
3. Plural first person always becomes the plural third person and never introduces the
   referent: `we`/`us`/`our`/`ours`/`ourselves` -> `they`/`them`/`their`/`theirs`/`themselves`,
   `we're`/`we've`/`we'd`/`we'll` -> `they're`/`they've`/`they'd`/`they'll`.
4. Verb agreement with the subject `I`, on the next word (skipping whitespace, the
   adverbs in `ADVERBS` and `-ly` words other than `LY_VERBS`, and stopping at any punctuation):
   - after `the person` (singular): `am` -> `is`, `have` -> `has`, `do` -> `does`,
     `don't` -> `doesn't`, `haven't` -> `hasn't`; other present-tense verbs get `-s`/`-es`/`-ies`
     (`feel` -> `feels`, `go` -> `goes`, `try` -> `tries`, `play` -> `plays`); past forms
     (`-ed` except `need`-like bases in `BASE_ED`, `IRREGULAR_PAST`, and `AMBIGUOUS_PAST` such as
     `put`, `read`), modals and the non-verbs in `NOT_VERBS` stay.
   - after `they` (plural): `am` -> `are`, `was` -> `were`, `wasn't` -> `weren't`; all else stays.
   - inverted questions (`am I`, `was I`, `do I`, `can I`, ...: an auxiliary directly before
     `I`): the auxiliary agrees instead (`Why do I` -> `Why does the person`, `was I` ->
     `were they`) and the word after `I` is left alone.
5. Capitalisation: a replacement is capitalised at the start of a sentence (start of the
   text, or after `.`, `!`, `?`, `…` and optional closing quotes/brackets, but not after the
   abbreviations `i.e.`, `e.g.`, `cf.`, `vs.`, `Mr.`, `Mrs.`, `Ms.`, `Dr.`, `St.`) and, for
   non-`I` words, wherever the original was capitalised (`My` -> `Their`). A later sentence
   that starts with `I` therefore starts with `They` (`... died. I cried.` -> `... died. They
   cried.`): the referent is introduced once, as a careful writer would.
6. Text inside double quotes (`"..."` or `“...”`, closed pairs only) is direct speech or a
   quotation and is left verbatim: in `my mom said "I'm proud of you"` the `I` is the mom.
   All punctuation and whitespace are kept byte for byte.
7. Look-alikes that are not pronouns stay: `i` in `i.e.`, roman numeral `I` after a
   capitalised `War`, `Type`, `Stage`, ... (`World War I`), and the noun `mine` after
   `a`, `the`, `coal`, `gold`, ... (`a coal mine`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .narratives import word_set

#: written into the dataset next to each rule-based T2 narrative, so results can be split by method.
RULE_METHOD = "rules"

# ---------------------------------------------------------------- the LLM rewrite (paper)

_PROMPT_HEAD = (
    "Rewrite the text.\n"
    "Example:\n"
    "Text: {The person: I am thinking about this situation.}\n"
    "Rewrite: {The person is thinking about this situation.}\n"
    "Text: {The person: "
)
_PROMPT_TAIL = "}\nRewrite: {"
#: generation stops at the brace that closes the rewrite the prompt opened
REWRITE_STOP: tuple[str, ...] = ("}",)


def rewrite_prompt(narrative: str) -> str:
    """docs/DESIGN.md section 4's 1-shot third-person rewrite prompt for one T1 narrative, byte for byte.

    Concatenated rather than `str.format`-ed because narratives may contain braces.
    """
    if not narrative.strip():
        raise ValueError("cannot build a rewrite prompt for an empty narrative")
    return _PROMPT_HEAD + narrative + _PROMPT_TAIL


def parse_rewrite(generated: str) -> str | None:
    """The rewrite in a generation that followed `rewrite_prompt`: text up to the first `}`.

    The prompt opens a `{` the model is expected to close; a backend that honours the stop
    string returns the text without it, one that does not returns it and more. None when
    nothing is left, so an empty rewrite is recorded as a failure rather than used.
    """
    text = generated.split("}", 1)[0].strip()
    return text or None


# ---------------------------------------------------------------- the rule-based rewrite: tables

#: plural first person -> third person (rule 3); keys are lowercase with a straight apostrophe.
PLURAL = {
    "we": "they",
    "us": "them",
    "our": "their",
    "ours": "theirs",
    "ourselves": "themselves",
    "we're": "they're",
    "we've": "they've",
    "we'd": "they'd",
    "we'll": "they'll",
}
#: singular first person, first mention (rule 2); `I'd` is resolved separately.
FIRST_MENTION = {
    "i": "the person",
    "me": "the person",
    "my": "the person's",
    "mine": "the person's",
    "i'm": "the person is",
    "i've": "the person has",
    "i'll": "the person will",
}
#: singular first person, later mentions (rule 2).
LATER_MENTION = {
    "i": "they",
    "me": "them",
    "my": "their",
    "mine": "theirs",
    "myself": "themselves",
    "i'm": "they're",
    "i've": "they've",
    "i'd": "they'd",
    "i'll": "they'll",
}
#: apostrophe-less spellings of `I` contractions, matched case-sensitively (`ill`, `id` are words).
NO_APOSTROPHE = {"Im": "i'm", "im": "i'm", "Ive": "i've", "ive": "i've", "Ill": "i'll", "Id": "i'd"}

#: agreement of the word after `the person` / before it in an inverted question (rule 4).
SINGULAR_AUX = {
    "am": "is",
    "have": "has",
    "do": "does",
    "don't": "doesn't",
    "haven't": "hasn't",
    "dont": "doesn't",
    "havent": "hasn't",
    "aren't": "isn't",
}
#: agreement of the word after `they` / before it in an inverted question (rule 4).
PLURAL_AUX = {"am": "are", "was": "were", "wasn't": "weren't", "wasnt": "weren't"}
#: auxiliaries that, directly before `I`, make an inverted question (rule 4).
INVERSION_AUX = word_set(
    """
    am was wasn't wasnt were weren't do don't dont did didn't didnt have haven't had hadn't aren't can can't
    could couldn't will won't would wouldn't should shouldn't shall may might must
    """
)
#: adverbs that may sit between `I` and its verb (`I really feel`); skipped when looking for the verb.
ADVERBS = word_set(
    """
    really just still also always never often usually sometimes rarely seldom hardly barely only even actually
    finally truly honestly definitely certainly suddenly immediately then first once already ever almost nearly
    simply literally totally genuinely personally myself
    """
)
#: verbs ending in `-ly`; every other word of five or more letters ending in `-ly` counts as an adverb.
LY_VERBS = word_set("apply reply rely supply multiply imply comply ally bully rally tally sully")
#: modals and apostrophe-less negations: never take `-s` (`I can` -> `The person can`).
MODALS = word_set(
    "can could will would shall should may might must ought cannot cant wont didnt couldnt wouldnt shouldnt"
)
#: irregular past tenses: the narrative's past stays past (`I felt` -> `The person felt`).
IRREGULAR_PAST = word_set(
    """
    was were had did felt went got saw made came took gave found thought told said knew lost won left heard ran
    began became bought brought caught fell kept met paid sat sent spent stood understood wrote ate drove broke
    chose forgot held woke slept taught fought sold built meant led lent dealt drank swam sang rode flew grew threw
    drew wore tore hung spoke stole shook forgave hid bit struck dug laid lay sought wasnt werent hadnt mustnt
    """
)
#: forms that are both base and past; narratives are mostly past, so they stay (`I put` -> `The person put`).
AMBIGUOUS_PAST = word_set("put cut hit let set shut hurt cost quit read spread bet burst beat")
#: words that can follow a subject `I` without being its verb (`I and my sister`).
NOT_VERBS = word_set(
    "and or but nor too either alone who that which as than both all the a an to of in on at for with from"
)
#: every word after `I` that takes no `-s`.
PAST_OR_INVARIANT = MODALS | IRREGULAR_PAST | AMBIGUOUS_PAST | NOT_VERBS
#: base forms ending in `-ed` that are present tense (`I need` -> `The person needs`).
BASE_ED = word_set("need feed bleed breed speed succeed proceed exceed heed seed weed embed shred")
#: irregular third-person singular forms.
IRREGULAR_S = {"be": "is", "have": "has", "do": "does", "go": "goes"}
#: past participles that make `I'd` mean `I had` (with any `-ed` word and `better`).
PARTICIPLES = word_set(
    """
    been had done gone seen got gotten known taken given made lost won left forgotten heard thought told said
    found become come run begun broken chosen driven eaten fallen flown grown kept met paid put read sent spent
    stolen written better
    """
)
#: capitalised words after which `I` is a roman numeral (`World War I`, `Type I diabetes`).
ROMAN_BEFORE = word_set("War Type Part Chapter Phase Stage Grade Level Class Volume")
#: words after which `mine` is the noun (`a coal mine`), not the pronoun.
NOUN_MINE_BEFORE = word_set("a an the coal gold salt diamond copper tin iron land old abandoned")

_TOKEN = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*|\s+|.", re.DOTALL)
_QUOTED = re.compile(r'"[^"]*"|“[^”]*”')
_SENTENCE_START = re.compile(r"(?:^|[.!?…][\"”’')\]]*\s)[\s\"“‘'(\[]*$")
#: abbreviations whose period does not end a sentence (`i.e. I was` keeps a lowercase `they`).
_ABBREVIATION_END = re.compile(r"(?:^|[\s(])(?:i\.e|e\.g|cf|vs|Mr|Mrs|Ms|Dr|St)\.\s*$", re.IGNORECASE)


# ---------------------------------------------------------------- the rule-based rewrite: logic


@dataclass
class _Token:
    text: str
    start: int
    word: bool
    protected: bool


def _key(word: str) -> str:
    """Lowercase with a straight apostrophe: the form the tables are keyed by."""
    return word.replace("’", "'").lower()


def _with_apostrophe(template: str, original: str) -> str:
    """Use the curly apostrophe in a replacement when the original word used one."""
    return template.replace("'", "’") if "’" in original else template


def _capitalise(text: str) -> str:
    return text[:1].upper() + text[1:]


def _third_singular(verb: str) -> str:
    """`feel` -> `feels`, `go` -> `goes`, `try` -> `tries`, `play` -> `plays`, `watch` -> `watches`."""
    if verb in IRREGULAR_S:
        return IRREGULAR_S[verb]
    if re.search(r"[^aeiou]y$", verb):
        return verb[:-1] + "ies"
    if re.search(r"(?:s|sh|ch|x|z|o)$", verb):
        return verb + "es"
    return verb + "s"


def _takes_s(word: str) -> bool:
    """Whether a lowercase word after `I` is a present-tense verb that needs `-s` after `the person`."""
    if not (word.isalpha() and word.islower() and len(word) >= 2):
        return False
    if word in PAST_OR_INVARIANT or word.endswith("ing"):
        return False
    return not (word.endswith("ed") and word not in BASE_ED)


def _first_person(tokens: list[_Token], i: int, text: str) -> str | None:
    """The table key of a first-person word at token i, or None when it is not one (rules 1 and 7)."""
    tok = tokens[i]
    if not tok.word or tok.protected:
        return None
    word = tok.text
    if word in NO_APOSTROPHE:
        return NO_APOSTROPHE[word]
    key = _key(word)
    if key[:1] == "i" and key in LATER_MENTION and key != "i" and key[1:2] == "'":
        return key  # I'm, i’ve, I'D: any case, any apostrophe
    if word in ("I", "i"):
        following = text[tok.start + 1 : tok.start + 3]
        if word == "i" and re.match(r"\.\w", following):
            return None  # i.e.
        prev = _neighbour(tokens, i, -1)
        if word == "I" and prev is not None and tokens[prev].text in ROMAN_BEFORE:
            return None
        return "i"
    if word not in (key, _capitalise(key)):
        return None  # MY, US, ME: acronyms or shouting, not rewritten
    if key == "mine":
        prev = _neighbour(tokens, i, -1)
        if prev is not None and _key(tokens[prev].text) in NOUN_MINE_BEFORE:
            return None
    if key in PLURAL or key in LATER_MENTION:
        return key
    return None


def _neighbour(tokens: list[_Token], i: int, step: int) -> int | None:
    """Index of the adjacent word token across whitespace only; None across punctuation or quotes."""
    j = i + step
    while 0 <= j < len(tokens) and not tokens[j].word and tokens[j].text.isspace():
        j += step
    if 0 <= j < len(tokens) and tokens[j].word and not tokens[j].protected:
        return j
    return None


def _is_adverb(word: str) -> bool:
    """An adverb between a subject and its verb: listed in `ADVERBS`, or an `-ly` word (`sincerely`)."""
    key = _key(word)
    return key in ADVERBS or (key.endswith("ly") and len(key) >= 5 and key not in LY_VERBS)


def _verb_after(tokens: list[_Token], i: int) -> int | None:
    """Index of the word that agrees with the subject at token i, skipping adverbs."""
    j = _neighbour(tokens, i, 1)
    while j is not None and _is_adverb(tokens[j].text):
        j = _neighbour(tokens, j, 1)
    return j


def _agree(word: str, table: dict[str, str]) -> str | None:
    """A word's agreed form from an auxiliary table, keeping capitalisation and apostrophe style."""
    replacement = table.get(_key(word))
    if replacement is None:
        return None
    replacement = _with_apostrophe(replacement, word)
    return _capitalise(replacement) if word[:1].isupper() else replacement


def _resolve_id(tokens: list[_Token], i: int) -> str:
    """`I'd` as `had` before a participle or `better`, else `would` (rule 2)."""
    j = _verb_after(tokens, i)
    if j is not None:
        nxt = _key(tokens[j].text)
        if nxt in PARTICIPLES or (nxt.endswith("ed") and nxt not in BASE_ED):
            return "the person had"
    return "the person would"


def to_third_person(sentence: str) -> str:
    """Rewrite a first-person narrative in the third person by the rules in the module docstring.

    Deterministic and dependency-free, so the T2 text of a published build can be rebuilt
    and audited word by word.
    """
    if not sentence.strip():
        raise ValueError("cannot rewrite an empty narrative")
    protected = [False] * len(sentence)
    for match in _QUOTED.finditer(sentence):
        protected[match.start() : match.end()] = [True] * (match.end() - match.start())
    tokens = [
        _Token(m.group(0), m.start(), m.group(0)[0].isalpha(), protected[m.start()]) for m in _TOKEN.finditer(sentence)
    ]
    out = [t.text for t in tokens]
    introduced = False
    for i, tok in enumerate(tokens):
        key = _first_person(tokens, i, sentence)
        if key is None:
            continue
        prefix = sentence[: tok.start]
        at_start = bool(_SENTENCE_START.search(prefix)) and not _ABBREVIATION_END.search(prefix)
        if key in PLURAL:
            replacement = PLURAL[key]
            singular = None
        elif not introduced and key != "myself":
            introduced = True
            replacement = _resolve_id(tokens, i) if key == "i'd" else FIRST_MENTION[key]
            singular = True
        else:
            replacement = LATER_MENTION[key]
            singular = False
        replacement = _with_apostrophe(replacement, tok.text)
        if at_start or (key[:1] != "i" and tok.text[:1].isupper()):
            replacement = _capitalise(replacement)
        out[i] = replacement
        if key != "i" or singular is None:
            continue
        table = SINGULAR_AUX if singular else PLURAL_AUX
        prev = _neighbour(tokens, i, -1)
        if prev is not None and _key(tokens[prev].text) in INVERSION_AUX:
            agreed = _agree(tokens[prev].text, table)
            if agreed is not None:
                out[prev] = agreed
            continue
        j = _verb_after(tokens, i)
        if j is None:
            continue
        agreed = _agree(tokens[j].text, table)
        if agreed is not None:
            out[j] = agreed
        elif singular and _takes_s(tokens[j].text):
            out[j] = _third_singular(tokens[j].text)
    return "".join(out)
