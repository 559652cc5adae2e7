"""The import graph runs one way (pyproject `[tool.importlinter]`, docs/ARCHITECTURE.md "Stages and layers").

`lint-imports` checks the contracts on the real tree, and on a copy of it with one forbidden
import added, to show the contracts can fail: an upward import inside a function (the kind a
lazy import hides), one probe's builder or analysis importing another's, and a shared module importing a probe.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

try:
    import importlinter  # noqa: F401
except ImportError:  # a developer without the dev extra is told; CI, which installs it, fails
    _reason = 'needs import-linter (the dev extra): pip install -e ".[dev]"'
    if os.environ.get("CI"):
        raise RuntimeError(_reason) from None
    pytest.skip(_reason, allow_module_level=True)


def _lint_imports(src: Path) -> subprocess.CompletedProcess:
    """`lint-imports` over the packages under `src`, with the repository's contracts."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run(
        [sys.executable, "-c", code, "--config", str(REPO / "pyproject.toml"), "--no-cache"],
        cwd=src.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _copy_src(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    shutil.copytree(REPO / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return src


def test_the_tree_keeps_every_import_contract():
    done = _lint_imports(REPO / "src")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_an_upward_import_inside_a_function_breaks_the_stage_contract(tmp_path):
    src = _copy_src(tmp_path)
    module = src / "promptgen" / "core" / "errors.py"
    module.write_text(module.read_text() + "\n\ndef _upward():\n    from runners import results  # noqa: F401\n")
    done = _lint_imports(src)
    assert done.returncode != 0
    assert "Stages import one way" in done.stdout and "BROKEN" in done.stdout
    assert "promptgen.core.errors -> runners.results" in done.stdout


def test_a_type_only_import_counts_as_an_import(tmp_path):
    """`exclude_type_checking_imports = false`: an annotation naming a higher layer's type is an upward arrow too."""
    src = _copy_src(tmp_path)
    module = src / "promptgen" / "hub" / "cards.py"
    text = module.read_text()
    module.write_text(
        text
        + "\n\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from ..empathy import dataset  # noqa: F401\n"
    )
    done = _lint_imports(src)
    assert done.returncode != 0
    assert "promptgen.hub is not allowed to import promptgen.empathy" in done.stdout


def test_one_probe_importing_another_breaks_their_independence(tmp_path):
    src = _copy_src(tmp_path)
    module = src / "promptgen" / "attribution" / "items.py"
    upward = "\n\nfrom promptgen.empathy.prompts import identity_rows  # noqa: E402,F401\n"
    module.write_text(module.read_text() + upward)
    done = _lint_imports(src)
    assert done.returncode != 0
    out = " ".join(done.stdout.split())
    assert "no probe imports another BROKEN" in out
    assert "promptgen.attribution.items -> promptgen.empathy.prompts" in out


def test_one_probe_s_analysis_importing_another_s_breaks_their_independence(tmp_path):
    """The same contract line keeps the probes' analysis packages apart: one line per probe for both stages."""
    src = _copy_src(tmp_path)
    module = src / "analysis" / "trust_game" / "tables.py"
    sideways = "\n\ndef _sideways():\n    from analysis.empathy import tables  # noqa: F401\n"
    module.write_text(module.read_text() + sideways)
    done = _lint_imports(src)
    assert done.returncode != 0
    assert "analysis.trust_game.tables -> analysis.empathy.tables" in done.stdout


def test_a_shared_analysis_module_importing_a_probe_breaks_the_layers(tmp_path):
    """What every probe's analysis uses (figures' helpers, the columns, stats) sits below the probes."""
    src = _copy_src(tmp_path)
    module = src / "analysis" / "plots.py"
    upward = "\n\ndef _upward():\n    from analysis.empathy import tables  # noqa: F401\n"
    module.write_text(module.read_text() + upward)
    done = _lint_imports(src)
    assert done.returncode != 0
    assert "analysis.plots -> analysis.empathy.tables" in done.stdout


def test_a_room_of_runners_importing_a_higher_one_breaks_the_runners_layers(tmp_path):
    """Inside `runners`: scoring sits below the backends and the run (above only `exchange`, the types they trade)."""
    src = _copy_src(tmp_path)
    module = src / "runners" / "scoring" / "parse.py"
    module.write_text(module.read_text() + "\n\ndef _upward():\n    from runners.backends import load  # noqa: F401\n")
    done = _lint_imports(src)
    assert done.returncode != 0
    assert "runners.scoring.parse -> runners.backends.load" in done.stdout


def test_one_backend_importing_another_breaks_their_independence(tmp_path):
    """What two backends share has a room of its own (`runners.backends.prompt_logprobs`), never another backend."""
    src = _copy_src(tmp_path)
    module = src / "runners" / "backends" / "openai" / "accounting.py"
    sideways = "\n\ndef _sideways():\n    from runners.backends.vllm import backend  # noqa: F401\n"
    module.write_text(module.read_text() + sideways)
    done = _lint_imports(src)
    assert done.returncode != 0
    assert "runners.backends.openai is not allowed to import runners.backends.vllm" in done.stdout


def test_a_metric_importing_the_report_breaks_the_analysis_layers(tmp_path):
    src = _copy_src(tmp_path)
    module = src / "analysis" / "empathy" / "tables.py"
    module.write_text(module.read_text() + "\n\ndef _upward():\n    from analysis import report  # noqa: F401\n")
    done = _lint_imports(src)
    assert done.returncode != 0
    assert "analysis.empathy.tables -> analysis.report" in done.stdout


#: function-level imports of the project's own modules: each hides an edge of the import graph from a
#: reader of the module's head (issue #49 capped them at 40; most that remain keep `--help` light)
MAX_FUNCTION_IMPORTS = 40
OWN_PACKAGES = ("promptgen", "runners", "analysis", "probes")


def function_level_own_imports(source: str) -> int:
    """`import`/`from` statements of the project's packages (or relative) inside a function body."""
    count = 0
    for fn in ast.walk(ast.parse(source)):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom):
                    count += node.level > 0 or (node.module or "").split(".")[0] in OWN_PACKAGES
                elif isinstance(node, ast.Import):
                    count += any(a.name.split(".")[0] in OWN_PACKAGES for a in node.names)
    return count


def test_function_level_imports_of_the_project_stay_few():
    snippet = "import runners\ndef f():\n    from . import x\n    import numpy\n    from analysis.y import z\n"
    assert function_level_own_imports(snippet) == 2  # the counter counts what it should, and only that
    counts = {p: function_level_own_imports(p.read_text(encoding="utf-8")) for p in (REPO / "src").rglob("*.py")}
    assert sum(counts.values()) <= MAX_FUNCTION_IMPORTS, sorted(counts.items(), key=lambda kv: -kv[1])[:10]


def test_no_module_of_the_project_is_over_500_lines():
    """A module over 500 lines holds more than one job (issue #49): split it by what each part does."""
    long = {
        p.relative_to(REPO).as_posix(): n
        for p in (REPO / "src").rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 500
    }
    assert long == {}
