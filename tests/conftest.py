"""Shared fixtures.

The real released sources are read from `PROBES_TEST_SOURCES` (default: `../shared/sources`
beside the repository). They are never copied into the repository. Tests that need them
are skipped with a reason on a developer machine without them, and fail under CI.
"""

from __future__ import annotations

import os
from pathlib import Path

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
    return build("talent-or-luck", out_dir=out, sources_dir=shared_sources).path


@pytest.fixture()
def fixture_release(tmp_path: Path) -> tuple[Path, Path]:
    """(sources folder, recipe path) of the small synthetic release."""
    sources = write_release(tmp_path / "sources")
    return sources, write_recipe(tmp_path / "recipe.yaml", sources)
