"""A plugin (`PROBES_PLUGINS`) that breaks is one scrubbed line on stderr, exit 2, on every command.

The plugins are imported before any command exists (their backends and probes are in `--help`),
so a failing one must not end in a raw traceback: an exception's text may hold the Hub token or
a server key (`promptgen.core.secrets`). Each plugin here is a module written to `tmp_path` and
put on PYTHONPATH; `probes --help` and `probes run --help` run in a subprocess with a token and a
key set, as a user's shell would have them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HF_TOKEN = "hf_" + "Ab1" * 12
OPENAI_KEY = "sk-proj-" + "Zy9_" * 8

#: plugin module source, by case: each fails its own way
PLUGINS = {
    "import-error-with-token": f"raise ImportError('no module named x; token {HF_TOKEN}')\n",
    "runtime-error-with-secrets": (
        "import os\nraise RuntimeError('boom\\n' + os.environ['HF_TOKEN'] + '\\nkey=' + os.environ['OPENAI_API_KEY'])\n"
    ),
    "registers-backend-hf": (
        "from runners.backends import BackendSpec, register\n"
        "register(BackendSpec('hf', loader='nowhere:load', summary='mine'))\n"
    ),
    "registers-existing-probe": (
        "from promptgen.core.probe_spec import ProbeSpec\n"
        "from promptgen.probe_registry import register_probe\n"
        "register_probe(ProbeSpec('talent-or-luck', 'mine', 'mine:draft', 'mine:ANALYSIS', 'mine_', ('mine',)))\n"
    ),
}


def _probes(args: list[str], plugins: str, pythonpath: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PROBES_PLUGINS": plugins,
        "PYTHONPATH": os.pathsep.join([str(pythonpath), *sys.path]),
        "HF_TOKEN": HF_TOKEN,
        "OPENAI_API_KEY": OPENAI_KEY,
        "NO_COLOR": "1",
        "COLUMNS": "80",
    }
    return subprocess.run(
        [sys.executable, "-m", "probes.cli", *args], env=env, capture_output=True, text=True, timeout=120
    )


def _assert_one_scrubbed_line(done: subprocess.CompletedProcess[str], names: str) -> None:
    text = done.stdout + done.stderr
    assert done.returncode == 2, text
    assert "Traceback" not in text, text
    assert HF_TOKEN not in text and OPENAI_KEY not in text, text
    assert HF_TOKEN[3:20] not in text and OPENAI_KEY[8:24] not in text, text
    assert done.stdout == "", text
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: PROBES_PLUGINS"), text
    assert names in lines[0], text


@pytest.mark.parametrize("case", sorted(PLUGINS))
def test_a_failing_plugin_is_one_scrubbed_line_on_every_command(case: str, tmp_path: Path) -> None:
    module = "plugin_" + case.replace("-", "_")
    (tmp_path / f"{module}.py").write_text(PLUGINS[case], encoding="utf-8")
    for args in (["--help"], ["run", "--help"]):
        _assert_one_scrubbed_line(_probes(args, module, tmp_path), repr(module))


def test_a_plugin_format_under_a_built_in_s_name_is_one_line_naming_both(tmp_path: Path) -> None:
    """Issue #69: a plugin's `jsonl` export format was taken, and `probes export --help` showed its text."""
    (tmp_path / "plugin_jsonl.py").write_text(
        "from analysis.probe_part import ProbeAnalysis\n"
        "from promptgen.core.probe_spec import ProbeSpec\n"
        "from promptgen.core.release_format import ReleaseFormat\n"
        "from promptgen.probe_registry import register_probe\n"
        "FORMATS = {'jsonl': ReleaseFormat('plugin_jsonl:F', 'mine')}\n"
        "ANALYSIS = ProbeAnalysis('Mine', lambda: None, export_formats=FORMATS)\n"
        "register_probe(ProbeSpec('mine', 'mine', 'mine:draft', 'plugin_jsonl:ANALYSIS', 'mine_', ('mine',)))\n",
        encoding="utf-8",
    )
    done = _probes(["export", "--help"], "plugin_jsonl", tmp_path)
    assert done.returncode == 2 and done.stdout == "" and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines() == [
        "error: probe 'mine' (plugin_jsonl:ANALYSIS): export_formats name 'jsonl' is registered already, by the "
        "project's own, in analysis.export"
    ]


def test_a_relative_plugin_name_is_one_line(tmp_path: Path) -> None:
    for args in (["--help"], ["run", "--help"]):
        _assert_one_scrubbed_line(_probes(args, ".foo", tmp_path), "'.foo'")
