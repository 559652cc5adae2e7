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


def _in_function(statement: str) -> str:
    """An import hidden in a function body: the kind a lazy import is, which the contracts see all the same."""
    return f"\n\ndef _added():\n    {statement}  # noqa: F401\n"


#: (module under src/, text appended to it, what `lint-imports` must then report): each contract can fail
BROKEN_BY = {
    # the stages: promptgen is the bottom stage
    "stage-upward": (
        "promptgen/core/errors.py",
        _in_function("from runners import results"),
        ["Stages import one way", "BROKEN", "promptgen.core.errors -> runners.results"],
    ),
    # `exclude_type_checking_imports = false`: an annotation naming a higher layer's type is an upward arrow too
    "type-only": (
        "promptgen/hub/cards.py",
        "\n\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from ..empathy import dataset  # noqa: F401\n",
        ["promptgen.hub is not allowed to import promptgen.empathy"],
    ),
    # probe-layers: the probes' one line keeps their promptgen packages apart ...
    "probe-builder-sideways": (
        "promptgen/attribution/items.py",
        "\n\nfrom promptgen.empathy.prompts import identity_rows  # noqa: E402,F401\n",
        ["no probe imports another BROKEN", "promptgen.attribution.items -> promptgen.empathy.prompts"],
    ),
    # ... and their analysis packages, the same line for both stages
    "probe-analysis-sideways": (
        "analysis/trust_game/tables.py",
        _in_function("from analysis.empathy import tables"),
        ["analysis.trust_game.tables -> analysis.empathy.tables"],
    ),
    # what every probe's analysis uses (figures' helpers, the columns, stats) sits below the probes
    "shared-analysis-upward": (
        "analysis/plots.py",
        _in_function("from analysis.empathy import tables"),
        ["analysis.plots -> analysis.empathy.tables"],
    ),
    # a probe's metrics sit below the report that writes them
    "metric-upward": (
        "analysis/empathy/tables.py",
        _in_function("from analysis import report"),
        ["analysis.empathy.tables -> analysis.report"],
    ),
    # a probe's own room in the top stage is found through its spec: the command line never imports it ...
    "probe-command-downward": (
        "probes/cli/commands.py",
        _in_function("from probes.trust_game import pair_curation"),
        ["probes.cli.commands -> probes.trust_game.pair_curation"],
    ),
    # ... and it imports no other probe's room
    "probe-command-sideways": (
        "probes/empathy/t2_rewrites.py",
        _in_function("from probes.trust_game import pair_curation"),
        ["probes.empathy.t2_rewrites -> probes.trust_game.pair_curation"],
    ),
    # inside `runners`: scoring sits below the backends and the run (above only `exchange`, the types they trade)
    "runners-upward": (
        "runners/scoring/parse.py",
        _in_function("from runners.backends import load"),
        ["runners.scoring.parse -> runners.backends.load"],
    ),
    # what two backends share has a room of its own (`runners.backends.prompt_logprobs`), never another backend
    "backend-sideways": (
        "runners/backends/openai/accounting.py",
        _in_function("from runners.backends.vllm import backend"),
        ["runners.backends.openai is not allowed to import runners.backends.vllm"],
    ),
}


@pytest.mark.parametrize("case", list(BROKEN_BY))
def test_one_forbidden_import_breaks_its_contract(case: str, tmp_path: Path) -> None:
    path, added, reported = BROKEN_BY[case]
    src = _copy_src(tmp_path)
    module = src / path
    module.write_text(module.read_text() + added)
    done = _lint_imports(src)
    assert done.returncode != 0
    out = " ".join(done.stdout.split())
    for text in reported:
        assert text in out, (text, done.stdout[-3000:])


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
