"""The local side of a publish: the folder's files, walked and hashed, and the one-line refusal.

Each file is hashed both ways the Hub may report it, in one read, so the plan never guesses
which files the remote stores in LFS; hidden entries are left out and symlinks refused
(package docstring).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from promptgen.core.errors import ProbeError

#: where both kinds of folder keep their data files (the only remote files a publish deletes)
DATA_PREFIX = "data/"
_CHUNK = 1 << 20

Kind = Literal["prompt", "results"]


@dataclass(frozen=True)
class LocalFile:
    """One file of the folder with both hashes the Hub may report for it."""

    path: str  # posix path inside the repo
    size: int
    sha256: str
    git_sha1: str
    source: Path


@dataclass(frozen=True)
class LocalFolder:
    """A validated Hub-ready folder: what it is and the files that will be published."""

    root: Path
    kind: Kind
    name: str
    version: str | None
    build_fingerprint: str | None
    files: tuple[LocalFile, ...]
    #: what was validated before anything is planned, one line each (shown by `--dry-run`)
    checks: tuple[str, ...] = ()

    @property
    def fingerprint(self) -> str:
        """sha256 over the sorted (path, sha256) of all files: equal iff the published content is equal."""
        payload = json.dumps(sorted((f.path, f.sha256) for f in self.files), separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


def hash_file(path: Path) -> tuple[int, str, str]:
    """(size, sha256, git blob sha1) in one read: the Hub reports one or the other per file."""
    size = path.stat().st_size
    sha256 = hashlib.sha256()
    sha1 = hashlib.sha1(usedforsecurity=False)
    sha1.update(f"blob {size}\0".encode())
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            sha256.update(chunk)
            sha1.update(chunk)
    return size, sha256.hexdigest(), sha1.hexdigest()


def scan_files(root: Path) -> tuple[LocalFile, ...]:
    """All regular files under `root`, skipping hidden files and folders; refuses symlinks.

    Hidden entries are temporary files of atomic writes (`.name.*.tmp`), caches and VCS
    folders: never part of a dataset, and a leftover from a killed run must not be uploaded.
    A symlink (to a file or a folder) is refused, naming each: following it would upload
    whatever it points to, e.g. a secret outside the folder.
    """
    paths, links, odd = walk(root)
    problems = entry_problems(root, links, odd)
    if problems:
        raise ProbeError(refusal(root, problems, "replace each link by the file itself, or move it out"))
    found = []
    for rel in paths:
        size, sha256, sha1 = hash_file(root / rel)
        found.append(LocalFile(rel, size, sha256, sha1, root / rel))
    return tuple(found)


def entry_problems(root: Path, links: Iterable[str], odd: Iterable[str]) -> list[str]:
    problems = [f"symlink {p} (-> {os.readlink(root / p)})" for p in links]
    return problems + [f"not a regular file: {p}" for p in odd]


def walk(root: Path) -> tuple[list[str], list[str], list[str]]:
    """(regular files, symlinks, other entries) under `root` as sorted posix paths, hidden ones left out.

    `os.walk` does not descend into a symlinked folder; it is reported as a symlink instead.
    """
    files: list[str] = []
    links: list[str] = []
    odd: list[str] = []
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        visible = [d for d in dirs if not d.startswith(".")]
        links += [(here / d).relative_to(root).as_posix() for d in visible if (here / d).is_symlink()]
        dirs[:] = sorted(d for d in visible if not (here / d).is_symlink())
        for name in names:
            path = here / name
            if name.startswith("."):
                continue
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                links.append(rel)
            elif path.is_file():
                files.append(rel)
            else:
                odd.append(rel)
    return sorted(files), sorted(links), sorted(odd)


def refusal(root: Path, problems: list[str], fix: str) -> str:
    """One line naming every problem (the first 20, then a count)."""
    shown = "; ".join(problems[:20]) + (f"; and {len(problems) - 20} more" if len(problems) > 20 else "")
    return f"{root}: not published, {len(problems)} problem(s): {shown}. Nothing was uploaded; {fix}"
