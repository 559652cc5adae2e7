"""`probes.datasets`: the one rule by which the sweep and the demo find or build a probe's dataset.

Exercised on the tests' fourth probe (tests/fake_probe.py, a six-row build), registered for each
test on a copy of the registry; a variant of it with a private corpus shows the synthetic stand-in.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from promptgen.core.errors import ProbeError
from promptgen.hub.read import read_build_manifest
from promptgen.sources import SourceOptions

ASSETS = Path(__file__).resolve().parents[1] / "fake_probe_files"


@pytest.fixture()
def fake(fake_probe):
    """The fourth probe, registered for the test (conftest's `fake_probe`)."""
    return fake_probe


def _sources() -> SourceOptions:
    return SourceOptions(folder=ASSETS / "sources", offline=True)


def test_a_dataset_is_built_once_then_reused_unless_its_options_differ(fake, tmp_path: Path) -> None:
    from probes.datasets import find_or_build

    out = tmp_path / "datasets"
    kw = {"reuse": out, "build_into": out, "synthetic_dir": tmp_path / "synthetic"}
    first = find_or_build([fake.NAME], _sources(), **kw)
    folder = first.folders[fake.NAME]
    assert folder == out / "fake-probe" and first.synthetic == []
    stamp = (folder / "build_manifest.json").stat().st_mtime_ns

    built: list[str] = []
    again = find_or_build([fake.NAME], _sources(), **kw, progress=lambda name, make: (built.append(name), make())[1])
    assert again.folders == first.folders and built == [fake.NAME]
    assert (folder / "build_manifest.json").stat().st_mtime_ns == stamp  # found, not rebuilt

    # other build options name another dataset: built beside it, and found the next time
    narrowed = find_or_build([fake.NAME], _sources(), **kw, options={fake.NAME: {"configs": ["items"]}})
    subset = narrowed.folders[fake.NAME]
    assert subset == out / "fake-probe-items" and read_build_manifest(subset)["parameters"]["configs"] == ["items"]
    assert find_or_build([fake.NAME], _sources(), **kw).folders[fake.NAME] == folder


def test_a_dataset_of_another_recipe_version_is_not_reused(fake, tmp_path: Path, monkeypatch) -> None:
    from probes.datasets import find_built, find_datasets, find_or_build

    out = tmp_path / "datasets"
    folder = find_or_build([fake.NAME], _sources(), reuse=out, build_into=out, synthetic_dir=tmp_path).folders[
        fake.NAME
    ]
    assert find_built(out, fake.NAME, {}) == folder
    # the same recipe file, edited: its sha256 differs, so the built folder is not this recipe's
    builders = tmp_path / "builders"
    builders.mkdir()
    text = (ASSETS / "builders" / "fake_probe.yaml").read_text(encoding="utf-8")
    (builders / "fake_probe.yaml").write_text(text + "# edited\n", encoding="utf-8")
    monkeypatch.setenv("PROBES_BUILDERS", str(builders))
    assert find_built(out, fake.NAME, {}) is None
    # the sweep builds into a staging folder, then moves the build into OUT/datasets: the stale folder is in its
    # way, which is one line (before the model loads), not an OSError at the move
    staging = tmp_path / "staging"
    staging.mkdir()
    with pytest.raises(ProbeError, match=r"holds another build of fake-probe \(another version of its recipe"):
        find_or_build([fake.NAME], _sources(), reuse=out, build_into=staging, synthetic_dir=tmp_path)
    assert list(staging.iterdir()) == []  # said before the build: nothing was built to be thrown away
    # a folder the user names is theirs: found by the recipe file that built it, whatever its version
    assert find_datasets(out, [fake.NAME]) == {fake.NAME: folder}


def test_a_private_corpus_the_sources_lack_is_its_labelled_stand_in(fake, tmp_path: Path) -> None:
    """A probe whose corpus is not redistributed is built from its synthetic stand-in, and the caller is warned."""
    import promptgen.probe_registry as registry
    from probes.datasets import find_or_build

    def stand_in(folder: Path) -> Path:
        shutil.copytree(ASSETS / "sources", folder)
        return folder

    fake.stand_in = stand_in
    private = replace(fake.SPEC, private_source="fake-statements", synthetic_sources="fake_probe:stand_in")
    registry._REGISTERED[fake.NAME] = private
    sources = SourceOptions(folder=tmp_path / "empty-sources", offline=True)
    sources.folder.mkdir()
    warned: list[str] = []
    out = tmp_path / "datasets"
    got = find_or_build(
        [fake.NAME], sources, reuse=out, build_into=out, synthetic_dir=tmp_path / "synthetic", warn=warned.append
    )
    assert got.synthetic == [fake.NAME] and (tmp_path / "synthetic" / fake.NAME / "fake-statements").is_dir()
    (line,) = warned
    assert f"has no fake-statements corpus: {fake.NAME} is built from a small synthetic corpus" in line
    assert read_build_manifest(got.folders[fake.NAME])["recipe"]["file"] == "fake_probe.yaml"


def test_missing_sources_and_datasets_are_one_line_naming_them(fake, tmp_path: Path) -> None:
    from probes.datasets import check_local_sources, find_datasets

    (tmp_path / "sources").mkdir()
    with pytest.raises(ProbeError, match=r"--sources \S+ lacks fake-statements; see"):
        check_local_sources(tmp_path / "sources", [fake.NAME])
    check_local_sources(ASSETS / "sources", [fake.NAME])  # present: no error
    (tmp_path / "datasets").mkdir()
    with pytest.raises(ProbeError, match="has no fake-probe dataset \\(build it: probes build fake-probe --out"):
        find_datasets(tmp_path / "datasets", [fake.NAME])
    with pytest.raises(ProbeError, match="is not a folder of built datasets"):
        find_datasets(tmp_path / "nowhere", [fake.NAME])


def test_a_demo_size_a_probe_does_not_have_is_refused_before_any_work(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from probes.demo import demo

    with pytest.raises(ProbeError, match="the demo of talent-or-luck has no size 'rows' \\(sizes: per_cell\\)"):
        demo(tmp_path / "demo", sources=None, sizes={"talent-or-luck": {"rows": 2}}, progress=lambda _l: None)
    assert not (tmp_path / "demo").exists() or not any((tmp_path / "demo").iterdir())
