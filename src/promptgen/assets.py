"""Where the recipes (builders/) and card templates (cards/) are found.

In a source checkout (editable install, tests, CI) they are the repository's own
folders; an installed wheel carries copies under `promptgen/_assets/`. `PROBES_BUILDERS`
and `PROBES_CARDS` name more folders (`os.pathsep`-separated), searched first: a plugin
probe's recipe and card, or a fork's versions of the project's own (a file of the same name
there wins). The project's own stay found, so the results card (`cards/results.md.j2`) is there
for every run.
"""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
_REPO_ROOT = _PACKAGE_DIR.parents[1]


def _asset_dirs(kind: str, env: str) -> list[Path]:
    extra = [Path(p) for p in os.environ.get(env, "").split(os.pathsep) if p]
    for candidate in (_REPO_ROOT / kind, _PACKAGE_DIR / "_assets" / kind):
        if candidate.is_dir():
            return [*extra, candidate]
    if extra:
        return extra
    raise FileNotFoundError(f"no {kind}/ folder found beside the package; set {env}")


def builders_dirs() -> list[Path]:
    """The folders holding the `*.yaml` recipes, in search order (`PROBES_BUILDERS` first)."""
    return _asset_dirs("builders", "PROBES_BUILDERS")


def cards_dirs() -> list[Path]:
    """The folders holding the dataset-card templates, in search order (`PROBES_CARDS` first)."""
    return _asset_dirs("cards", "PROBES_CARDS")
