"""Shared fixtures.

The real released sources are read from `PROBES_TEST_SOURCES` (default: `../shared/sources`
beside the repository). They are never copied into the repository. Tests that need them
are skipped with a reason on a developer machine without them, and fail under CI.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

# Set before anything imports `datasets` or vLLM, so the README's test commands (both tiers) are
# the very runs CI makes: the tests never reach the Hub (they use local data only), their local
# dataset folders are cached in a throwaway `datasets` cache instead of the user's, and the vLLM
# test engines (a few dozen short prompts) take 1 GiB of KV cache on a CPU, not vLLM's default.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
if "HF_DATASETS_CACHE" not in os.environ:
    _datasets_cache = tempfile.mkdtemp(prefix="probes-tests-datasets-")
    atexit.register(shutil.rmtree, _datasets_cache, ignore_errors=True)
    os.environ["HF_DATASETS_CACHE"] = _datasets_cache

import pytest

from release_fixture import REPO, write_recipe, write_release
from runners_fixtures import smollm2, smollm2_model, smollm2_tokenizer  # noqa: F401  (session fixtures)


def _shared_sources() -> Path:
    return Path(os.environ.get("PROBES_TEST_SOURCES", REPO.parent / "shared" / "sources"))


@pytest.fixture(scope="session")
def shared_sources() -> Path:
    path = _shared_sources()
    if not (path / "talent-or-luck").is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"shared sources not found at {path}; set PROBES_TEST_SOURCES")
        pytest.skip(f"shared sources not found at {path}; set PROBES_TEST_SOURCES")
    return path


@pytest.fixture(scope="session")
def built_default(shared_sources: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default talent-or-luck dataset built once from the real release."""
    from promptgen.build import build

    out = tmp_path_factory.mktemp("built")
    return build("talent-or-luck", out_dir=out, sources=shared_sources).path


@pytest.fixture()
def fixture_release(tmp_path: Path) -> tuple[Path, Path]:
    """(sources folder, recipe path) of the small synthetic release."""
    sources = write_release(tmp_path / "sources")
    return sources, write_recipe(tmp_path / "recipe.yaml", sources)


@pytest.fixture(scope="session")
def hub_server(tmp_path_factory: pytest.TempPathFactory):
    """A real Hub server (olah, offline) serving git repositories of this session (tests/hub_server.py)."""
    from hub_server import start_hub_server

    server = start_hub_server(tmp_path_factory.mktemp("hub-server"))
    yield server
    server.close()


@pytest.fixture(scope="session")
def built_trust_game(shared_sources: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """trust-game-names built once from the real sources (a few seconds): small enough to serve and copy."""
    from promptgen.build import build

    return build("trust-game-names", out_dir=tmp_path_factory.mktemp("built-tg"), sources=shared_sources).path
