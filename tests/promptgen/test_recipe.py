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
