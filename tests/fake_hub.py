"""An in-memory Hugging Face Hub for the publish tests: `FakeHub` has the parts of `HfApi` that
`probes publish` uses and returns huggingface_hub's own `RepoFile`/`GitRefs`/`GitCommitInfo`
objects, so the code under test reads the real attribute names. Like the Hub's default
`.gitattributes`, it stores `*.parquet` in LFS (reported by content sha256) and other files as
regular git blobs (reported by git blob sha1).

The Hub round-trip test publishes to it too, then replays its commits into a real (olah) server.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx2
from huggingface_hub import CommitOperationAdd, CommitOperationDelete
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError
from huggingface_hub.hf_api import CommitInfo, GitCommitInfo, GitRefInfo, GitRefs, RepoFile, RepoFolder

#: a token of the Hub's shape that no real account has (the token-hygiene tests look for it in every output)
TOKEN = "hf_FAKEtoken0123456789abcdefghijklmn"
#: the `.gitattributes` of a new Hub dataset repo: parquet files in LFS
GITATTRIBUTES = b"*.parquet filter=lfs diff=lfs merge=lfs -text\n"


def hub_response(status: int, method: str = "GET") -> httpx2.Response:
    """The HTTP response a Hub error carries (huggingface_hub's errors need one)."""
    return httpx2.Response(status, request=httpx2.Request(method, "https://huggingface.co/api/datasets/x"))


def git_blob_sha1(data: bytes) -> str:
    """The git blob id of `data`: what the Hub reports as the oid of a regular (non-LFS) file."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub:
    """In-memory Hub: per repo a linear list of commits (full snapshots) and tags."""

    def __init__(self, token: str | None = TOKEN) -> None:
        self.token = token
        self.repos: dict[str, dict[str, Any]] = {}
        self.writes: list[tuple[str, Any]] = []

    # helpers for tests
    def repo(self, repo_id: str) -> dict[str, Any]:
        if repo_id not in self.repos:
            raise RepositoryNotFoundError(
                f"404 Client Error. Repository Not Found: {repo_id}", response=hub_response(404)
            )
        return self.repos[repo_id]

    def head(self, repo_id: str) -> dict[str, Any]:
        return self.repo(repo_id)["commits"][-1]

    def files(self, repo_id: str, revision: str | None = None) -> dict[str, bytes]:
        return self._resolve(self.repo(repo_id), revision)["files"]

    def commits(self, repo_id: str) -> list[dict[str, Any]]:
        return [w for w in self.writes if w[0] == "create_commit" and w[1]["repo_id"] == repo_id]

    def push(self, repo_id: str, files: dict[str, bytes], title: str, message: str = "") -> str:
        """A commit made by someone else (web upload, git push): no publish fingerprint."""
        repo = self.repo(repo_id)
        oid = hashlib.sha1(f"{repo_id}{len(repo['commits'])}{title}".encode()).hexdigest()
        repo["commits"].append({"oid": oid, "title": title, "message": message, "files": dict(files)})
        return oid

    def _resolve(self, repo: dict[str, Any], revision: str | None) -> dict[str, Any]:
        if revision in (None, "main"):
            return repo["commits"][-1]
        oid = repo["tags"].get(revision, revision)
        for commit in repo["commits"]:
            if commit["oid"] == oid:
                return commit
        raise HfHubHTTPError(f"404 Revision Not Found: {revision}", response=hub_response(404))

    # the HfApi surface used by probes.publish
    def create_repo(self, repo_id, *, repo_type=None, private=None, exist_ok=False, token=None):
        assert repo_type == "dataset"
        self.writes.append(("create_repo", {"repo_id": repo_id, "private": private}))
        if repo_id in self.repos:
            if not exist_ok:
                raise HfHubHTTPError("409 Conflict: repo exists", response=hub_response(409, "POST"))
            return
        self.repos[repo_id] = {"private": bool(private), "commits": [], "tags": {}}
        self.push(repo_id, {".gitattributes": GITATTRIBUTES}, "initial commit")

    def list_repo_refs(self, repo_id, *, repo_type=None, include_pull_requests=False, token=None):
        assert repo_type == "dataset"
        repo = self.repo(repo_id)
        return GitRefs(
            branches=[GitRefInfo(name="main", ref="refs/heads/main", target_commit=repo["commits"][-1]["oid"])],
            converts=[],
            tags=[GitRefInfo(name=t, ref=f"refs/tags/{t}", target_commit=oid) for t, oid in repo["tags"].items()],
        )

    def list_repo_commits(self, repo_id, *, repo_type=None, token=None, revision=None, formatted=False):
        assert repo_type == "dataset"
        repo = self.repo(repo_id)
        target = self._resolve(repo, revision)
        history = repo["commits"][: repo["commits"].index(target) + 1]
        when = datetime(2025, 1, 1, tzinfo=timezone.utc)
        return [
            GitCommitInfo(
                commit_id=c["oid"],
                authors=["someone"],
                created_at=when,
                title=c["title"],
                message=c["message"],
                formatted_title=None,
                formatted_message=None,
            )
            for c in reversed(history)
        ]

    def list_repo_tree(self, repo_id, path_in_repo=None, *, recursive=False, expand=False, revision=None, **kw):
        assert kw.get("repo_type") == "dataset" and recursive
        files = self._resolve(self.repo(repo_id), revision)["files"]
        folders = sorted({"/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)})
        for folder in folders:
            yield RepoFolder(path=folder, oid=hashlib.sha1(folder.encode()).hexdigest())
        for path, data in sorted(files.items()):
            if path.endswith(".parquet"):
                sha = hashlib.sha256(data).hexdigest()
                pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha}\nsize {len(data)}\n".encode()
                lfs = {"size": len(data), "oid": sha, "pointerSize": len(pointer)}
                yield RepoFile(path=path, size=len(data), oid=git_blob_sha1(pointer), lfs=lfs)
            else:
                yield RepoFile(path=path, size=len(data), oid=git_blob_sha1(data))

    def create_commit(self, repo_id, operations, *, commit_message, commit_description=None, **kw):
        assert kw.get("repo_type") == "dataset" and kw.get("revision") == "main"
        repo = self.repo(repo_id)
        if kw.get("parent_commit") not in (None, repo["commits"][-1]["oid"]):
            raise HfHubHTTPError("412 Precondition Failed: parent commit is not the head", response=hub_response(412))
        ops = list(operations)
        self.writes.append(("create_commit", {"repo_id": repo_id, "operations": ops, "title": commit_message}))
        files = dict(repo["commits"][-1]["files"])
        for op in ops:
            if isinstance(op, CommitOperationAdd):
                files[op.path_in_repo] = Path(op.path_or_fileobj).read_bytes()
            elif isinstance(op, CommitOperationDelete):
                del files[op.path_in_repo]
        oid = self.push(repo_id, files, commit_message, commit_description or "")
        url = f"https://huggingface.co/datasets/{repo_id}/commit/{oid}"
        return CommitInfo(commit_url=url, commit_message=commit_message, commit_description="", oid=oid)

    def create_tag(self, repo_id, *, tag, tag_message=None, revision=None, repo_type=None, exist_ok=False, **kw):
        assert repo_type == "dataset"
        repo = self.repo(repo_id)
        self.writes.append(("create_tag", {"repo_id": repo_id, "tag": tag, "revision": revision}))
        if tag in repo["tags"]:
            raise HfHubHTTPError("409 Conflict: tag exists", response=hub_response(409, "POST"))
        repo["tags"][tag] = self._resolve(repo, revision)["oid"]
