"""The test-model cache (runners.testmodel): built once, atomically, and never used half-built.

Download and conversion are replaced by fakes here (the real ones run in the fixtures of
the other runner tests), so these tests need neither the network nor torch.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runners import testmodel


@pytest.fixture()
def fakes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []

    def download(work: Path) -> Path:
        calls.append("download")
        path = work / testmodel.GGUF_NAME
        path.write_bytes(b"gguf")
        return path

    def convert(gguf: Path, out: Path) -> None:
        calls.append("convert")
        out.mkdir()
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(testmodel, "_download_gguf", download)
    monkeypatch.setattr(testmodel, "_convert", convert)
    monkeypatch.setattr(testmodel, "folder_name", lambda: "smol-test")
    monkeypatch.setattr(testmodel, "version", lambda name: "0.0")
    return calls


def test_built_once_then_reused(tmp_path: Path, fakes: list[str]) -> None:
    gguf, folder = testmodel.ensure_smollm2(tmp_path)
    assert gguf == tmp_path / "smol-test" / testmodel.GGUF_NAME and gguf.read_bytes() == b"gguf"
    assert (folder / "config.json").is_file() and (tmp_path / "smol-test" / testmodel.MARKER).is_file()
    assert testmodel.ensure_smollm2(tmp_path) == (gguf, folder)
    assert fakes == ["download", "convert"]  # the second call only read the marker
    assert [p.name for p in tmp_path.iterdir()] == ["smol-test"]  # no temporary folder left


def test_a_folder_without_marker_is_rebuilt(tmp_path: Path, fakes: list[str]) -> None:
    (tmp_path / "smol-test" / "hf").mkdir(parents=True)  # e.g. copied by hand, half-way
    testmodel.ensure_smollm2(tmp_path)
    assert fakes == ["download", "convert"]
    assert (tmp_path / "smol-test" / testmodel.MARKER).is_file()


def test_a_failed_build_leaves_nothing(tmp_path: Path, fakes: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(gguf: Path, out: Path) -> None:
        raise RuntimeError("conversion failed")

    monkeypatch.setattr(testmodel, "_convert", broken)
    with pytest.raises(RuntimeError, match="conversion failed"):
        testmodel.ensure_smollm2(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_cache_location_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PROBES_TEST_MODEL_CACHE", str(tmp_path))
    assert testmodel.default_cache_dir() == tmp_path
    monkeypatch.delenv("PROBES_TEST_MODEL_CACHE")
    assert testmodel.default_cache_dir() == Path.home() / ".cache" / "social-bias-probes" / "models"


def test_llama3_folder_is_built_once_and_keeps_only_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def download(work: Path) -> Path:
        calls.append("download")
        path = work / testmodel.LLAMA3_VOCAB_NAME
        path.write_bytes(b"vocab")
        return path

    def build(vocab: Path, out: Path) -> None:
        calls.append("build")
        assert vocab.read_bytes() == b"vocab"
        out.mkdir()
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(testmodel, "_download_llama3_vocab", download)
    monkeypatch.setattr(testmodel, "_build_tiny_llama3", build)
    monkeypatch.setattr(testmodel, "version", lambda name: "0.0")
    folder = testmodel.ensure_llama3_tiny(tmp_path)
    assert folder == tmp_path / testmodel.llama3_folder_name() / "hf" and (folder / "config.json").is_file()
    assert testmodel.ensure_llama3_tiny(tmp_path) == folder and calls == ["download", "build"]  # cached
    assert sorted(p.name for p in folder.parent.iterdir()) == [testmodel.MARKER, "hf"]  # the GGUF file is gone
    assert [p.name for p in tmp_path.iterdir()] == [folder.parent.name]  # no temporary folder left
