"""Plugins as users install them: two packages, each declaring a `social_bias_probes` entry point, installed with
pip into a scratch virtual environment, with no variable set and nothing in `src/` edited.

The packages are the tests' worked examples (tests/fake_probe.py, its files, and tests/fake_backend.py), copied
into a package each with its own `pyproject.toml`. The scratch environment sees the project's environment (a `.pth`
file adding its site-packages) and has the two packages installed in its own; `PROBES_PLUGINS`, `PYTHONPATH`,
`PROBES_BUILDERS` and `PROBES_CARDS` are unset in every command, so the probe, its recipe and card, and the backend
are found only through the installed distributions (`promptgen.core.plugins.load_extensions`, `ProbeSpec.assets`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from fake_probe_check import check_scores_table

TESTS = Path(__file__).resolve().parents[1]
UNSET = ("PROBES_PLUGINS", "PYTHONPATH", "PROBES_BUILDERS", "PROBES_CARDS", "VIRTUAL_ENV")


def _pyproject(name: str, module: str, layout: str) -> str:
    """A plugin package's `pyproject.toml`: its distribution `name`, one entry point naming `module`, and its
    setuptools `layout` lines."""
    return (
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{name}"\nversion = "0.1.0"\n\n'
        f'[project.entry-points.social_bias_probes]\n{module} = "{module}"\n\n{layout}'
    )


PROBE_PYPROJECT = _pyproject(
    "sbp-fake-probe",
    "fake_probe",
    '[tool.setuptools]\npackages = ["fake_probe"]\n\n'
    '[tool.setuptools.package-data]\nfake_probe = ["fake_probe_files/**/*"]\n',
)
BACKEND_PYPROJECT = _pyproject("sbp-fake-backend", "fake_backend", '[tool.setuptools]\npy-modules = ["fake_backend"]\n')
BROKEN_PYPROJECT = _pyproject("sbp-broken", "broken_plugin", '[tool.setuptools]\npy-modules = ["broken_plugin"]\n')

pytestmark = pytest.mark.slow  # a virtual environment, two pip installs and CLI processes that import the stack


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment that sees the project's and has the two plugin packages installed with pip: its
    python."""
    root = tmp_path_factory.mktemp("installed-plugins")
    probe = root / "sbp-fake-probe"
    shutil.copytree(TESTS / "fake_probe_files", probe / "fake_probe" / "fake_probe_files")
    shutil.copy(TESTS / "fake_probe.py", probe / "fake_probe" / "__init__.py")
    (probe / "pyproject.toml").write_text(PROBE_PYPROJECT)
    backend = root / "sbp-fake-backend"
    backend.mkdir()
    shutil.copy(TESTS / "fake_backend.py", backend / "fake_backend.py")
    (backend / "pyproject.toml").write_text(BACKEND_PYPROJECT)

    venv.create(root / "venv", with_pip=False)
    python = root / "venv" / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    project_site = sysconfig.get_paths()["purelib"]  # the project's environment: its libraries and `src`
    (Path(site) / "_project_environment.pth").write_text(f"import site; site.addsitedir({project_site!r})\n")
    install = [python, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    done = subprocess.run([*install, probe, backend], env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return python


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    return {**env, "NO_COLOR": "1", "COLUMNS": "250"}


def _probes(python: Path, *args: str | Path) -> str:
    done = subprocess.run(
        [python, "-m", "probes.cli", *map(str, args)], env=_env(), capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_installed_plugins_are_in_probes_help_with_no_variable_set(scratch: Path) -> None:
    where = subprocess.run(
        [scratch, "-c", "import fake_probe, fake_backend; print(fake_probe.__file__); print(fake_backend.__file__)"],
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert all("site-packages" in w and str(scratch.parents[1]) in w for w in where), where  # the installed copies
    assert "fake-groups" in _probes(scratch, "--help")  # the probe's own command
    assert "fake-probe (fake)" in _probes(scratch, "sweep", "--help")
    run_help = _probes(scratch, "run", "--help")
    assert "--fake-note" in run_help and "fake-third" in run_help  # the backend and its own flag
    # and the project's environment alone has neither: nothing else made them appear
    alone = subprocess.run(
        [sys.executable, "-m", "probes.cli", "sweep", "--help"], env=_env(), capture_output=True, text=True
    )
    assert alone.returncode == 0 and "fake-probe" not in alone.stdout


def test_an_installed_probe_is_built_run_with_an_installed_backend_and_analysed(
    scratch: Path, smollm2: Path, tmp_path: Path
) -> None:
    sources = TESTS / "fake_probe_files" / "sources"
    _probes(scratch, "build", "fake-probe", "--sources", sources, "--out", tmp_path / "datasets", "-q")
    dataset = tmp_path / "datasets" / "fake-probe"
    assert "# Fake probe: agreement with statements about two groups" in (dataset / "README.md").read_text()
    run = ["run", dataset, "-c", "items", "-m", smollm2, "--model-name", "smol", "--backend", "fake-third"]
    _probes(scratch, *run, "--fake-note", "installed", "--out", tmp_path / "results", "-q")
    _probes(scratch, "analyze", "--prompts", dataset, "--results", tmp_path / "results", "--out", tmp_path / "report")

    expected = check_scores_table(dataset, tmp_path / "results", tmp_path / "report")
    assert 0 < expected.min() < 1


def test_an_installed_plugin_that_fails_is_one_line_naming_its_entry_point(tmp_path: Path) -> None:
    package = tmp_path / "sbp-broken"
    package.mkdir()
    (package / "broken_plugin.py").write_text("raise RuntimeError('the plugin\\nbroke')\n")
    (package / "pyproject.toml").write_text(BROKEN_PYPROJECT)
    venv.create(tmp_path / "venv", with_pip=False)
    python = tmp_path / "venv" / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True
    ).stdout.strip()
    (Path(site) / "_project_environment.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n"
    )
    install = [python, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index", "-q", package]
    assert subprocess.run(install, env=_env(), capture_output=True, text=True, timeout=300).returncode == 0
    done = subprocess.run([python, "-m", "probes.cli", "--help"], env=_env(), capture_output=True, text=True)
    assert done.returncode == 2 and "Traceback" not in done.stdout + done.stderr
    assert done.stderr.strip() == (
        "error: social_bias_probes entry point 'broken_plugin' (broken_plugin, of sbp-broken) failed: "
        "RuntimeError: the plugin broke"
    ), done.stderr
