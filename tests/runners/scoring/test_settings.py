"""`resolve_scoring`: the dataset's protocol with the user's flags laid over it, and the summary's line."""

from __future__ import annotations

import pytest

from promptgen.core.errors import ProbeError
from promptgen.protocols import Protocol
from runners.scoring.settings import ScoringSettings, resolve_scoring, scoring_settings

PAPER = Protocol("release", "why", {"scoring": "sentence", "length_normalize": True}, chat=False)
EMPATHY = Protocol("gen", "why", {"scoring": "generate", "temperature": 0, "max_new_tokens": 16}, chat=True)
GAMES = Protocol("games", "why", {"scoring": "sentence"}, chat=False, where={"variant": ("base", "inst")})


def test_no_flags_is_the_papers_protocol() -> None:
    got = resolve_scoring(PAPER, None, None)
    assert got.settings == ScoringSettings(choice_mode="sentence", length_normalize=True)
    assert got.chat is False and got.where is None
    assert got.label == "protocol: release (the paper's)"
    gen = resolve_scoring(EMPATHY, None, None)
    assert gen.settings == ScoringSettings(mode="generate", temperature=0.0, max_new_tokens=16)
    assert gen.chat is True
    # the YAML's `temperature: 0` and the flag's 0.0 make one result key
    assert gen.settings.key() == resolve_scoring(EMPATHY, {"temperature": 0.0}, None).settings.key()
    assert resolve_scoring(GAMES, None, None).where == {"variant": ("base", "inst")}


def test_each_flag_given_replaces_only_its_part_and_is_named() -> None:
    got = resolve_scoring(PAPER, {"length_normalize": False}, None)
    assert got.settings == ScoringSettings(length_normalize=False) and got.chat is False
    assert got.label == "protocol: custom (differs from the paper's release in length_normalize)"
    chat = resolve_scoring(PAPER, None, True)
    assert chat.settings == ScoringSettings(length_normalize=True) and chat.chat is True
    assert chat.label.endswith("in chat)")
    rows = resolve_scoring(GAMES, None, True, {"variant": ["chat"]})
    assert rows.where == {"variant": ("chat",)} and rows.label.endswith("in chat, where)")
    # flags that change nothing leave the protocol the paper's
    assert resolve_scoring(PAPER, {"scoring": "sentence"}, False).label == "protocol: release (the paper's)"


def test_complete_settings_are_used_as_given() -> None:
    letter = scoring_settings("letter")
    got = resolve_scoring(PAPER, letter, None)
    assert got.settings is letter and got.chat is False
    assert "choice_mode" in got.label and "length_normalize" in got.label


def test_without_a_protocol_the_project_defaults_apply() -> None:
    got = resolve_scoring(None, None, None)
    assert got.settings == ScoringSettings() and got.chat is None and got.where is None
    assert "none declared" in got.label
    assert resolve_scoring(None, {"scoring": "generate"}, None).settings.mode == "generate"


def test_bad_values_are_one_line() -> None:
    with pytest.raises(ProbeError, match="--top-p must be above 0"):
        resolve_scoring(PAPER, {"top_p": 0.0}, None)
    odd = Protocol("future", "why", {"scoring": "telepathy"})
    with pytest.raises(ProbeError, match="protocol 'future' is not one this version can run"):
        resolve_scoring(odd, None, None)


def test_flags_that_do_not_apply_to_a_configs_items_are_ignored_alike() -> None:
    """`--number-tolerance` on a choice config made a new key labelled custom, while `--temperature` in score mode
    was ignored: one rule now, a setting that cannot change the config's scores is the protocol's, with the
    paper's key and label, and the label names the flags it ignored."""
    paper = resolve_scoring(PAPER, None, None, tasks=["choice"])
    for given, flag in (({"number_tolerance": 0.01}, "--number-tolerance"), ({"temperature": 0.5}, "--temperature")):
        got = resolve_scoring(PAPER, given, None, tasks=["choice"])
        assert got.settings == paper.settings and got.settings.key() == paper.settings.key()
        assert got.label == f"protocol: release (the paper's); {flag} ignored: not used by this config's items"
    # the same number flag where there are number items is a custom run, and enters the key
    numbers = resolve_scoring(PAPER, {"number_tolerance": 0.01}, None, tasks=["choice", "number"])
    assert numbers.settings.number_tolerance == 0.01 and "custom" in numbers.label
    assert numbers.settings.key() != paper.settings.key()
    # choice flags on a number config are ignored the same way
    gen = resolve_scoring(GAMES, {"length_normalize": True}, None, tasks=["number"])
    assert gen.settings == resolve_scoring(GAMES, None, None).settings and "--length-normalize ignored" in gen.label
    # without the config's tasks (a caller that does not know them) nothing is ignored, as before
    assert "custom" in resolve_scoring(PAPER, {"number_tolerance": 0.01}, None).label
