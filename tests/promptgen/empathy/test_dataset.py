"""The intergroup-empathy dataset on a small fixture in the release's format (plus the optional corpus).

The release itself, against the authors' own code, is tests/promptgen/empathy/test_release_prompts.py.
"""

import json

import pytest

from envent_fixture import EMOTIONS, HEADER, corpus_rows, release_order, release_rows, write_recipe, write_sources
from promptgen.build import build
from promptgen.core.errors import RecipeError, SourceFormatError
from promptgen.empathy.prompts import expand_prompts
from promptgen.empathy.release import RELEASE_T2_METHOD
from promptgen.empathy.synthetic import release_file
from promptgen.sources import SourceOptions
from release_fixture import load_config

# the matrices' (notebook's) order, `a person` first; the prompts' own order is the authors' (test_release_prompts.py)
RACE = [
    "a person",
    "a white person",
    "a White person",
    "a Caucasian",
    "a White American",
    "a European American",
    "a black person",
    "a Black person",
    "an African American",
    "a Black American",
    "an Asian person",
    "an Asian American",
    "an Asian",
    "a Hispanic person",
    "a Hispanic American",
    "a Latino American",
    "a Latino",
    "a Latina",
    "a Latinx",
]
COUNTRIES = [
    "the United States",
    "Canada",
    "the United Kingdom",
    "Germany",
    "France",
    "China",
    "Japan",
    "India",
    "Myanmar",
    "Israel",
    "Russia",
    "Ukraine",
    "the Philippines",
    "Argentina",
    "Brazil",
    "Mexico",
    "Iran",
    "Palestine",
    "Nigeria",
    "Egypt",
    "Pakistan",
]
NATIONALITY = ["a person"] + [f"a person from {c}" for c in COUNTRIES]
RELIGION = ["a person", "a Christian", "a Muslim", "a Jew", "a Buddhist", "a Hindu"]
SETTINGS = ["P0S0T0", "P1S0T0", "P2S0T0", "P3S0T0", "P0S1T0", "P0S0T1", "P0S0T2"]


@pytest.fixture(scope="module")
def subset(tmp_path_factory):
    root = tmp_path_factory.mktemp("emp")
    sources = write_sources(root / "src")
    recipe = write_recipe(root / "r.yaml")
    return build(str(recipe), out_dir=root / "out", sources=sources, max_events=24).path


def test_events_are_the_release_rows_in_its_order_with_the_corpus_extra(tmp_path):
    sources = write_sources(tmp_path / "src")
    path = build(str(write_recipe(tmp_path / "r.yaml")), out_dir=tmp_path / "o", sources=sources).path
    events = load_config(path, "events").to_pandas()
    assert list(events["text_id"]) == release_order()
    assert list(events["authors_position"]) == list(range(len(events)))
    assert set(events["emotion"]) == set(EMOTIONS)
    rows = {r[1]: r for emotion_rows in release_rows().values() for r in emotion_rows}
    for event in events.itertuples():
        _, _, t0, t1, t2 = rows[event.text_id]
        assert (event.narrative_t0, event.narrative_t1, event.narrative_t2) == (t0, t1, t2)
    assert (events["t2_method"] == RELEASE_T2_METHOD).all()
    tab = events[events["narrative_t0"].str.contains("It was sudden")].iloc[0]
    assert "\t" in tab["narrative_t0"]  # the release's text as pandas reads it, nothing normalised
    corpus = {r[0]: r for r in corpus_rows()}  # the optional extra joins by text_id
    assert [int(v) for v in events["intensity"]] == [int(corpus[t][4]) for t in events["text_id"]]
    assert list(events["hidden_emo_text"]) == [corpus[t][3] for t in events["text_id"]]
    manifest = json.loads((path / "build_manifest.json").read_text())
    # a fixture is not the published release: the build says how it differs
    assert any("expected 6050" in d for d in manifest["build_report"]["corpus_deviations"])
    assert manifest["build_report"]["corpus_extra"] and manifest["build_report"]["corpus_matched"] == len(events)
    card = (path / "README.md").read_text()
    assert "houyu0930/intergroup-empathy-bias" in card and "country_list1" in card


def test_without_the_corpus_the_build_has_no_ratings_and_rules_t2_is_an_option(tmp_path):
    sources = write_sources(tmp_path / "src", corpus=False)
    path = build(str(write_recipe(tmp_path / "r.yaml", t2="rules")), out_dir=tmp_path / "o", sources=sources).path
    events = load_config(path, "events").to_pandas()
    assert events["intensity"].isna().all() and events["hidden_emo_text"].isna().all()
    assert (events["t2_method"] == "rules").all()
    first = events.iloc[0]
    assert first["narrative_t1"] == "I felt anger when I received dozens of job rejections"
    assert first["narrative_t2"] == "The person felt anger when they received dozens of job rejections"
    manifest = json.loads((path / "build_manifest.json").read_text())
    assert [s["id"] for s in manifest["sources"]] == [f"empathy-release-{e}" for e in release_rows()]
    assert "optional extra" in (path / "README.md").read_text()
    with pytest.raises(RecipeError, match=r"parameters\.t2"):
        build(str(write_recipe(tmp_path / "r2.yaml", t2="gpt")), out_dir=tmp_path / "o2", sources=sources)


@pytest.mark.parametrize("broken", ["header", "empty"])
def test_a_broken_release_file_is_named(tmp_path, broken):
    sources = write_sources(tmp_path / "src", corpus=False)
    path = release_file(sources, "anger")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    if broken == "header":
        lines[0] = lines[0].replace("first_person_text", "first_text")
        where = "header"
    else:  # an empty narrative: pandas reads it as missing (the authors' prompt would hold "nan")
        cells = lines[1].split("\t")
        cells[3] = ""
        lines[1] = "\t".join(cells)
        where = "row 1 (text_id 'gen00001'), column 'first_person_text'"
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(SourceFormatError) as info:
        build(str(write_recipe(tmp_path / "r.yaml")), out_dir=tmp_path / "o", sources=sources)
    assert "crowd-enVent_anger.tsv" in str(info.value) and where in str(info.value)
    assert not (tmp_path / "o").exists()


def test_identities_are_the_design_lists(subset):
    ids = load_config(subset, "identities").to_pandas()
    assert len(ids) == 47
    for category, expected in (("race", RACE), ("nationality", NATIONALITY), ("religion", RELIGION)):
        rows = ids[ids["category"] == category].sort_values("order")
        assert list(rows["identity"]) == expected
        assert list(rows["unspecified"]) == [True] + [False] * (len(expected) - 1)
    race = ids[ids["category"] == "race"].set_index("identity")["group"]
    assert race["a Caucasian"] == "White" and race["a Latinx"] == "Hispanic" and race["a person"] == "unspecified"
    nat = ids[ids["category"] == "nationality"].set_index("identity")["group"]
    assert (
        nat["a person from Myanmar"] == "West & South Asia" and nat["a person from the Philippines"] == "Latin America"
    )


def test_subset_has_all_21_configs_with_the_design_counts(subset):
    manifest = json.loads((subset / "build_manifest.json").read_text())
    assert subset.name == "intergroup-empathy-events24"
    rows = manifest["rows"]
    assert rows["events"] == 24
    per_category = {"race": 24 * 361, "nationality": 24 * 484, "religion": 24 * 36}
    for category, n in per_category.items():
        for setting in SETTINGS:
            assert rows[f"{category}_{setting}"] == n
    assert sum(v for k, v in rows.items() if "_" in k and k.split("_")[1] in SETTINGS) == 881 * 24 * 7
    events = load_config(subset, "events").to_pandas()
    assert events["emotion"].value_counts().to_dict() == dict.fromkeys(EMOTIONS, 2)


def test_on_the_fly_expansion_equals_the_materialised_config(subset):
    events = load_config(subset, "events").to_list()
    identities = load_config(subset, "identities").to_list()
    settings = load_config(subset, "settings").to_list()
    for category, setting in (("religion", "P0S0T2"), ("race", "P2S0T0")):
        expanded = list(expand_prompts(events, identities, settings, category, setting))
        stored = load_config(subset, f"{category}_{setting}").to_list()
        assert len(expanded) == len(stored)
        for a, b in zip(expanded, stored, strict=True):
            assert {k: b[k] for k in a} == a
    with pytest.raises(ValueError, match="P2S0T2"):
        next(expand_prompts(events, identities, settings, "race", "P2S0T2"))


def test_the_zip_in_a_sources_folder_is_read(tmp_path):
    sources = write_sources(tmp_path / "src", as_zip=True)
    path = build(
        str(write_recipe(tmp_path / "r.yaml")),
        out_dir=tmp_path / "o",
        sources=SourceOptions(sources, cache_dir=tmp_path / "cache"),
        max_events=12,
    ).path
    manifest = json.loads((path / "build_manifest.json").read_text())
    corpus = next(s for s in manifest["sources"] if s["id"] == "crowd-envent")
    assert manifest["rows"]["events"] == 12 and not corpus["pinned"]
    assert manifest["build_report"]["corpus_matched"] == 12


def _broken(tmp_path, rows=None, header=None):
    sources = write_sources(tmp_path / "src", rows=rows, header=header)
    return str(write_recipe(tmp_path / "r.yaml")), sources


@pytest.mark.parametrize(
    ("mutate", "where", "message"),
    [
        (
            lambda rows: rows[4].__setitem__(1, "happiness"),
            "line 6 (text_id 'gen00005'), column 'emotion'",
            "happiness",
        ),
        (lambda rows: rows[7].__setitem__(2, "   "), "line 9 (text_id 'gen00008'), column 'generated_text'", "empty"),
        (lambda rows: rows[9].__setitem__(4, "very"), "line 11 (text_id 'gen00010'), column 'intensity'", "very"),
        (lambda rows: rows[3].__setitem__(0, "gen00001"), "line 5 (text_id 'gen00001'), column 'text_id'", "duplicate"),
    ],
)
def test_bad_rows_are_named(tmp_path, mutate, where, message):
    rows = corpus_rows()
    mutate(rows)
    recipe, sources = _broken(tmp_path, rows=rows)
    with pytest.raises(SourceFormatError) as info:
        build(recipe, out_dir=tmp_path / "o", sources=sources)
    assert where in str(info.value) and message in str(info.value) and "crowd-enVent_generation.tsv" in str(info.value)
    assert not (tmp_path / "o").exists()


def test_missing_column_and_bad_flags(tmp_path):
    header = [h if h != "generated_text" else "text" for h in HEADER]
    recipe, sources = _broken(tmp_path, header=header)
    with pytest.raises(SourceFormatError, match="missing column"):
        build(recipe, out_dir=tmp_path / "o", sources=sources)
    recipe, sources = _broken(tmp_path / "2")
    with pytest.raises(RecipeError, match="exceeds"):
        build(recipe, out_dir=tmp_path / "o", sources=sources, max_events=1000)
    with pytest.raises(RecipeError, match="--full"):
        build(recipe, out_dir=tmp_path / "o", sources=sources, full=True)
    assert not (tmp_path / "o").exists()


def test_expected_corpus_counts_add_up():
    from promptgen.empathy.corpus import EXPECTED_PER_EMOTION, EXPECTED_TOTAL, Event, count_deviations

    assert sum(EXPECTED_PER_EMOTION.values()) == EXPECTED_TOTAL == 6050
    published = [Event(f"t{e}{i}", e, "x", "x", 1, 0) for e, n in EXPECTED_PER_EMOTION.items() for i in range(n)]
    assert count_deviations(published) == []
    assert count_deviations(published[:-1]) == [
        "6049 events after dropping no-emotion, expected 6050",
        "trust: 549 events, expected 550",
    ]
