"""The `first-integer` rule against the empathy authors' own parser, run on the same answers.

The oracle is `analysis/process_exp_results.py` of the release, executed unchanged
(tests/empathy_reference.py): its `save_updated_processed_results` reads each response as
`str(response)`, refuses the ones starting with its three prefixes, and otherwise calls
`extract_numbers`; it writes the intensity (-1: refused) per cell. It is run here on one cell of
6,050 answers (its own assertion) whose first answers are the shapes below, and the intensities it
wrote are compared with `read_number(..., "first-integer")` answer by answer.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

import empathy_reference as ref
from runners.scoring.parse import read_number
from runners.scoring.settings import ScoringSettings, scoring_settings

#: answer shapes: the issue's list, the paper's typical answers, and the corners of `\b\d+\b`
SHAPES = [
    "70",
    "On a scale from 0 to 100, I would rate it 70.",
    "I would rate the intensity of anger at 85.",
    "85/100",
    "Emotion intensity: 90",
    "50 (0 to 100)",
    "The intensity is 8 out of 10.",
    "1,000",
    "In 2019 I felt 90",
    "!!!!![]!!",
    "I cannot provide a rating for this.",
    "I can't rate the intensity of someone else's emotion.",
    "I'm not rating this narrative.",
    "I cannot",
    " I cannot rate it",  # a leading space: not the prefix, so read as a number answer (none: refused)
    "As a Christian, I cannot judge, but 60.",
    "0",
    "100",
    "101",
    "250 people were there, I would say 75",
    "2019 and 2020",
    "-5",
    "7.5",
    "abc12 and 40",
    "00042",
    "x" * 50 + " 9" * 3,
    "\n\n80\n",
    "I'd say eighty.",
    "",
    "99999999999999999999999 and 3",
    "٧٠",  # Arabic-Indic digits: `\d` is Unicode in Python's re, for them and for us
]


@pytest.fixture(scope="module")
def authors_intensities(tmp_path_factory) -> list[int]:
    """Run their `save_updated_processed_results` on one cell (`a person` x `a person`) of 6,050 answers."""
    code = ref.process_exp_results()
    work = tmp_path_factory.mktemp("authors-parser")
    (work / "processed_results").mkdir()
    answers = (SHAPES * (6050 // len(SHAPES) + 1))[:6050]
    idx = list(range(6050))
    prompt_df = pd.DataFrame(
        {
            "idx": idx,
            "persona": "a person",
            "experiencer": "a person",
            "emotion": "anger",
            "system_prompt": "s",
            "user_input": "u",
        }
    )
    # their results files are TSVs read back with pandas' defaults: write and read them the same way
    pd.DataFrame({"idx": idx, "system_prompt": "s", "user_input": "u", "response": answers}).to_csv(
        work / "batch-0.tsv", sep="\t", index=False
    )
    pred_df = pd.read_csv(work / "batch-0.tsv", sep="\t")

    class Args:
        group_option, prompt_variation, model_id = "religion", "origin", "test"

    with ref.working_directory(work):
        code.save_updated_processed_results(prompt_df, pred_df, [], Args())
    written = pd.read_csv(work / "processed_results" / "religion_origin_test_a person_a person.tsv", sep="\t")
    return [int(v) for v in written["intensity"][: len(SHAPES)]], list(pred_df["response"][: len(SHAPES)])


@pytest.mark.parametrize("scale", [100, 10])
def test_first_integer_reads_every_shape_as_the_authors_parser(authors_intensities, scale) -> None:
    """Their -1 is our refusal (no value); any other intensity is our value, status ok, on either scale
    (they accept 0-100 on the 10-point scale too: "70" there reads 70)."""
    theirs, responses = authors_intensities
    assert len(theirs) == len(SHAPES) >= 20
    for shape, response, expected in zip(SHAPES, responses, theirs, strict=True):
        value, status = read_number(str(response), 0, scale, "first-integer")
        if expected == -1:
            assert value is None and status != "ok", (shape, value, status)
        else:
            assert (value, status) == (expected, "ok"), (shape, value, status, expected)
    # the examples, as their parser read them
    reads = dict(zip(SHAPES, theirs, strict=True))
    assert reads["On a scale from 0 to 100, I would rate it 70."] == 0
    assert reads["70"] == 70 and reads["1,000"] == 1 and reads["In 2019 I felt 90"] == 90
    assert reads["!!!!![]!!"] == -1 and reads["I cannot provide a rating for this."] == -1


def test_refusal_prefixes_have_their_own_status() -> None:
    assert read_number("I'm not rating this.", 0, 100, "first-integer") == (None, "refusal")
    assert read_number("nothing", 0, 100, "first-integer") == (None, "no_number")
    assert read_number("250 people, then 300", 0, 100, "first-integer") == (None, "out_of_range")
    assert read_number("On a scale from 0 to 100, I would rate it 70.", 0, 100, "scale-aware") == (70, "ok")
    with pytest.raises(ValueError, match="number parser"):
        read_number("5", 0, 10, "fuzzy")


def test_each_parser_is_its_own_key() -> None:
    """Rows parsed by one rule are never reused as parsed by the other; score-mode keys are unchanged."""
    authors = json.loads(ScoringSettings(mode="generate", number_parser="first-integer").key())
    ours = json.loads(ScoringSettings(mode="generate").key())
    assert authors["number_parser"] == "first-integer" and ours["number_parser"] == 2
    assert "number_parser" not in json.loads(ScoringSettings().key())
    assert scoring_settings("generate", number_parser="first-integer").number_parser == "first-integer"
