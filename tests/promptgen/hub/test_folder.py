import json

import pytest
import yaml

from hub_folder_fixture import FEATURES, toy_config, write_toy_folder
from promptgen.core.errors import OutputError, ProbeError
from promptgen.hub.folder import ConfigData
from release_fixture import load_config


def test_folder_loads_with_datasets_and_manifest_counts(tmp_path):
    path = write_toy_folder(tmp_path, [toy_config("a", 2500, 300), toy_config("b", 10, 3)])
    ds = load_config(path, "a")
    assert len(ds) == 2500 and ds.features == FEATURES
    assert ds[7] == {"id": "r7", "x": 7, "tags": ["1"]}
    manifest = json.loads((path / "build_manifest.json").read_text())
    assert manifest["rows"] == {"a": 2500, "b": 10}
    assert [f["path"] for f in manifest["configs"]["a"]["files"]] == [
        f"data/a/test-0000{i}-of-00003.parquet" for i in range(3)
    ]
    header = yaml.safe_load((path / "README.md").read_text().split("---")[1])
    assert [c["config_name"] for c in header["configs"]] == ["a", "b"]


def test_bytes_do_not_depend_on_batching(tmp_path):
    a = write_toy_folder(tmp_path / "one", [toy_config("a", 25_000, 7)], rows_per_shard=12_000)
    b = write_toy_folder(tmp_path / "two", [toy_config("a", 25_000, 4096)], rows_per_shard=12_000)
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files_a == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    for rel in files_a:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    ma = json.loads((a / "build_manifest.json").read_text())
    mb = json.loads((b / "build_manifest.json").read_text())
    assert ma["fingerprint"] == mb["fingerprint"]


def test_fingerprint_changes_with_content_and_parameters(tmp_path):
    a = json.loads((write_toy_folder(tmp_path / "1", [toy_config("a", 10, 5)]) / "build_manifest.json").read_text())
    b = json.loads((write_toy_folder(tmp_path / "2", [toy_config("a", 11, 5)]) / "build_manifest.json").read_text())
    assert a["fingerprint"] != b["fingerprint"]


def test_failure_midway_leaves_nothing(tmp_path):
    def broken():
        yield {"id": ["a"], "x": [1], "tags": [[]]}
        raise RuntimeError("generator died")

    with pytest.raises(RuntimeError):
        write_toy_folder(tmp_path, [toy_config("ok", 5, 2), ConfigData("bad", FEATURES, broken)])
    assert list(tmp_path.iterdir()) == []


def test_rows_not_matching_features_are_an_error(tmp_path):
    bad = ConfigData("bad", FEATURES, lambda: iter([{"id": ["a"], "x": ["not a number"], "tags": [[]]}]))
    with pytest.raises(ProbeError, match="bad"):
        write_toy_folder(tmp_path, [bad])
    assert list(tmp_path.iterdir()) == []


def test_empty_config_is_an_error_and_leaves_nothing(tmp_path):
    with pytest.raises(ProbeError, match="no rows"):
        write_toy_folder(tmp_path, [ConfigData("empty", FEATURES, lambda: iter([]))])
    assert list(tmp_path.iterdir()) == []


def test_existing_target_needs_overwrite(tmp_path):
    path = write_toy_folder(tmp_path, [toy_config("a", 3, 3)])
    with pytest.raises(OutputError, match="--overwrite"):
        write_toy_folder(tmp_path, [toy_config("a", 4, 3)])
    assert len(load_config(path, "a")) == 3
    write_toy_folder(tmp_path, [toy_config("a", 4, 3)], overwrite=True)
    assert len(load_config(path, "a")) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _leftover(out, name: str):
    folder = out / name
    (folder / "data" / "a").mkdir(parents=True)
    (folder / "data" / "a" / "shard-00000.parquet.part").write_bytes(b"x" * 100)
    return folder


def test_next_build_removes_staging_folders_of_dead_builds_only(tmp_path):
    """A SIGKILLed build leaves `.NAME.*.tmp`; the next build removes it, never a live build's."""
    import os
    import time

    from promptgen.core.files import _host_tag

    out = tmp_path / "out"
    host = _host_tag()
    dead = _leftover(out, f".ds.pid{_dead_pid()}@{host}.abcd1234.tmp")
    dead_other_dataset = _leftover(out, f".other.pid{_dead_pid()}@{host}.efgh5678.tmp")
    live = _leftover(out, f".ds.pid{os.getpid()}@{host}.live0000.tmp")
    # another host's folder: its pid cannot be checked here, so only its age can make it stale
    foreign_recent = _leftover(out, f".ds.pid1@{'0' * 8 if host != '0' * 8 else '1' * 8}.forei000.tmp")
    foreign_old = _leftover(out, f".ds.pid1@{'0' * 8 if host != '0' * 8 else '1' * 8}.forei111.tmp")
    legacy_old = _leftover(out, ".ds.k2j4h5g6.tmp")  # written before the pid was recorded
    legacy_other = _leftover(out, ".mine.k2j4h5g6.tmp")  # not this dataset's: left alone
    three_days_ago = time.time() - 3 * 24 * 3600
    for folder in (foreign_old, legacy_old, legacy_other):
        os.utime(folder, (three_days_ago, three_days_ago))
    path = write_toy_folder(out, [toy_config("a", 10, 5)])
    assert path.is_dir()
    assert not dead.exists() and not dead_other_dataset.exists()
    assert not foreign_old.exists() and not legacy_old.exists()
    assert live.exists() and foreign_recent.exists() and legacy_other.exists()
    # and the build's own staging folder is gone too (renamed into place)
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".ds.")) == sorted(
        [live.name, foreign_recent.name]
    )


def test_staging_folder_names_its_process(tmp_path, monkeypatch):
    """The name records the pid, so a build killed mid-way is recognisable afterwards."""
    import os

    from promptgen.core import files
    from promptgen.hub import folder as hubfolder

    seen = []
    real = hubfolder.make_staging_dir
    monkeypatch.setattr(hubfolder, "make_staging_dir", lambda parent, name: seen.append(real(parent, name)) or seen[-1])
    write_toy_folder(tmp_path / "out", [toy_config("a", 3, 3)])
    assert files._STAGING_RE.match(seen[0].name)["pid"] == str(os.getpid())
