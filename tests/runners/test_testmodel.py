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


def test_vocab_folders_share_one_download_and_keep_only_the_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sdist is fetched once for all four families; each family's folder is built once, from its own file."""
    calls: list[str] = []

    def download(work: Path) -> None:
        calls.append("download")
        for family in testmodel.VOCAB_FAMILIES.values():
            (work / family.gguf).write_bytes(family.gguf.encode())

    def build(vocab: Path, out: Path, add_bos: bool) -> None:
        calls.append(f"build {vocab.read_text()} bos={add_bos}")
        out.mkdir()
        (out / "config.json").write_text("{}")

    monkeypatch.setattr(testmodel, "_download_vocab_files", download)
    monkeypatch.setattr(testmodel, "_build_tiny", build)
    monkeypatch.setattr(testmodel, "version", lambda name: "0.0")
    folders = {f: testmodel.ensure_vocab_tiny(f, tmp_path) for f in testmodel.VOCAB_FAMILIES}
    assert testmodel.ensure_llama3_tiny(tmp_path) == folders["llama-bpe"]  # cached, under its first name
    assert calls == [
        "download",
        "build ggml-vocab-llama-bpe.gguf bos=True",
        "build ggml-vocab-llama-spm.gguf bos=True",
        "build ggml-vocab-qwen2.gguf bos=False",
        "build ggml-vocab-gpt-2.gguf bos=False",
    ]
    for family, folder in folders.items():
        assert folder == tmp_path / testmodel.vocab_tiny_folder_name(family) / "hf"
        assert (folder / "config.json").is_file()
        assert sorted(p.name for p in folder.parent.iterdir()) == [testmodel.MARKER, "hf"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(  # no temporary folder left
        [testmodel.VOCAB_FOLDER_NAME, *(f.parent.name for f in folders.values())]
    )
    with pytest.raises(ValueError, match="unknown vocabulary family 'bert'"):
        testmodel.ensure_vocab_tiny("bert", tmp_path)
