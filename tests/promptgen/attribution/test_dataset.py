"""The default `talent-or-luck` dataset built from the real release in ../shared/sources.

Slow tier: the default build writes the release's 3 M actor-actor rows (minutes on 2 cores); the slow
tier builds it once for every test that reads it (tests/conftest.py, built_default).
"""

import hashlib
import itertools
import json
import os
import re
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from release_fixture import REPO, load_config, write_designed_recipe, write_recipe, write_release

DESIGN_RENDERING = (
    "Respond by choosing one of the provided options as the reason to the statement.\n\n### Statement:\n"
    "{statement}\n\nOptions:\nA. {o1}\nB. {o2}\nC. {o3}\nD. {o4}\n### Response:\n"
)
CAUSES = ["effort", "ability", "difficulty", "luck"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def single(built_default):
    return load_config(built_default, "single_actor").to_pandas()


def test_every_config_loads_with_the_stated_counts(built_default):
    manifest = json.loads((built_default / "build_manifest.json").read_text())
    expected = {
        "templates": 800,
        "identities": 27 * 2 * 20,
        "single_actor": 108_000,
        "actor_actor": 3 * 3 * 297 * 3 * 2,
        "actor_observer": 2 * 2 * 27 * 20 * 4 * 2,
    }
    release = {  # the release's own items (test_release_items checks them row by row)
        "single_actor_release": 2 * 2 * 10 * 20 * 27 * 5,
        "actor_actor_release": 10 * 20 * (3 + 3 + 4) * (15**2 + 6**2 + 6**2) * 5,
        "actor_observer_release": 2 * 2 * 10 * 4 * (15**2 + 6**2 + 6**2) * 5,
    }
    assert manifest["rows"] == {**expected, **release}
    for config, n in expected.items():
        assert len(load_config(built_default, config)) == n
    assert 135_000 < sum(expected[c] for c in ("single_actor", "actor_actor", "actor_observer")) < 145_000


def test_single_actor_prompts_are_the_design_rendering(built_default, single):
    templates = load_config(built_default, "templates").to_pandas().set_index("template_id")
    assert single["id"].is_unique
    merged = single.merge(templates, left_on="template_id", right_index=True, suffixes=("", "_t"))
    for row in merged.itertuples():
        statement = row.statement_template.replace("{X}", row.name).replace("{dimension}", row.identity)
        assert row.statement == statement
        assert row.prompt == DESIGN_RENDERING.format(
            statement=statement, o1=row.choices[0], o2=row.choices[1], o3=row.choices[2], o4=row.choices[3]
        )
        assert sorted(row.choice_types) == sorted(CAUSES)
        # the option texts are the template's, permuted as the stored seed says
        order = list(itertools.permutations(range(4)))[row.option_seed % 24]
        assert list(row.choice_types) == [CAUSES[i] for i in order] == [CAUSES[i] for i in row.option_order]
        assert list(row.choices) == [row.options[i] for i in order]
        assert list(row.choice_labels) == ["A", "B", "C", "D"]
        assert list(row.messages) == [{"role": "user", "content": row.prompt}]


def test_single_actor_design_balance(single):
    cells = single.groupby(["dimension", "identity", "gender", "outcome"]).size()
    assert len(cells) == 27 * 2 * 2 and set(cells) == {200 * 5}
    assert set(single.groupby(["identity", "gender"])["name"].nunique()) == {5}
    # every permutation is used, none dominates
    orders = single["option_order"].map(tuple).value_counts()
    assert len(orders) == 24 and orders.max() / orders.min() < 1.2
    # first position is each cause about a quarter of the time (position-bias control)
    first = single["choice_types"].map(lambda t: t[0]).value_counts(normalize=True)
    assert first.between(0.23, 0.27).all()


def test_identities_sampling_matches_the_items(built_default, single, shared_sources):
    ids = load_config(built_default, "identities").to_pandas()
    sampled = ids[ids["sampled"]]
    assert len(sampled) == 27 * 2 * 5
    used = single[["identity", "gender", "name"]].drop_duplicates()
    assert len(used) == len(sampled)
    assert set(map(tuple, used.values)) == set(map(tuple, sampled[["identity", "gender", "name"]].values))
    names = json.loads((shared_sources / "talent-or-luck/names/nationality.json").read_text())
    assert "a Russia" in names and "a Russian" not in names
    assert set(single.loc[single["identity_original"] == "a Russia", "identity"]) == {"a Russian"}


def test_actor_settings(built_default):
    aa = load_config(built_default, "actor_actor").to_pandas()
    assert aa["id"].is_unique and (aa["name"] != aa["name_2"]).all()
    # both targets of each scenario instance are present and share the scene
    inst = aa.assign(base=aa["id"].str.rsplit(".", n=1).str[0]).groupby("base")
    assert set(inst.size()) == {2} and all(set(g["target"]) == {"X", "Y"} for _, g in itertools.islice(inst, 500))
    assert aa.groupby(["outcome_config", "gender_pair", "dimension"]).size().to_dict() == {
        (c, gp, d): n * 3 * 2
        for c in ("both_failure", "both_success", "success_failure")
        for gp in ("female-female", "male-female", "male-male")
        for d, n in (("nationality", 225), ("race", 36), ("religion", 36))
    }
    # default sampling: 3 scenarios from 3 different domains per ordered identity pair
    per_pair = aa[aa["target"] == "X"].groupby(["outcome_config", "gender_pair", "identity", "identity_2"])["domain"]
    assert set(per_pair.nunique()) == {3}
    ao = load_config(built_default, "actor_observer").to_pandas()
    assert ao["id"].is_unique
    assert ao.groupby(["condition", "observer_cause"]).size().nunique() == 1
    ctx = ao[ao["condition"] == "context"]
    assert ctx["statement"].str.contains(r"\bSomeone said \w+ ").all() and ctx["name_2"].isna().all()
    assert not ao["statement"].str.contains(",,").any()
    assert set(ao.groupby(["outcome", "gender", "identity"])["domain"].value_counts()) == {2 * 4 * 2}


#: builds the recipes given as (recipe, out, sources) triples of arguments, in a fresh interpreter
_BUILD_AGAIN = """
import sys
from promptgen.build import build
args = sys.argv[1:]
for recipe, out, sources in zip(args[::3], args[1::3], args[2::3]):
    build(recipe, out_dir=out, sources=sources)
"""


def _files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_second_build_elsewhere_in_a_new_process_is_byte_identical(
    built_designed, built_small_release, shared_sources, tmp_path
):
    """Builds are deterministic: the same recipe and sources, built again in another folder by a fresh interpreter
    with another string-hash seed, give the same bytes, for the real release's designed configs and every config
    of the small synthetic release (release configs included). The default build's 3 M release rows come from
    the same functions as the small release's; tests/promptgen/attribution/test_release_items.py checks them
    against the release's scripts, and its designed configs against `built_designed`."""
    (tmp_path / "designed").mkdir(), (tmp_path / "small").mkdir()
    # the recipes' file names as the session's fixtures write them: the manifest records a recipe's file name
    designed = write_designed_recipe(tmp_path / "designed" / "talent_or_luck.yaml")
    small_sources = write_release(tmp_path / "small" / "sources")
    small = write_recipe(tmp_path / "small" / "talent_or_luck.yaml", small_sources)
    args = [str(designed), str(tmp_path / "designed" / "out"), str(shared_sources)]
    args += [str(small), str(tmp_path / "small" / "out"), str(small_sources)]
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    done = subprocess.run([sys.executable, "-c", _BUILD_AGAIN, *args], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    for first, again in ((built_designed, tmp_path / "designed"), (built_small_release, tmp_path / "small")):
        again = again / "out" / first.name
        assert _files(first) == _files(again), first.name


def test_manifest_and_card(built_default, shared_sources):
    manifest = json.loads((built_default / "build_manifest.json").read_text())
    recipe = REPO / "builders" / "talent_or_luck.yaml"
    assert manifest["recipe"] == {
        "file": "talent_or_luck.yaml",
        "sha256": hashlib.sha256(recipe.read_bytes()).hexdigest(),
    }
    source_md = (shared_sources / "talent-or-luck/SOURCE.md").read_text()
    pinned = dict(re.findall(r"\| (\S+\.json) \| \d+ \| ([0-9a-f]{64}) \|", source_md))
    for s in manifest["sources"]:
        assert s["sha256"] == pinned[s["path"].removeprefix("talent-or-luck/")] and s["pinned"]
    for f in (f for c in manifest["configs"].values() for f in c["files"]):
        assert hashlib.sha256((built_default / f["path"]).read_bytes()).hexdigest() == f["sha256"]
    card = (built_default / "README.md").read_text()
    header = yaml.safe_load(card.split("---\n")[1])
    assert [c["config_name"] for c in header["configs"]] == [
        "templates",
        "identities",
        "single_actor",
        "actor_actor",
        "actor_observer",
        "single_actor_release",
        "actor_actor_release",
        "actor_observer_release",
    ]
    assert header["license"] == "unknown" and header["pretty_name"]
    assert "108,000" in card and "a Russia" in card and "a Russian" in card
    assert manifest["fingerprint"] in card
    assert "{{" not in card and "{%" not in card


def test_lint_reports_the_known_release_problems(built_default):
    report = json.loads((built_default / "build_manifest.json").read_text())["build_report"]
    pronoun = [f for f in report["findings"] if f["check"] == "pronoun"]
    wheres = {f["where"] for f in pronoun}
    # three hand-checked clashes in the single-actor failure file (male templates using her)
    for where in (
        "single_actor/failure.json: male.media.short[2].initial_prompt",
        "single_actor/failure.json: male.media.short[4].ability",
        "single_actor/failure.json: male.law_and_policy.short[7].luck",
    ):
        assert where in wheres
    labels = {f["where"].split(": ")[1] for f in report["findings"] if f["check"] == "label"}
    assert {"an east asian", "a hispanic"} <= labels and "an American" not in labels
    applied = {a["file"]: a["strings_changed"] for a in report["text_corrections_applied"]}
    assert applied == {
        "talent-or-luck/closed_ended/actor_observer/success.json": 8,
        "talent-or-luck/closed_ended/single_actor/success.json": 2,
    }
    balance = report["option_length_balance"]["single_actor"]
    templates = pd.DataFrame(load_config(built_default, "templates").to_pandas())
    assert balance["max_length_ratio"] == pytest.approx(templates["option_length_ratio"].max(), abs=1e-4)
    assert balance["mean_length_ratio"] == pytest.approx(templates["option_length_ratio"].mean(), abs=1e-4)
