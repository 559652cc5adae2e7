"""Where the recipes (builders/) and card templates (cards/) are found.

In a source checkout (editable install, tests, CI) they are the repository's own
folders; an installed wheel carries copies under `promptgen/_assets/`. `PROBES_BUILDERS`
and `PROBES_CARDS` name more folders (`os.pathsep`-separated), searched first: a fork's versions
of the project's own (a file of the same name there wins), or a probe's. A plugin probe whose
package carries its recipe and card declares their folder in its spec (`ProbeSpec.assets`), and
registering it adds that folder (`add_assets`), searched next. The project's own stay found, so
the results card (`cards/results.md.j2`) is there for every run.
"""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
_REPO_ROOT = _PACKAGE_DIR.parents[1]
#: the registered probes' own asset folders (`ProbeSpec.assets`), in registration order
_ADDED: list[Path] = []


def add_assets(folder: str | Path) -> None:
    """Search `folder`'s `builders/` and `cards/` too, after the variables' folders (a plugin probe's own files)."""
    path = Path(folder)
    if path not in _ADDED:
        _ADDED.append(path)


def _asset_dirs(kind: str, env: str) -> list[Path]:
    extra = [Path(p) for p in os.environ.get(env, "").split(os.pathsep) if p]
    extra += [folder / kind for folder in _ADDED if (folder / kind).is_dir()]
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
