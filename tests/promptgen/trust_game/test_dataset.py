"""The `trust-game-names` dataset: recipe, paper pairs, race probe, and the build from the shared sources."""

from __future__ import annotations

import copy
import hashlib
import json
import re

import pandas as pd
import pytest
import yaml

from promptgen.build import build
from promptgen.core.errors import RecipeError, SourceFormatError
from promptgen.recipe import find_recipe, load_recipe
from promptgen.trust_game.census import (
    RACES,
    SHARE_COLUMNS,
    compute_lists,
    impute_suppressed,
    load_census,
    race_given_name,
)
from promptgen.trust_game.paper_pairs import parse_paper_pairs
from promptgen.trust_game.params import parse_params
from promptgen.trust_game.race_probe import RACE_PROBE_FEATURES, RaceProbeParams, race_probe_rows
from release_fixture import REPO, load_config

MODELS = ("Llama2-13B", "Mistral-7B", "Phi-2")
CONFIGS = [
    "bayesian_ranking",
    "threshold_ranking",
    "seed_list",
    "pairs_paper",
    "race_probe",
    "games_paper_llama2_13b",
    "games_paper_mistral_7b",
    "games_paper_phi_2",
    "probing",
]
# DESIGN section 5 step 7, typed out independently of the module's constants: the base variant's `\n`
# marks read as the game prompt reads them (each one an empty line: the mark plus the line's own break),
# and the Black category in the paper's words
BASE = "### True or False:\n\n1. {title} {surname} is {race}.\n\n### Answer:\n\n\n"
PHI = "Exercise 1:\nTrue or False: {title} {surname} is {race}.\nAnswer:"
WORDS = {"Black": "African American"}


def _raw_params():
    return yaml.safe_load((REPO / "builders" / "trust_game.yaml").read_text())["parameters"]


def _pairs_json(shared_sources):
    return json.loads((shared_sources / "trust-game/paper_pairs.json").read_text())


# ----------------------------------------------------------------------------- recipe


def test_recipe_is_found_by_both_names_and_pins_the_shared_sources(shared_sources):
    assert find_recipe("trust-game") == find_recipe("trust-game-names") == REPO / "builders" / "trust_game.yaml"
    recipe = load_recipe("trust-game")
    assert (recipe.name, recipe.version, recipe.builder) == ("trust-game-names", "1.3.0", "trust_game")
    for source, folder in (("census", "census-surnames"), ("paper_pairs", "trust-game")):
        spec = recipe.source(source)
        pinned = re.findall(r"sha256 ([0-9a-f]{64})", (shared_sources / folder / "SOURCE.md").read_text())
        assert pinned == [spec.sha256]
        assert hashlib.sha256((shared_sources / spec.path).read_bytes()).hexdigest() == spec.sha256


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda p: p.update(seed=1), "unknown key"),
        (lambda p: p["census"].update(threshold=1.5), r"\(0, 1\]"),
        (lambda p: p["census"].update(bayesian_top=0), "positive"),
        (lambda p: p["census"].update(threshold_basis="raw"), "threshold_basis"),
        (lambda p: p["census"].update(threshold_excludes_bayesian="no"), "bool"),
        (lambda p: p["census"].pop("threshold_top"), "missing key"),
        (lambda p: p["race_probe"].update(titles=["Dr."]), "titles"),
        (lambda p: p["race_probe"].update(variants=["base", "base"]), "distinct"),
        (lambda p: p["paper_pairs"].update(models=[]), "models"),
    ],
)
def test_bad_parameters_are_errors(mutate, message):
    params = _raw_params()
    mutate(params)
    with pytest.raises(RecipeError, match=message):
        parse_params(params)


def test_full_is_refused(shared_sources, tmp_path):
    with pytest.raises(RecipeError, match="no full variant"):
        build("trust-game", out_dir=tmp_path, sources=shared_sources, full=True)


# ----------------------------------------------------------------------------- paper pairs


def test_paper_pairs_flatten_in_file_order(shared_sources):
    data = _pairs_json(shared_sources)
    pairs = parse_paper_pairs(data, file="p.json", models=MODELS, per_gender=17)
    assert len(pairs) == 3 * 5 * 34
    assert {p.race for p in pairs} == set(RACES)
    assert {p.race for p in pairs if p.race_key == "Native"} == {"Native American"}
    for p in pairs:
        assert p.title == {"male": "Mr.", "female": "Ms."}[p.gender]
    # the i-th pair of a gender is the i-th entry of that gender in the file
    for model in MODELS:
        for key, entries in data["pairs"][model].items():
            for code, gender in (("M", "male"), ("F", "female")):
                expected = [e["surname"] for e in entries if e["gender"] == code]
                got = sorted(
                    (p.index, p.surname) for p in pairs if (p.model, p.race_key, p.gender) == (model, key, gender)
                )
                assert got == list(enumerate(expected, start=1))


@pytest.mark.parametrize(
    ("mutate", "where", "problem"),
    [
        (
            lambda d: d["pairs"]["Phi-2"].update(Martian=d["pairs"]["Phi-2"].pop("Asian")),
            "pairs.Phi-2.Martian",
            "unknown race key",
        ),
        (lambda d: d["races"].update(Native="Indigenous"), "races.Native", "unknown race 'Indigenous'"),
        (lambda d: d["pairs"]["Mistral-7B"]["White"].pop(0), "pairs.Mistral-7B.White", "found 16 male, 17 female"),
        (lambda d: d["pairs"]["Phi-2"]["Black"][3].update(gender="X"), "pairs.Phi-2.Black[3].gender", "unknown gender"),
        (
            lambda d: d["pairs"]["Phi-2"]["Black"][3].update(surname=d["pairs"]["Phi-2"]["Black"][2]["surname"]),
            "pairs.Phi-2.Black[3]",
            "appears twice",
        ),
        (lambda d: d["pairs"].pop("Phi-2"), "pairs", "differ from the recipe"),
        (lambda d: d["pairs"]["Llama2-13B"].pop("Hispanic"), "pairs.Llama2-13B", "missing"),
        (lambda d: d.pop("races"), "top level", "'races'"),
    ],
)
def test_broken_paper_pairs_are_clear_errors(shared_sources, mutate, where, problem):
    data = copy.deepcopy(_pairs_json(shared_sources))
    mutate(data)
    with pytest.raises(SourceFormatError) as info:
        parse_paper_pairs(data, file="trust-game/paper_pairs.json", models=MODELS, per_gender=17)
    assert info.value.file == "trust-game/paper_pairs.json"
    assert info.value.where == where
    assert problem in info.value.problem


def test_paper_surnames_are_all_seeded_under_the_census_threshold_reading(shared_sources):
    """Evidence for the threshold reading: only Census percentages + exclusion cover every published surname."""
    census = load_census(shared_sources / "census-surnames/census_2010.parquet")
    shares = race_given_name(impute_suppressed(census))
    data = _pairs_json(shared_sources)
    published = {(data["races"][k], e["surname"]) for m in data["pairs"].values() for k, es in m.items() for e in es}
    missing = {}
    for basis in ("renormalised", "census"):
        for exclude in (False, True):
            *_, seed = compute_lists(
                shares,
                bayesian_top=300,
                threshold=0.9,
                threshold_top=100,
                threshold_basis=basis,
                threshold_excludes_bayesian=exclude,
            )
            missing[basis, exclude] = published - set(zip(seed["race"], seed["surname"], strict=True))
    assert len(published) == 273
    assert {k: len(v) for k, v in missing.items()} == {
        ("renormalised", False): 16,
        ("renormalised", True): 9,
        ("census", False): 1,
        ("census", True): 0,
    }
    assert missing["census", False] == {("Native American", "Littlewhiteman")}


# ----------------------------------------------------------------------------- race probe


def test_race_probe_rows_render_the_published_prompts():
    import pandas as pd

    seed = pd.DataFrame({"race": ["Asian", "White", "Native American"], "surname": ["Nguyen", "Howe", "Howe"]})
    rows = list(race_probe_rows(seed, RaceProbeParams(titles=("Mr.", "Ms."), variants=("base", "phi"))))
    assert len(rows) == 2 * 2 * 3 * 5
    assert len({r["id"] for r in rows}) == len(rows)
    assert set(rows[0]) == set(RACE_PROBE_FEATURES)
    for r in rows:
        template, choices = (BASE, ["True", "False"]) if r["variant"] == "base" else (PHI, [" True", " False"])
        assert r["prompt"] == template.format(
            title=r["title"], surname=r["surname"], race=WORDS.get(r["race"], r["race"])
        )
        assert r["choices"] == choices
        assert r["choice_types"] == ["True", "False"] and r["choice_labels"] == ["T", "F"]
        assert r["messages"] == [{"role": "user", "content": r["prompt"]}]
        assert (r["probe"], r["task"], r["number_min"], r["number_max"]) == ("race_probe", "choice", None, None)
        assert r["gender"] == {"Mr.": "male", "Ms.": "female"}[r["title"]]
    first = rows[0]
    assert first["prompt"] == "### True or False:\n\n1. Mr. Nguyen is Asian.\n\n### Answer:\n\n\n"
    # the paper's example box, "Mr. Johnson" / "African American", under the game prompt's reading of `\n`
    from promptgen.trust_game.games import ANSWER_HEADER
    from promptgen.trust_game.race_probe import render_race_probe

    box = render_race_probe("base", "Mr.", "Johnson", "Black")
    assert box == "### True or False:\n\n1. Mr. Johnson is African American.\n\n### Answer:\n\n\n"
    assert ANSWER_HEADER.endswith(":\n\n")  # the game prompt: a printed `Answer:\n` is the mark plus the line break
    assert first["id"] == "race_probe/base/mr/asian/nguyen/asian"
    # a surname seeded under two races gets the same prompts under two ids
    howe = [r for r in rows if r["surname"] == "Howe" and r["variant"] == "phi" and r["title"] == "Ms."]
    assert len(howe) == 10 and len({r["prompt"] for r in howe}) == 5
    assert "race_probe/phi/ms/native_american/howe/white" in {r["id"] for r in howe}
    assert any(r["prompt"] == "Exercise 1:\nTrue or False: Ms. Howe is White.\nAnswer:" for r in howe)


# ----------------------------------------------------------------------------- the build


@pytest.fixture(scope="module")
def built(shared_sources, tmp_path_factory):
    out = tmp_path_factory.mktemp("tg")
    return build("trust-game", out_dir=out, sources=shared_sources).path


def test_every_config_loads_with_declared_features(built):
    manifest = json.loads((built / "build_manifest.json").read_text())
    assert sorted(manifest["rows"]) == sorted(CONFIGS)
    seeds = manifest["rows"]["seed_list"]
    assert manifest["rows"] == {
        "bayesian_ranking": 1500,
        "threshold_ranking": 500,
        "seed_list": seeds,
        "pairs_paper": 510,
        "race_probe": 2 * 2 * seeds * 5,
        # 2 investor groups x 10 trustee groups x 272 games x 3 variants; probing: 20 games x 11 amounts x 3 x 3
        "games_paper_llama2_13b": 2 * 10 * 272 * 3,
        "games_paper_mistral_7b": 2 * 10 * 272 * 3,
        "games_paper_phi_2": 2 * 10 * 272 * 3,
        "probing": 20 * 11 * 3 * 3,
    }
    for config in CONFIGS:
        ds = load_config(built, config)
        assert len(ds) == manifest["rows"][config]
    lists = load_config(built, "bayesian_ranking")
    assert lists.features["rank"].dtype == "int32" and lists.features["posterior"].dtype == "float64"
    assert list(lists.features) == ["race", "rank", "surname", "count", *SHARE_COLUMNS.values(), "posterior"]


def test_lists_and_pairs_in_the_build(built, shared_sources):
    bayes = load_config(built, "bayesian_ranking").to_pandas()
    first = bayes[bayes["rank"] == 1].set_index("race")[["surname", "count"]].to_dict("index")
    assert first == {
        "Asian": {"surname": "Nguyen", "count": 437_645},
        "Black": {"surname": "Williams", "count": 1_625_252},
        "Hispanic": {"surname": "Garcia", "count": 1_166_120},
        "Native American": {"surname": "Begay", "count": 17_553},
        "White": {"surname": "Miller", "count": 1_161_437},
    }
    seed = load_config(built, "seed_list").to_pandas()
    # the default reading (the paper's: Census shares, the threshold list taken among surnames not already in
    # the bayesian list): Nguyen is the top bayesian Asian name, so the threshold list holds 100 others per race
    top = seed[seed["surname"] == "Nguyen"].iloc[0]
    assert list(top["methods"]) == ["bayesian"] and top["bayesian_rank"] == 1 and pd.isna(top["threshold_rank"])
    only = seed[seed["methods"].map(lambda m: list(m) == ["threshold"])]
    assert len(only) == 500 and only["bayesian_rank"].isna().all() and only["threshold_rank"].notna().all()
    assert len(seed) == 1500 + 500

    pairs = load_config(built, "pairs_paper").to_pandas()
    data = _pairs_json(shared_sources)
    from_json = sorted(
        (model, data["races"][key], {"M": "Mr.", "F": "Ms."}[e["gender"]], e["surname"])
        for model, by_race in data["pairs"].items()
        for key, entries in by_race.items()
        for e in entries
    )
    assert sorted(map(tuple, pairs[["model", "race", "title", "surname"]].values.tolist())) == from_json
    assert set(pairs.groupby(["model", "race", "gender"])["index"].apply(sorted).map(tuple)) == {tuple(range(1, 18))}
    seeded = set(zip(seed["race"], seed["surname"], strict=True))
    assert pairs["in_seed_list"].tolist() == [
        (r, s) in seeded for r, s in zip(pairs["race"], pairs["surname"], strict=True)
    ]


def test_the_default_seed_list_holds_every_published_pair(built, shared_sources):
    """The paper's reading is the default: every (race, surname) of its published pairs is in the built seed list,
    so `curate-pairs` can retrace its curation (DESIGN's literal reading leaves 16 out)."""
    data = _pairs_json(shared_sources)
    published = {(data["races"][k], e["surname"]) for m in data["pairs"].values() for k, es in m.items() for e in es}
    seed = load_config(built, "seed_list").to_pandas()
    assert len(published) == 273
    assert published <= set(zip(seed["race"], seed["surname"], strict=True))


def test_race_probe_config(built):
    probe = load_config(built, "race_probe").to_pandas()
    seed = load_config(built, "seed_list").to_pandas()
    assert probe["id"].is_unique
    keys = probe.groupby(["variant", "title", "seed_race"])["surname"].nunique().to_dict()
    sizes = seed.groupby("race").size().to_dict()
    assert keys == {(v, t, r): sizes[r] for v in ("base", "phi") for t in ("Mr.", "Ms.") for r in RACES}
    sample = probe.sample(200, random_state=0)
    for r in sample.itertuples():
        template = BASE if r.variant == "base" else PHI
        assert r.prompt == template.format(title=r.title, surname=r.surname, race=WORDS.get(r.race, r.race))
        assert list(r.messages) == [{"role": "user", "content": r.prompt}]


def test_second_build_is_byte_identical_and_card_is_complete(built, shared_sources, tmp_path):
    again = build("trust-game-names", out_dir=tmp_path, sources=shared_sources).path
    files = sorted(p.relative_to(built) for p in built.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    for rel in files:
        assert (built / rel).read_bytes() == (again / rel).read_bytes(), rel
    card = (built / "README.md").read_text()
    header = yaml.safe_load(card.split("---\n")[1])
    assert [c["config_name"] for c in header["configs"]] == CONFIGS
    manifest = json.loads((built / "build_manifest.json").read_text())
    assert manifest["fingerprint"] in card
    for text in (
        "Nguyen (437,645)",
        "Williams (1,625,252)",
        "Garcia (1,166,120)",
        "Begay (17,553)",
        "Miller (1,161,437)",
    ):
        assert text in card
    assert "| no |" not in card and "**no**" not in card
    assert '"### True or False:\\n\\n1. Ms. Begay is Native American.\\n\\n### Answer:\\n\\n\\n"' in card
    assert "{{" not in card and "{%" not in card
    assert all(v["match"] for v in manifest["build_report"]["table1_first"].values())
