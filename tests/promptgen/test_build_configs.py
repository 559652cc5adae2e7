"""`probes build --config` (promptgen.build.select_configs): some configs of a recipe, byte for byte the whole build's.

A user who scores one config should not wait for the others (the default talent-or-luck build spends
minutes on 3 M release rows); what such a build writes must be the same files the whole build writes for
those configs, named so it is never taken for the whole dataset.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli_fixture import one_line_error
from probes.cli import app
from promptgen.build import build
from promptgen.core.errors import RecipeError
from release_fixture import write_recipe, write_release


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "build_manifest.json").read_text(encoding="utf-8"))


def _data_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted((folder / "data").rglob("*.parquet"))}


def test_a_build_of_some_configs_holds_the_whole_builds_files_for_them(
    built_small_release: Path, tmp_path: Path
) -> None:
    sources = write_release(tmp_path / "sources")
    recipe = write_recipe(tmp_path / "talent_or_luck.yaml", sources)
    chosen = ["single_actor_release", "actor_observer"]  # given out of order: the name sorts them
    result = build(str(recipe), out_dir=tmp_path / "out", sources=sources, configs=chosen)
    assert result.path.name == "talent-or-luck-actor_observer-single_actor_release"
    whole = _data_files(built_small_release)
    part = _data_files(result.path)
    assert sorted({name.split("/")[1] for name in part}) == sorted(chosen)
    assert part == {name: data for name, data in whole.items() if name.split("/")[1] in chosen}
    manifest = _manifest(result.path)
    assert sorted(manifest["configs"]) == sorted(chosen)
    assert manifest["parameters"]["configs"] == ["actor_observer", "single_actor_release"]  # the recipe's order
    assert manifest["fingerprint"] != _manifest(built_small_release)["fingerprint"]
    card = (result.path / "README.md").read_text(encoding="utf-8")
    assert "holds only the configs `actor_observer`, `single_actor_release` of the recipe" in card
    assert "config_name: actor_actor\n" not in card and "config_name: single_actor\n" not in card
    # a whole build says nothing of a selection
    assert "holds only the config" not in (built_small_release / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        (["single_actor", "nope"], "has no config 'nope'; it builds: templates, identities, single_actor, "),
        (["x", "x"], "names 'x' twice"),
    ],
)
def test_an_unknown_or_repeated_config_is_one_error_and_writes_nothing(
    tmp_path: Path, configs: list[str], message: str
) -> None:
    sources = write_release(tmp_path / "sources")
    recipe = write_recipe(tmp_path / "talent_or_luck.yaml", sources)
    with pytest.raises(RecipeError, match=message):
        build(str(recipe), out_dir=tmp_path / "out", sources=sources, configs=configs)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    argv = ["build", str(recipe), "--sources", str(sources), "--out", str(tmp_path / "out"), "-q"]
    argv += [arg for config in configs for arg in ("--config", config)]
    one_line_error(CliRunner().invoke(app, argv), configs[-1])
