"""Recipes declare their paper's scoring (`promptgen.protocols`): parsing, matching, the manifest round trip."""

from __future__ import annotations

import pytest

from promptgen.core.errors import RecipeError
from promptgen.protocols import Protocol, manifest_protocol, parse_protocols, protocols_by_config
from promptgen.recipe import list_recipes, load_recipe

ENTRY = {
    "configs": ["single_*", "pairs"],
    "name": "paper",
    "description": "how  the\npaper scored",
    "scoring": "sentence",
    "length_normalize": True,
    "chat": False,
}


def test_first_matching_rule_wins_and_unmatched_configs_have_none() -> None:
    rules = parse_protocols([ENTRY, {**ENTRY, "configs": ["*"], "name": "rest", "chat": True}], "r.yaml")
    got = protocols_by_config(rules, ["single_actor", "pairs", "templates"])
    assert {c: p.name for c, p in got.items()} == {"single_actor": "paper", "pairs": "paper", "templates": "rest"}
    only = protocols_by_config(rules[:1], ["single_actor", "templates"])
    assert list(only) == ["single_actor"]
    assert only["single_actor"].description == "how the paper scored"  # folded like YAML's `>`
    assert dict(only["single_actor"].scoring) == {"scoring": "sentence", "length_normalize": True}


def test_manifest_round_trip_keeps_every_field() -> None:
    (rule,) = parse_protocols([{**ENTRY, "where": {"variant": ["base", "inst"]}}], "r.yaml")
    manifest = {"protocols": {"single_actor": rule.protocol.as_manifest()}}
    back = manifest_protocol(manifest, "single_actor", "m.json")
    assert back == rule.protocol
    assert back.where == {"variant": ("base", "inst")}
    assert manifest_protocol(manifest, "templates", "m.json") is None
    assert manifest_protocol({}, "single_actor", "m.json") is None  # built before protocols


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"configs": []}, "protocols[0].configs must be a non-empty list"),
        ({"name": " "}, "protocols[0].name must be a non-empty string"),
        ({"scorng": "sentence"}, "unknown key(s) scorng"),
        ({"length_normalize": "yes"}, "length_normalize: 'yes' is not a bool"),
        ({"max_new_tokens": True}, "max_new_tokens: True is not a int"),
        ({"chat": "no"}, "chat must be true, false or null"),
        ({"where": {"variant": "base"}}, "where.variant must be a non-empty list of strings"),
    ],
)
def test_a_bad_entry_is_one_error_naming_the_recipe_entry_and_field(change: dict, message: str) -> None:
    with pytest.raises(RecipeError) as info:
        parse_protocols([{**ENTRY, **change}], "builders/x.yaml")
    assert str(info.value).startswith("builders/x.yaml: protocols[0]")
    assert message in str(info.value)


def test_a_malformed_manifest_entry_names_the_manifest() -> None:
    with pytest.raises(RecipeError, match=r"m.json: protocols.c.scoring: unknown scoring flag 'x'"):
        manifest_protocol({"protocols": {"c": {"scoring": {"x": 1}}}}, "c", "m.json")
    assert Protocol.from_manifest({"name": "n", "scoring": {}}, "w").chat is None


def test_every_recipe_declares_a_runnable_protocol_for_its_item_configs() -> None:
    """The values are the runners' to judge: each recipe's protocols must make valid settings."""
    from runners.scoring.settings import scoring_settings

    recipes = list_recipes()
    assert set(recipes) == {"talent-or-luck", "intergroup-empathy", "trust-game-names"}
    for name in recipes:
        recipe = load_recipe(name)
        assert recipe.protocols, name
        for rule in recipe.protocols:
            scoring_settings(**rule.protocol.scoring)  # raises on a value this version cannot run
