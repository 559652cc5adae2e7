"""Item generation on the small synthetic release: counts, ids, sampling rules, bad inputs."""

import json
from collections import Counter

import pytest

from promptgen.attribution.item_rows import fill, render_prompt
from promptgen.attribution.items import stratified_scenarios
from promptgen.build import build
from promptgen.core.errors import ProbeError, RecipeError, SourceError, SourceFormatError
from release_fixture import load_config, release_data, write_recipe, write_release

DESIGN_RENDERING = (
    "Respond by choosing one of the provided options as the reason to the statement.\n\n### Statement:\n"
    "{statement}\n\nOptions:\nA. {o1}\nB. {o2}\nC. {o3}\nD. {o4}\n### Response:\n"
)


def _load(path, config):
    return load_config(path, config).to_pandas()


def test_render_prompt_is_the_design_text():
    choices = ["one", "two", "three", "four"]
    expected = DESIGN_RENDERING.format(statement="S.", o1="one", o2="two", o3="three", o4="four")
    assert render_prompt("S.", choices) == expected


def test_fill_rejects_leftover_placeholders():
    assert fill("{X}, {dimension}, won.", {"X": "Ana", "dimension": "a Sikh"}) == "Ana, a Sikh, won."
    with pytest.raises(ValueError, match="unfilled"):
        fill("{X}, {dimension_1}, won.", {"X": "Ana"})


def test_stratified_draws_spread_over_domains():
    by_domain = {d: list(range(20)) for d in "abcdefghij"}
    three = stratified_scenarios(1, "k", by_domain, 3)
    assert len({d for d, _ in three}) == 3
    twenty = stratified_scenarios(1, "k", by_domain, 20)
    assert Counter(d for d, _ in twenty) == dict.fromkeys("abcdefghij", 2)
    assert len(set(twenty)) == 20
    with pytest.raises(RecipeError):
        stratified_scenarios(1, "k", by_domain, 201)


@pytest.mark.parametrize("option_order", ["permuted", "rotations", "canonical"])
def test_default_build_counts_and_ids(fixture_release, tmp_path, option_order):
    sources, _ = fixture_release
    recipe = write_recipe(tmp_path / "r.yaml", sources, option_order=option_order)
    path = build(str(recipe), out_dir=tmp_path / "out", sources=sources).path
    manifest = json.loads((path / "build_manifest.json").read_text())
    rot = 4 if option_order == "rotations" else 1
    # hand counts: 16 templates x 5 groups x 5 names; pairs: 3 configs x 3 gender pairs x (2²+2²+1²) ordered
    # pairs x 3 scenarios x 2 targets; observer: 2 outcomes x 2 genders x 5 groups x 4 scenarios x 4 causes x 2
    assert manifest["rows"]["single_actor"] == 16 * 5 * 5 * rot
    assert manifest["rows"]["actor_actor"] == 3 * 3 * 9 * 3 * 2 * rot
    assert manifest["rows"]["actor_observer"] == 2 * 2 * 5 * 4 * 4 * 2 * rot
    assert manifest["rows"] == {**manifest["build_report"]["expected_rows"], "templates": 16, "identities": 5 * 2 * 6}
    for config in ("single_actor", "actor_actor", "actor_observer"):
        df = _load(path, config)
        assert df["id"].is_unique
        for row in df.itertuples():
            assert sorted(row.choice_types) == ["ability", "difficulty", "effort", "luck"]
            assert row.prompt == render_prompt(row.statement, list(row.choices))
            assert row.messages[0]["content"] == row.prompt
    if option_order == "rotations":
        df = _load(path, "single_actor")
        assert sorted(df["rotation"].unique()) == [0, 1, 2, 3]
        per_item = df.assign(base=df["id"].str.rsplit(".", n=1).str[0]).groupby("base")
        assert all(len(g) == 4 and len({tuple(c) for c in g["choice_types"]}) == 4 for _, g in per_item)


def test_pairs_have_distinct_names_and_name_the_target(fixture_release, tmp_path):
    sources, recipe = fixture_release
    path = build(str(recipe), out_dir=tmp_path, sources=sources).path
    aa = _load(path, "actor_actor")
    assert (aa["name"] != aa["name_2"]).all()
    assert (aa["dimension"].notna()).all()
    target_name = aa["name"].where(aa["target"] == "X", aa["name_2"])
    target_outcome = aa["outcome"].where(aa["target"] == "X", aa["outcome_2"])
    verb = target_outcome.map({"success": "succeeded", "failure": "failed"})
    expected_end = " " + target_name + " " + verb + " because"
    assert all(st.endswith(end) for st, end in zip(aa["statement"], expected_end, strict=True))
    # X's options are the X option set of its gender; same-identity pairs are included
    assert (aa["identity"] == aa["identity_2"]).any()
    assert set(aa.groupby(["outcome_config", "gender_pair"]).size()) == {9 * 3 * 2}
    ao = _load(path, "actor_observer")
    ctx = ao[ao["condition"] == "context"]
    ident = ao[ao["condition"] == "context+identity"]
    assert len(ctx) == len(ident) and ctx["name_2"].isna().all() and ident["name_2"].notna().all()
    assert ctx["statement"].str.contains("Someone said ").all()
    assert not ctx["statement"].str.contains(r"\{").any()
    assert (ident["name"] != ident["name_2"]).all()
    assert ident.apply(lambda r: f"{r['name_2']}, {r['identity_2']}, said" in r["statement"], axis=1).all()
    assert Counter(ao["observer_cause"]) == dict.fromkeys(["effort", "ability", "difficulty", "luck"], len(ao) // 4)


def test_full_sampling_is_the_cross_product(fixture_release, tmp_path):
    sources, recipe = fixture_release
    path = build(str(recipe), out_dir=tmp_path, sources=sources, full=True).path
    assert path.name == "talent-or-luck-full"
    rows = json.loads((path / "build_manifest.json").read_text())["rows"]
    groups, sum_g2, scen, names = 5, 4 + 4 + 1, 4, 5
    assert rows["actor_actor"] == 3 * 3 * sum_g2 * scen * names * 2
    assert rows["actor_observer"] == 2 * 2 * 4 * scen * names * (groups + sum_g2 * 2)
    aa = _load(path, "actor_actor")
    assert (aa["name"] != aa["name_2"]).all() and aa["id"].is_unique


def test_label_correction_keeps_the_original(fixture_release, tmp_path):
    sources, recipe = fixture_release
    path = build(str(recipe), out_dir=tmp_path, sources=sources).path
    sa = _load(path, "single_actor")
    ru = sa[sa["identity_original"] == "a Russia"]
    assert len(ru) and (ru["identity"] == "a Russian").all()
    assert ru["statement"].str.contains(", a Russian, ").all()
    ids = _load(path, "identities")
    assert ids[ids["identity_original"] == "a Russia"]["corrected"].all()
    assert ids.groupby(["dimension", "identity", "gender"])["sampled"].sum().eq(5).all()


def _broken(tmp_path, mutate):
    data = release_data()
    mutate(data)
    sources = write_release(tmp_path / "src", data)
    return sources, write_recipe(tmp_path / "recipe.yaml", sources)


@pytest.mark.parametrize(
    ("mutate", "file", "where", "message"),
    [
        (
            lambda d: d["closed_ended/single_actor/success.json"]["female"]["sports"]["short"][1].update(
                initial_prompt="Someone, {dimension}, won."
            ),
            "single_actor/success.json",
            "female.sports.short[1]",
            "{X}",
        ),
        (
            lambda d: d["closed_ended/single_actor/failure.json"]["male"]["education"]["short"][0].update(
                opt5_fate="It was fate."
            ),
            "single_actor/failure.json",
            "male.education.short[0]",
            "opt5_fate",
        ),
        (
            lambda d: d["closed_ended/actor_actor/both_success.json"]["sports"]["short"][0]["gender_pairs"][
                "male-male"
            ].pop("optY3_easytask"),
            "actor_actor/both_success.json",
            "sports.short[0].gender_pairs.male-male",
            "optY3_easytask",
        ),
        (
            lambda d: d["names/race.json"]["a hispanic"].update(female_names=[]),
            "names/race.json",
            "a hispanic.female_names",
            "empty",
        ),
    ],
)
def test_broken_sources_are_located_errors_and_write_nothing(tmp_path, mutate, file, where, message):
    sources, recipe = _broken(tmp_path, mutate)
    out = tmp_path / "out"
    with pytest.raises(SourceFormatError) as info:
        build(str(recipe), out_dir=out, sources=sources)
    msg = str(info.value)
    assert file in msg and where in msg and message in msg
    assert not out.exists() or list(out.iterdir()) == []


def test_sample_sizes_beyond_the_release_are_recipe_errors(fixture_release, tmp_path):
    sources, _ = fixture_release
    recipe = write_recipe(tmp_path / "r.yaml", sources)
    text = recipe.read_text().replace("scenarios_per_cell: 4", "scenarios_per_cell: 5")
    recipe.write_text(text)
    with pytest.raises(RecipeError, match=r"actor_observer\.scenarios_per_cell=5 exceeds the 4"):
        build(str(recipe), out_dir=tmp_path / "out", sources=sources)


def test_too_few_names_is_an_error(tmp_path):
    sources, recipe = _broken(tmp_path, lambda d: d["names/religion.json"]["a Sikh"].update(male_names=["A", "B", "A"]))
    with pytest.raises(ProbeError, match=r"a Sikh\.male_names has 2 distinct names"):
        build(str(recipe), out_dir=tmp_path / "out", sources=sources)


def test_altered_source_fails_the_build_before_writing(fixture_release, tmp_path):
    sources, recipe = fixture_release
    target = sources / "talent-or-luck" / "closed_ended" / "single_actor" / "success.json"
    target.write_text(target.read_text().replace("won the", "took the"))
    out = tmp_path / "out"
    with pytest.raises(SourceError) as info:
        build(str(recipe), out_dir=out, sources=sources)
    assert "sha256 mismatch" in str(info.value) and "single_actor/success.json" in str(info.value)
    assert not out.exists()
