import hashlib

import pytest
import yaml

from promptgen.attribution.params import parse_params
from promptgen.core.errors import RecipeError
from promptgen.recipe import find_recipe, list_recipes, load_recipe, parse_recipe
from release_fixture import REPO


def _raw():
    return yaml.safe_load((REPO / "builders" / "talent_or_luck.yaml").read_text())


def test_real_recipe_loads_with_its_file_hash():
    recipe = load_recipe("talent-or-luck")
    assert recipe.name == "talent-or-luck" and recipe.version == "1.2.1"
    assert recipe.sha256 == hashlib.sha256((REPO / "builders" / "talent_or_luck.yaml").read_bytes()).hexdigest()
    assert len(recipe.sources) == 10
    assert all(s.sha256 and s.url.startswith("https://") and s.license for s in recipe.sources)
    assert "talent-or-luck" in list_recipes()
    params = parse_params(recipe.parameters)
    assert params.names_per_group == 5


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.update(colour="red"), "unknown key"),
        (lambda r: r.update(version="1.0"), "not semantic"),
        (lambda r: r["sources"][0].update(sha256="abc"), "64 lowercase hex"),
        (lambda r: r["sources"][0].update(mirror="x"), "unknown key"),
        (lambda r: r["sources"][1].update(id=r["sources"][0]["id"]), "duplicate source id"),
        (lambda r: r.pop("sources"), "missing key"),
    ],
)
def test_malformed_recipes_are_errors(tmp_path, mutate, message):
    raw = _raw()
    mutate(raw)
    with pytest.raises(RecipeError, match=message) as info:
        parse_recipe(raw, path=tmp_path / "r.yaml", sha256="0" * 64)
    assert "r.yaml" in str(info.value)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda p: p.update(seeed=1), "unknown key"),
        (lambda p: p.update(option_order="random"), "option_order"),
        (lambda p: p["actor_actor"].update(gender_pairs=["female-robot"]), "female-robot"),
        (lambda p: p["actor_actor"]["target_cue"].update(success="succeeded because"), "{T}"),
        (lambda p: p["actor_observer"].update(conditions=["nothing"]), "subset"),
        (lambda p: p["actor_actor"].update(outcome_configs=["both_success", "both_success"]), "appears twice"),
        (lambda p: p.update(names_per_group="5"), "integer"),
    ],
)
def test_bad_parameters_are_errors(mutate, message):
    params = _raw()["parameters"]
    mutate(params)
    with pytest.raises(RecipeError, match=message):
        parse_params(params)


def test_unknown_recipe_name_lists_known_ones():
    with pytest.raises(RecipeError, match="talent-or-luck"):
        find_recipe("no-such-dataset")


def test_probes_builders_and_cards_are_searched_before_the_project_s_own(tmp_path, monkeypatch):
    from promptgen.hub.cards import card_environment

    mine = tmp_path / "builders"
    mine.mkdir()
    own = yaml.safe_load((REPO / "builders" / "trust_game.yaml").read_text())
    (mine / "trust_game.yaml").write_text(yaml.safe_dump({**own, "version": "9.9.9"}))  # a fork's version wins
    (mine / "extra.yaml").write_text(yaml.safe_dump({**own, "name": "extra-probe"}))
    cards = tmp_path / "cards"
    cards.mkdir()
    (cards / "results.md.j2").write_text("mine")
    monkeypatch.setenv("PROBES_BUILDERS", str(mine))
    monkeypatch.setenv("PROBES_CARDS", str(cards))
    recipes = list_recipes()
    assert recipes["trust-game-names"] == mine / "trust_game.yaml" and recipes["extra-probe"] == mine / "extra.yaml"
    assert recipes["talent-or-luck"] == REPO / "builders" / "talent_or_luck.yaml"  # the project's own stay found
    assert find_recipe("trust-game") == mine / "trust_game.yaml" and find_recipe("extra-probe") == mine / "extra.yaml"
    assert load_recipe("talent-or-luck").version == load_recipe(str(REPO / "builders" / "talent_or_luck.yaml")).version
    env = card_environment()
    assert env.get_template("results.md.j2").render() == "mine"
    assert "{{" in env.loader.get_source(env, "talent_or_luck.md.j2")[0]  # the project's card is still there
