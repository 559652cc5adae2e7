"""What a prompt config's content is (runners.results.resume): the identity a resumed run trusts rows by.

The resume decisions themselves are tested through `Session.open` in test_session.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from runners.prompts import load_prompt_config
from runners.results import resume
from runners_fixtures import number_items, write_prompt_folder


def test_a_hub_config_has_a_content_only_at_a_commit() -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    for moving in (None, "main", "v1.0", commit[:12]):
        assert resume.hub_content("org/prompts", moving, "items", 10) is None
    content = resume.hub_content("org/prompts", commit, "items", 10)
    assert content is not None and content.rows == 10
    others = [("org/other", commit, "items"), ("org/prompts", "f" * 40, "items"), ("org/prompts", commit, "more")]
    assert all(resume.hub_content(*other, 10) != content for other in others)


def test_a_local_config_is_its_data_files_wherever_the_folder_is(tmp_path: Path) -> None:
    folder = write_prompt_folder(tmp_path / "a", number_items(12))
    first = load_prompt_config(str(folder), "items").content
    moved = shutil.copytree(folder, tmp_path / "b" / "renamed")
    assert first is not None and load_prompt_config(str(moved), "items").content == first
    items = number_items(12)
    items[5] = {**items[5], "number_max": 9}  # one item asks another range
    other = load_prompt_config(str(write_prompt_folder(tmp_path / "c", items)), "items").content
    assert other is not None and other.sha256 != first.sha256 and other.rows == first.rows == 12


def test_a_local_content_needs_hashed_files_and_the_listed_row_count() -> None:
    files = {"data/items/test-00000-of-00001.parquet": (100, "ab" * 32)}
    manifest = {"configs": {"items": {"rows": 12, "files": []}}}
    assert resume.local_content("items", files, manifest, 12) is not None
    assert resume.local_content("items", files, manifest, 11) is None  # not the rows the manifest lists
    assert resume.local_content("other", files, manifest, 12) is None  # a config the manifest lacks
    assert resume.local_content("items", {}, manifest, 12) is None  # no files: nothing was checked
    unhashed = {"data/items/test-00000-of-00001.parquet": (100, None)}
    assert resume.local_content("items", unhashed, manifest, 12) is None


def test_a_folder_without_a_build_manifest_has_no_content(tmp_path: Path) -> None:
    folder = write_prompt_folder(tmp_path / "a", number_items(4))
    (folder / "build_manifest.json").unlink()
    assert load_prompt_config(str(folder), "items").content is None


def test_the_id_column_of_a_selection_is_in_its_row_order(tmp_path: Path) -> None:
    prompts = load_prompt_config(str(write_prompt_folder(tmp_path / "a", number_items(12))), "items")
    rows = [7, 2, 9, 3]
    picked = prompts.dataset.select(rows)
    assert resume.id_column(picked).to_pylist() == [prompts.dataset[k]["id"] for k in rows]
    assert resume.id_column(prompts.dataset).to_pylist() == list(prompts.dataset["id"])
