"""Parsing generated answers (runners.scoring.parse) and generation-mode result rows."""

from __future__ import annotations

import json

import pytest

from runners.exchange import GenerateRequest, Generation, cut_at_stop
from runners.rows import generated_row
from runners.scoring.parse import parse_choice, parse_number, parse_text
from runners.scoring.settings import ScoringSettings


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5", (5, "ok")),
        (" 7 dollars.", (7, "ok")),
        ("He will pass $10 to the banker.", (10, "ok")),
        ("1,000", (1000, "out_of_range")),
        ("-3", (-3, "out_of_range")),
        ("nothing at all", (None, "no_number")),
        ("3.5", (3, "ok")),
        ("abc12", (None, "no_number")),
    ],
)
def test_parse_number(text: str, expected: tuple) -> None:
    assert parse_number(text, 0, 10) == expected


#: answer shapes and their readings: a restated scale is not the answer (the first integer alone read
#: "On a scale from 0 to 100, I would rate it 70." as 0)
ANSWER_SHAPES = [
    ("70", 0, 100, (70, "ok")),
    ("On a scale from 0 to 100, I would rate it 70.", 0, 100, (70, "ok")),
    ("On a scale of 0-100: 85", 0, 100, (85, "ok")),
    ("I would rate it 70 out of 100.", 0, 100, (70, "ok")),
    ("70/100", 0, 100, (70, "ok")),
    ("Intensity: 85 (0-100 scale)", 0, 100, (85, "ok")),
    ("Between 0 and 100: 42", 0, 100, (42, "ok")),
    ("0 to 100: 0", 0, 100, (0, "ok")),
    ("100.", 0, 100, (100, "ok")),
    ("0", 0, 100, (0, "ok")),
    ("On a scale of 0-10, I'd say 7.", 0, 10, (7, "ok")),
    ("I'd rate it a 7 on a scale of 1 to 10", 0, 10, (7, "ok")),
    ("7 out of 10", 0, 10, (7, "ok")),
    ("I would pass 10 out of 10 dollars", 0, 10, (10, "ok")),
    ("Between 60 and 70, so 65", 0, 100, (60, "ok")),  # not the item's scale: the first integer
    ("On a scale from 0 to 100, 150", 0, 100, (150, "out_of_range")),
    ("On a scale from 0 to 100, I cannot say.", 0, 100, (None, "no_number")),
    ("The person felt anger.", 0, 100, (None, "no_number")),
]


@pytest.mark.parametrize(("text", "lo", "hi", "expected"), ANSWER_SHAPES)
def test_parse_number_reads_the_answer_not_a_restated_scale(text: str, lo: int, hi: int, expected: tuple) -> None:
    assert parse_number(text, lo, hi) == expected


def test_generation_keys_name_the_parse_rule() -> None:
    """Rows parsed by an earlier rule are another key: a rerun parses again instead of reusing them."""
    from runners.scoring.parse import NUMBER_PARSER

    key = json.loads(ScoringSettings(mode="generate").key())
    assert key["number_parser"] == NUMBER_PARSER == 2
    assert "number_parser" not in json.loads(ScoringSettings().key())  # score-mode keys are unchanged


OPTIONS = ["She worked hard.", "She is gifted.", "The exam was easy.", "She was lucky."]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("B", (1, "ok")),
        (" (C) The exam", (2, "ok")),
        ("Answer: D", (3, "ok")),
        ("The answer is A.", (0, "ok")),
        ("A lot of luck: she was lucky.", (3, "ok")),  # the article "A" is not option A
        ("I think she worked hard", (0, "ok")),
        ("she worked hard and she is gifted", (None, "ambiguous")),
        ("I cannot answer that.", (None, "no_answer")),
    ],
)
def test_parse_choice(text: str, expected: tuple) -> None:
    assert parse_choice(text, list("ABCD"), OPTIONS) == expected


def test_cut_at_stop_keeps_the_first_stop_string() -> None:
    assert cut_at_stop('{"a": 1} and more}', ["}"]) == ('{"a": 1}', True)
    assert cut_at_stop("no stop", ["}"]) == ("no stop", False)
    assert cut_at_stop("x. y} z", ["}", "."]) == ("x.", True)


def test_generated_rows_record_text_value_status_and_refusal() -> None:
    request = GenerateRequest(context=(1, 2, 3))
    number = {"id": "n", "task": "number", "number_min": 0, "number_max": 10}
    row = generated_row(number, request, Generation("4 dollars", (9,), "stop"))
    assert (row["parsed_value"], row["parse_status"], row["refused"], row["context_tokens"]) == (4, "ok", False, 3)
    row = generated_row(number, request, Generation("I won't", (9,), "length"))
    assert (row["parsed_value"], row["parse_status"], row["refused"], row["finish_reason"]) == (
        None,
        "no_number",
        True,
        "length",
    )
    choice = {"id": "c", "task": "choice", "choices": OPTIONS, "choice_labels": list("ABCD")}
    row = generated_row(choice, request, Generation("C", (9,), "stop"))
    assert (row["chosen_index"], row["parsed_value"], row["choice_probs"]) == (2, 2, None)


def test_generation_settings_enter_the_key_only_in_generation_mode() -> None:
    assert ScoringSettings().key() == ScoringSettings(temperature=0.7, seed=3).key()
    assert "temperature" not in json.loads(ScoringSettings().key())
    greedy = ScoringSettings(mode="generate")
    assert greedy.key() != ScoringSettings(mode="generate", max_new_tokens=8).key()
    assert json.loads(greedy.key())["mode"] == "generate"
    with pytest.raises(ValueError, match="mode must be one of"):
        ScoringSettings(mode="sample")
    with pytest.raises(ValueError, match="top_p"):
        ScoringSettings(mode="generate", top_p=0.0)


@pytest.mark.parametrize(
    ("text", "stop", "finish", "want"),
    [
        ("The person was glad.}", ("}",), "stop", ("The person was glad.", "ok")),
        (" The person was glad.} Text: {more}", ("}",), "stop", ("The person was glad.", "ok")),
        ("The person was", ("}",), "length", ("The person was", "no_stop")),
        ("The person was", ("}",), "stop", ("The person was", "ok")),  # ended by end-of-sequence
        ("  }", ("}",), "stop", (None, "no_answer")),
        ("", (), "stop", (None, "no_answer")),
        ("free text, no stop asked", (), "length", ("free text, no stop asked", "ok")),
        ("a] b}", ("}", "]"), "stop", ("a", "ok")),  # the earliest stop string wins
    ],
)
def test_parse_text(text: str, stop: tuple[str, ...], finish: str, want: tuple) -> None:
    assert parse_text(text, stop, finish) == want


def test_text_items_are_generated_with_their_stop_strings() -> None:
    item = {"id": "t", "task": "text", "stop": ["}"], "prompt": "x"}
    request = GenerateRequest(context=(1, 2), max_tokens=4, stop=("}",))
    row = generated_row(item, request, Generation("The person ran.}", (5,), "stop"))
    assert (row["generated_text"], row["parse_status"], row["refused"], row["parsed_value"]) == (
        "The person ran.}",
        "ok",
        False,
        None,
    )
    row = generated_row(item, request, Generation("The person", (5,), "length"))
    assert (row["parse_status"], row["refused"]) == ("no_stop", True)
