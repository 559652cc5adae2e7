"""The publish plan, file by file, against a remote tree (pure: no network).

Each local file is an add, an update or unchanged by its hashes; remote files under `data/`
that the folder lacks are deleted, other remote-only files are left alone (package docstring).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from promptgen.core.errors import ProbeError
from promptgen.core.layout import BUILD_MANIFEST
from runners.results import MANIFEST_NAME

from .folder import inspect_folder
from .local import DATA_PREFIX, LocalFile, LocalFolder

Action = Literal["add", "update", "unchanged", "delete"]


@dataclass(frozen=True)
class RemoteFile:
    """What the Hub reports about one file: git blob id and, for LFS/Xet files, the content sha256."""

    path: str
    size: int
    blob_id: str
    lfs_sha256: str | None = None

    @classmethod
    def from_entry(cls, entry: Any) -> RemoteFile | None:
        """From a huggingface_hub `RepoFile` (None for a `RepoFolder`, which has no blob id)."""
        if isinstance(entry, RemoteFile):
            return entry
        blob_id = getattr(entry, "blob_id", None)
        if blob_id is None:
            return None
        lfs = getattr(entry, "lfs", None)
        sha = None
        if lfs is not None:
            sha = getattr(lfs, "sha256", None) or (lfs.get("sha256") if isinstance(lfs, Mapping) else None)
        return cls(entry.path, int(entry.size), blob_id, sha)

    def same_content(self, local: LocalFile) -> bool:
        if self.lfs_sha256 is not None:
            return self.lfs_sha256 == local.sha256 and self.size == local.size
        return self.blob_id == local.git_sha1


@dataclass(frozen=True)
class PlanEntry:
    """One file of a publish: its path in the repo, its size in bytes, and what the publish does to it."""

    path: str
    size: int
    action: Action


@dataclass(frozen=True)
class PublishPlan:
    """What one publish does to the remote tree, file by file (sorted by path)."""

    entries: tuple[PlanEntry, ...]

    def count(self, action: Action) -> int:
        return sum(e.action == action for e in self.entries)

    @property
    def changed(self) -> bool:
        return any(e.action != "unchanged" for e in self.entries)

    @property
    def upload_bytes(self) -> int:
        return sum(e.size for e in self.entries if e.action in ("add", "update"))

    def summary(self) -> str:
        return ", ".join(f"{self.count(a)} {a}" for a in ("add", "update", "delete", "unchanged") if self.count(a))


def plan_publish(local_dir: Path | str | LocalFolder, remote_files: Iterable[Any]) -> PublishPlan:
    """Compare the local folder with a remote tree; no network.

    `remote_files` are `RemoteFile`s or huggingface_hub `RepoFile`/`RepoFolder` entries of the
    revision being replaced (empty for a new repo). Remote files under `data/` that the folder
    does not have become deletions; other remote-only files are left alone (module docstring).
    """
    local = local_dir if isinstance(local_dir, LocalFolder) else inspect_folder(local_dir)
    remote: dict[str, RemoteFile] = {}
    for entry in remote_files:
        rf = RemoteFile.from_entry(entry)
        if rf is not None:
            remote[rf.path] = rf
    other_manifest = MANIFEST_NAME if local.kind == "prompt" else BUILD_MANIFEST
    if other_manifest in remote:
        what = "a result dataset" if local.kind == "prompt" else "a prompt dataset"
        raise ProbeError(
            f"the repo holds {what} ({other_manifest}); publishing this {local.kind} folder there would replace "
            "its data. Use a separate repo for prompts and for each model's results."
        )
    entries: list[PlanEntry] = []
    for f in local.files:
        rf = remote.get(f.path)
        action: Action = "add" if rf is None else ("unchanged" if rf.same_content(f) else "update")
        entries.append(PlanEntry(f.path, f.size, action))
    local_paths = {f.path for f in local.files}
    for path, rf in remote.items():
        if path.startswith(DATA_PREFIX) and path not in local_paths:
            entries.append(PlanEntry(path, rf.size, "delete"))
    return PublishPlan(tuple(sorted(entries, key=lambda e: e.path)))


def identical_plan(local: LocalFolder) -> PublishPlan:
    """The plan when the remote revision is known (by fingerprint) to hold exactly these files."""
    return PublishPlan(tuple(PlanEntry(f.path, f.size, "unchanged") for f in local.files))
