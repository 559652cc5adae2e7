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
# vLLM's engine core runs in the test's own process, not in a spawned one that imports vLLM and
# torch again: an engine's start on this 2-core machine (benchmarks/vllm_engine_start.py). The scores
# are the same engine's; tests/probes/test_run_e2e.py keeps vLLM's default path for one `probes run` and its
# `vllm serve`.
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
# Under pytest-xdist each worker is one process of the run's (the README's command starts one per
# core), so each gets one math thread: two workers that each spread torch and vLLM's CPU kernels
# over every core slow each other down (two torch-bound slow files: 134 s side by side with the
# default threads, 97 s with one each). Subprocesses the tests start inherit it.
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
if "HF_DATASETS_CACHE" not in os.environ:
    _datasets_cache = tempfile.mkdtemp(prefix="probes-tests-datasets-")
    atexit.register(shutil.rmtree, _datasets_cache, ignore_errors=True)
    os.environ["HF_DATASETS_CACHE"] = _datasets_cache

import pytest
from filelock import FileLock

from release_fixture import REPO, write_designed_recipe, write_recipe, write_release
from runners_fixtures import smollm2, smollm2_model, smollm2_tokenizer  # noqa: F401  (session fixtures)


def pytest_configure(config: pytest.Config) -> None:
    """The plugins installed in the test environment or named in `PROBES_PLUGINS` loaded, as the command line and
    `probes.api` load them (`promptgen.core.plugins.load_extensions`): no registry loads them when imported."""
    from promptgen.core.plugins import load_extensions

    load_extensions()


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


def built_once(tmp_path_factory: pytest.TempPathFactory, key: str, make) -> Path:
    """`make(folder)`'s dataset, built once per test run even when pytest-xdist runs the tests in
    several worker processes (the README's test command does): the first worker to ask builds it
    under a lock in the run's shared base folder, the others wait and read the same folder. Without
    xdist the base folder is the session's own, so this is a plain session cache."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # shared by the run's workers (pytest-xdist's documented pattern)
    folder = root / f"shared-{key}"
    done = folder / ".built"
    with FileLock(str(root / f"shared-{key}.lock")):
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            done.write_text(str(make(folder)), encoding="utf-8")
    return Path(done.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def built_default(shared_sources: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default talent-or-luck dataset built once from the real release (its release configs hold
    3 M rows: minutes), shared by every worker of the run."""
    from promptgen.build import build

    return built_once(
        tmp_path_factory,
        "talent-or-luck",
        lambda out: build("talent-or-luck", out_dir=out, sources=shared_sources).path,
    )


@pytest.fixture(scope="session")
def built_designed(shared_sources: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """talent-or-luck built from the real release without its release configs (`release_configs:
    false`: 15 s, not the default build's minutes): the designed configs, for tests that score or
    refuse a few of their rows. Its designed configs equal the default build's byte for byte
    (tests/promptgen/attribution/test_release_items.py)."""
    from promptgen.build import build

    def make(out: Path) -> Path:
        recipe = write_designed_recipe(out / "talent_or_luck.yaml")
        return build(str(recipe), out_dir=out / "datasets", sources=shared_sources).path

    return built_once(tmp_path_factory, "talent-or-luck-designed", make)


@pytest.fixture(scope="session")
def built_small_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """talent-or-luck built from the small synthetic release (tests/release_fixture.py), release
    configs included: every config of the default build in seconds, for tests that run a few rows of
    each rather than check the real release's rows."""
    from promptgen.build import build

    def make(out: Path) -> Path:
        sources = write_release(out / "sources")
        return build(
            str(write_recipe(out / "talent_or_luck.yaml", sources)), out_dir=out / "datasets", sources=sources
        ).path

    return built_once(tmp_path_factory, "talent-or-luck-small-release", make)


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The small synthetic release built twice, options permuted and then in canonical order: same ids,
    other prompts (results scored on one must not pass as scored on the other)."""
    from promptgen.build import build

    root = tmp_path_factory.mktemp("fp")
    sources = write_release(root / "sources")
    first = build(str(write_recipe(root / "a.yaml", sources)), out_dir=root / "a", sources=sources).path
    recipe = write_recipe(root / "b.yaml", sources, option_order="canonical")
    second = build(str(recipe), out_dir=root / "b", sources=sources).path
    return first, second


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

    return built_once(
        tmp_path_factory,
        "trust-game-names",
        lambda out: build("trust-game-names", out_dir=out, sources=shared_sources).path,
    )


@pytest.fixture(scope="session")
def built_empathy_events12(shared_sources: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """intergroup-empathy built once from the release's narratives, 12 events (seconds): every config, few rows."""
    from promptgen.build import build

    return built_once(
        tmp_path_factory,
        "intergroup-empathy-events12",
        lambda out: build("intergroup-empathy", out_dir=out, sources=shared_sources, max_events=12).path,
    )


#: the fourth probe's recipe, card and source (tests/fake_probe.py's files)
FAKE_PROBE_FILES = Path(__file__).resolve().parent / "fake_probe_files"


@pytest.fixture()
def fake_probe(monkeypatch: pytest.MonkeyPatch):
    """The tests' fourth probe (tests/fake_probe.py) registered for one test, its recipe and card found through its
    spec's `assets`: the registry and the asset folders are copies, restored afterwards."""
    import importlib
    import sys

    import promptgen.assets as assets
    import promptgen.probe_registry as registry

    monkeypatch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))
    monkeypatch.setattr(assets, "_ADDED", list(assets._ADDED))
    monkeypatch.delitem(sys.modules, "fake_probe", raising=False)
    return importlib.import_module("fake_probe")
