"""Where the recipes (builders/) and card templates (cards/) are found.

In a source checkout (editable install, tests, CI) they are the repository's own
folders; an installed wheel carries copies under `promptgen/_assets/`. `PROBES_BUILDERS`
and `PROBES_CARDS` point elsewhere, e.g. at a fork's recipes.
"""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
_REPO_ROOT = _PACKAGE_DIR.parents[1]


def _asset_dir(kind: str, env: str) -> Path:
    override = os.environ.get(env)
    if override:
        return Path(override)
    for candidate in (_REPO_ROOT / kind, _PACKAGE_DIR / "_assets" / kind):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"no {kind}/ folder found beside the package; set {env}")


def builders_dir() -> Path:
    """The folder holding the `*.yaml` recipes."""
    return _asset_dir("builders", "PROBES_BUILDERS")


def cards_dir() -> Path:
    """The folder holding the dataset-card templates."""
    return _asset_dir("cards", "PROBES_CARDS")
