"""Intergroup-empathy prompts against the authors' own code, run on the release's own files.

The oracle is `houyu0930/intergroup-empathy-bias` at cdfd1a6, executed unchanged
(tests/empathy_reference.py): `read_all_data` and `prepare_prompts` of `batch_pred_emotion.py`
with `const.py`'s `get_prompt_pair` and `group_mappings`, writing their prompt TSV and reading it
back as their generation step does. Nothing here restates a prompt string.

- every narrative of the 6,050 events, in every form, is the text their `read_all_data` reads;
- every prompt of a 24-event build (all 3 groups x 7 variations, every perceiver and
  experiencer) has their system prompt and user input, byte for byte, in their order, and its
  `authors_index` is their `idx` mapped from their subset to the full release.
The whole 37.3 M-prompt build against their code is `scripts/check_empathy_prompts.py` (run once;
its figures are in docs/REPRODUCING.md).
"""

from __future__ import annotations

import json

import pytest
import yaml

import empathy_reference as ref
from promptgen.build import build
from promptgen.empathy.prompts import AUTHORS_GROUPS as GROUPS
from promptgen.empathy.prompts import AUTHORS_VARIATIONS as VARIATIONS
from promptgen.empathy.prompts import authors_identities
from promptgen.empathy.release import RELEASE_T2_METHOD
from release_fixture import REPO, load_config

pytestmark = pytest.mark.skipif(not ref.RELEASE_DATA.is_dir(), reason="needs ../shared/sources (the release's files)")

EVENTS = 24


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("release-build")
    return build("intergroup-empathy", out_dir=root, sources=ref.RELEASE_SOURCES, max_events=EVENTS).path


@pytest.fixture(scope="module")
def authors_data(tmp_path_factory):
    """`read_all_data(variation)` per variation: their id, text and emotion lists."""
    code = ref.batch_pred_emotion()
    work = tmp_path_factory.mktemp("authors-data")
    (work / "data").symlink_to(ref.RELEASE_DATA, target_is_directory=True)
    with ref.working_directory(work):
        return {v: code.read_all_data(v) for v in VARIATIONS}


def test_every_narrative_is_the_text_the_authors_read(tmp_path, authors_data):
    """All 6,050 events: T0, T1 and T2 are `generated_text`, `first_person_text`, `third_person_text` as
    pandas' defaults read them (145 quoted fields lose their quotes), in their concatenated order."""
    recipe = yaml.safe_load((REPO / "builders" / "intergroup_empathy.yaml").read_text(encoding="utf-8"))
    recipe["parameters"]["materialize_prompts"] = False  # the events only: the prompts are the next test's
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False), encoding="utf-8")
    full = build(str(tmp_path / "r.yaml"), out_dir=tmp_path / "out", sources=ref.RELEASE_SOURCES)
    events = load_config(full.path, "events").to_pandas()
    assert len(events) == 6050
    assert list(events["authors_position"]) == list(range(6050))
    assert (events["release_events"] == 6050).all()
    origin = authors_data["origin"]
    assert list(events["text_id"]) == [str(t) for t in origin["id_list"]]
    assert list(events["emotion"]) == list(origin["emotion_list"])
    for variation, column in (("origin", "narrative_t0"), ("1-person", "narrative_t1"), ("3-person", "narrative_t2")):
        theirs = list(authors_data[variation]["text_list"])
        ours = list(events[column])
        assert ours == theirs, next(i for i, (a, b) in enumerate(zip(ours, theirs, strict=True)) if a != b)
    assert (events["t2_method"] == RELEASE_T2_METHOD).all()
    assert events["intensity"].isna().all()  # no crowd-enVent corpus in ../shared/sources: the extra is absent
    manifest = json.loads((full.path / "build_manifest.json").read_text())
    assert manifest["build_report"]["corpus_deviations"] == []
    assert all(s["pinned"] for s in manifest["sources"]) and len(manifest["sources"]) == 12


@pytest.mark.parametrize("group", list(GROUPS))
def test_prompts_are_the_authors_byte_for_byte_in_their_order(built, tmp_path, group):
    """Every prompt of the 24-event build, each of the 7 variations: their `prepare_prompts` on the
    same events, written to their TSV and read back, gives the same messages in the same order."""
    import pandas as pd

    code = ref.batch_pred_emotion()
    (tmp_path / "data").symlink_to(ref.RELEASE_DATA, target_is_directory=True)
    events = load_config(built, "events").to_pandas()
    positions = list(events["authors_position"])
    category = GROUPS[group]
    n_people = len(authors_identities(category))
    for variation, setting in VARIATIONS.items():
        with ref.working_directory(tmp_path):
            data = code.read_all_data(variation)
            subset = {k: v.iloc[positions].reset_index(drop=True) for k, v in data.items()}
            code.prepare_prompts(subset, variation, group)
            theirs = pd.read_csv(f"prompts/{group}_{variation}.tsv", sep="\t")
        ours = load_config(built, f"{category}_{setting}").to_pandas()
        assert len(ours) == len(theirs) == n_people**2 * EVENTS
        system = [m[0]["content"] for m in ours["messages"]]
        user = [m[1]["content"] for m in ours["messages"]]
        assert all(m[0]["role"] == "system" and m[1]["role"] == "user" for m in ours["messages"])
        assert system == list(theirs["system_prompt"]), (group, variation)
        assert user == list(theirs["user_input"]), (group, variation)
        assert list(ours["perceiver"]) == list(theirs["persona"])
        assert list(ours["experiencer"]) == list(theirs["experiencer"])
        assert list(ours["text_id"]) == [str(t) for t in theirs["oid"]]
        # their idx counts the subset; in the full release each event sits at its own position
        block, k = theirs["idx"] // EVENTS, theirs["idx"] % EVENTS
        expected = [int(b) * 6050 + positions[int(j)] for b, j in zip(block, k, strict=True)]
        assert list(ours["authors_index"]) == expected
        assert ours["prompt"].tolist() == [s + "\n" + u for s, u in zip(system, user, strict=True)]


def test_identity_lists_are_the_authors_group_mappings():
    """`group_mappings[...] + ['a person']` (nationality from `country_list`: the released file reads an
    undefined `country_list1`)."""
    const = ref.const()
    for group, category in GROUPS.items():
        assert [i.identity for i in authors_identities(category)] == [*const.group_mappings[group], "a person"]
