"""Publish a Hub-ready folder (DESIGN section 2) to a Hugging Face dataset repo, idempotently.

Two kinds of folder can be published:

- a prompt dataset folder written by `probes build` (has `build_manifest.json` with `name`,
  `version` and `fingerprint`), tagged `v<version>` so that
  `load_dataset("ORG/NAME", CONFIG, revision="v<version>")` gives the local rows;
- a result folder written by `probes run` (has `results_manifest.json`).

Decisions, and why:

- One commit per publish (`HfApi.create_commit`): a version is either fully on the Hub or not
  at all, and the commit id is a single citable revision.
- Content is compared file by file before anything is uploaded, so re-publishing identical
  content makes no commit. The remote tree (`list_repo_tree`, recursive; `expand` is not needed
  because the plain listing already carries the git blob id and the LFS metadata) gives, per
  file, the git blob sha1 (`RepoFile.blob_id`) and, for LFS/Xet files, the sha256 of the content
  (`RepoFile.lfs.sha256`; the blob id of an LFS file is the hash of its pointer, not of the
  content). Local files are hashed both ways in one pass; a file is unchanged when its sha256
  equals the remote LFS sha256, or, for a regular file, when its git blob sha1 equals the
  remote blob id. Which files the Hub stores in LFS is the remote's business (`.gitattributes`),
  so the local side never guesses.
- Every commit records a `publish-fingerprint:` line (sha256 over the sorted (path, sha256) of
  all published files) in its description. When the branch head already carries the local
  fingerprint, the tree listing is skipped. The build manifest's own `fingerprint` is recorded
  too, but is not used for the shortcut: it covers the data, not the dataset card, so a card
  fix must still be publishable under the same build fingerprint.
- Remote files under `data/` that are not in the local folder are deleted in the same commit.
  The folder is the complete, self-describing snapshot (its manifest and card list exactly its
  files), and the cards load data with globs (`data/<config>/test-*.parquet`,
  `data/<config>/*/part-*.parquet`): a stale shard left behind (e.g. `test-00002-of-00003` after
  a rebuild into two shards) would silently be loaded with the new rows. Nothing is lost:
  older commits and tags keep the old files. Files outside `data/` (`.gitattributes`, extra
  docs added on the Hub) are never deleted. A result folder is likewise published as a whole:
  merge workers' parts into one folder (as `probes run --out` does) before publishing.
- Tags: prompt folders are always tagged `v<version>` from the manifest (`--revision-tag` may
  only repeat it; to publish other content, bump the recipe's version). Result folders have no
  version (they grow as runs resume and configs are added), so they get no tag unless
  `--revision-tag` names one, e.g. the snapshot a paper cites. An existing tag is never moved:
  if it holds identical content the publish is a no-op (even when the branch has moved on to a
  newer version, which is not reverted); if it holds other content, that is an error raised
  before anything is written.
- The token comes only from huggingface_hub (`hf auth login` or `HF_TOKEN`), never from a flag
  (flags end up in shell history and job logs). Every Hub error is re-raised as a `ProbeError`
  whose text has the token (and anything shaped like an HF token) replaced by `***`, raised
  `from None` so the original text is not printed as the cause either.
- Strict about the folder: only the files its format defines are published (prompts: README.md,
  build_manifest.json, data/<config>/test-*.parquet as listed in the manifest; results: README.md,
  results_manifest.json, data/<config>/<key>/key.json and the runner's part files), anything else
  and every symlink is refused by name (a link would upload what it points to). A result
  folder's parts are all read first (`results_check`): readable, one row per key and id, rows
  matching key.json, manifest counts matching the parts, columns exactly the result schema. Then
  every file's content (`content_check`): a token or a home-folder path anywhere (card, JSON
  value, any string of any parquet column) is refused, named by file and line, JSON path or row
  id and column. `--dry-run` prints these checks.
- `--dry-run` only reads. When the Hub cannot be read (offline, no such repo, no access) it
  says so and plans against an empty repo, i.e. every file is an "add".
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from promptgen.core.errors import ProbeError
from promptgen.core.layout import BUILD_MANIFEST
from promptgen.core.secrets import known_secrets, scrub
from promptgen.hub.folder import check_data_files
from runners.results import MANIFEST_NAME

CARD = "README.md"
DATA_PREFIX = "data/"
REPO_TYPE = "dataset"
BRANCH = "main"
#: create_commit accepts at most 25k LFS files per commit; fail before uploading anything
MAX_FILES_PER_COMMIT = 25_000
FINGERPRINT_LINE = "publish-fingerprint"
_FINGERPRINT_RE = re.compile(rf"^{FINGERPRINT_LINE}: ([0-9a-f]{{64}})\s*$", re.MULTILINE)
_TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_CHUNK = 1 << 20

_T = TypeVar("_T")
Kind = Literal["prompt", "results"]
Action = Literal["add", "update", "unchanged", "delete"]


class HubError(ProbeError):
    """A Hugging Face Hub call failed; the message is already scrubbed of the token."""


class RepoNotFound(HubError):
    """The repo does not exist (or is private and the token cannot see it)."""


# --------------------------------------------------------------------------- local side


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
    paths, links, odd = _walk(root)
    problems = _entry_problems(root, links, odd)
    if problems:
        raise ProbeError(_refusal(root, problems, "replace each link by the file itself, or move it out"))
    found = []
    for rel in paths:
        size, sha256, sha1 = hash_file(root / rel)
        found.append(LocalFile(rel, size, sha256, sha1, root / rel))
    return tuple(found)


def _entry_problems(root: Path, links: Iterable[str], odd: Iterable[str]) -> list[str]:
    problems = [f"symlink {p} (-> {os.readlink(root / p)})" for p in links]
    return problems + [f"not a regular file: {p}" for p in odd]


def _walk(root: Path) -> tuple[list[str], list[str], list[str]]:
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


def _refusal(root: Path, problems: list[str], fix: str) -> str:
    """One line naming every problem (the first 20, then a count)."""
    shown = "; ".join(problems[:20]) + (f"; and {len(problems) - 20} more" if len(problems) > 20 else "")
    return f"{root}: not published, {len(problems)} problem(s): {shown}. Nothing was uploaded; {fix}"


#: the only files a prompt dataset folder has (`probes build`, DESIGN section 2)
PROMPT_FILE_RE = re.compile(r"^(README\.md|build_manifest\.json|data/[^/]+/test-[0-9]{5}-of-[0-9]{5}\.parquet)$")
#: the only files of a result folder outside its key folders (`probes run`)
RESULTS_TOP_FILES = (CARD, MANIFEST_NAME)
KEY_FILE = "key.json"


def _unknown_files(kind: Kind, root: Path, paths: Iterable[str]) -> list[str]:
    """Files that the folder's format does not define: refused rather than uploaded unasked."""
    from runners.results import part_files

    unknown = []
    part_names: dict[str, set[str]] = {}
    for rel in paths:
        if kind == "prompt":
            if not PROMPT_FILE_RE.match(rel):
                unknown.append(rel)
            continue
        parts = rel.split("/")
        if len(parts) == 1 and rel in RESULTS_TOP_FILES:
            continue
        if len(parts) == 4 and parts[0] == "data":
            key_dir = "/".join(parts[:3])
            if key_dir not in part_names:
                part_names[key_dir] = {p.name for p in part_files(root / key_dir)}
            if parts[3] == KEY_FILE or parts[3] in part_names[key_dir]:
                continue
        unknown.append(rel)
    return [f"not part of a {kind} folder: {rel}" for rel in unknown]


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProbeError(f"{path}: cannot be read as JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ProbeError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _check_prompt_files(manifest_path: Path, manifest: Mapping[str, Any], files: Iterable[LocalFile]) -> None:
    """The data files must be exactly the manifest's, byte for byte (`promptgen.hub.folder.check_data_files`).

    Publishing a folder whose parquet files were edited or mixed with another build would put
    rows on the Hub that the fingerprint and the card do not describe.
    """
    found = {f.path: (f.size, f.sha256) for f in files if f.path.startswith(DATA_PREFIX)}
    check_data_files(manifest_path.parent, manifest, found)


def inspect_folder(local_dir: Path | str) -> LocalFolder:
    """Check that `local_dir` is a complete Hub-ready folder of a known kind and hash its files."""
    root = Path(local_dir)
    if not root.exists():
        raise ProbeError(f"{root}: no such folder (give a folder written by `probes build` or `probes run`)")
    if not root.is_dir():
        raise ProbeError(f"{root} is not a folder")
    has_build = (root / BUILD_MANIFEST).is_file()
    has_results = (root / MANIFEST_NAME).is_file()
    if has_build and has_results:
        raise ProbeError(f"{root} has both {BUILD_MANIFEST} and {MANIFEST_NAME}; publish prompts and results apart")
    if not has_build and not has_results:
        raise ProbeError(
            f"{root} is neither a prompt dataset folder (no {BUILD_MANIFEST}; written by `probes build`) "
            f"nor a result folder (no {MANIFEST_NAME}; written by `probes run`)"
        )
    if not (root / CARD).is_file():
        raise ProbeError(f"{root} has no {CARD} (the dataset card with the `configs:` the Hub loads); not Hub-ready")
    kind: Kind = "prompt" if has_build else "results"
    paths, links, odd = _walk(root)
    problems = _entry_problems(root, links, odd) + _unknown_files(kind, root, paths)
    if problems:
        fix = "publish only what the folder's format defines: move other files out, replace links by files"
        raise ProbeError(_refusal(root, problems, fix))
    files = scan_files(root)
    if not any(f.path.startswith(DATA_PREFIX) for f in files):
        raise ProbeError(f"{root} has no data files under {DATA_PREFIX}")
    if has_build:
        path = root / BUILD_MANIFEST
        manifest = _read_json(path)
        for key in ("name", "version", "fingerprint"):
            if not isinstance(manifest.get(key), str) or not manifest[key]:
                raise ProbeError(f"{path}: missing or empty `{key}`; rebuild the folder with `probes build`")
        _check_prompt_files(path, manifest, files)
        _refuse_leaks(root, files)
        checks = (
            f"checked: {len(files)} files, all defined by the prompt dataset format, none a symlink",
            f"checked: every data file matches {BUILD_MANIFEST} (sha256)",
            LEAK_CHECK_LINE,
        )
        name, version, fingerprint = manifest["name"], manifest["version"], manifest["fingerprint"]
        return LocalFolder(root, "prompt", name, version, fingerprint, files, checks)
    from probes.results_check import validate_results

    report = validate_results(root, _read_json(root / MANIFEST_NAME))
    if report.problems:
        raise ProbeError(_refusal(root, report.problems, "fix or rerun the affected configs with `probes run`"))
    _refuse_leaks(root, files)
    checks = (
        f"checked: {len(files)} files, all defined by the result folder format, none a symlink",
        *report.lines(),
        LEAK_CHECK_LINE,
    )
    return LocalFolder(root, "results", root.resolve().name, None, None, files, checks)


LEAK_CHECK_LINE = (
    "checked: no token or home-folder path in the card, any JSON value or any string of any parquet column"
)


def _refuse_leaks(root: Path, files: Iterable[LocalFile]) -> None:
    """Refuse content that must not go public (`content_check`): tokens and private paths, named by place."""
    from probes.content_check import scan_folder

    problems = scan_folder(root, [f.path for f in files])
    if problems:
        fix = "remove them from the files (rebuild or rerun without them); a published file stays in the repo's history"
        raise ProbeError(_refusal(root, problems, fix))


def resolve_tag(folder: LocalFolder, revision_tag: str | None) -> str | None:
    """The tag this publish creates: `v<version>` for prompts, `--revision-tag` (or none) for results."""
    if folder.kind == "prompt":
        tag = f"v{folder.version}"
        if revision_tag is not None and revision_tag != tag:
            raise ProbeError(
                f"prompt datasets are tagged v<version> from {BUILD_MANIFEST} ({tag}); --revision-tag "
                f"{revision_tag!r} differs. To publish other content, bump `version` in the recipe and rebuild."
            )
    else:
        tag = revision_tag
    if tag is not None and (not _TAG_RE.match(tag) or tag.endswith(".lock") or ".." in tag):
        raise ProbeError(f"invalid tag {tag!r}: use letters, digits, '.', '_' and '-' (e.g. v1.0.0)")
    return tag


# --------------------------------------------------------------------------- planning (pure)


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


def commit_text(local: LocalFolder, plan: PublishPlan, tag: str | None, message: str | None) -> tuple[str, str]:
    """(title, description) of the commit. The description always carries the publish fingerprint."""
    if message:
        title = message.strip().splitlines()[0]
    elif local.kind == "prompt":
        title = f"Publish {local.name} {local.version}"
    else:
        title = f"Publish results {local.name}"
    lines = [f"Published with `probes publish` from a {local.kind} folder: {plan.summary()}.", ""]
    if message and len(message.strip().splitlines()) > 1:
        lines[1:1] = ["", *message.strip().splitlines()[1:]]
    lines.append(f"{FINGERPRINT_LINE}: {local.fingerprint}")
    if local.build_fingerprint:
        lines.append(f"build-fingerprint: {local.build_fingerprint}")
    if local.version:
        lines.append(f"version: {local.version}")
    if tag:
        lines.append(f"tag: {tag}")
    return title, "\n".join(lines) + "\n"


def fingerprint_of_commit(commit: Any) -> str | None:
    """The publish fingerprint recorded in a commit (huggingface_hub `GitCommitInfo`), if any."""
    text = "\n".join(str(getattr(commit, name, None) or "") for name in ("title", "message"))
    m = _FINGERPRINT_RE.search(text)
    return m.group(1) if m else None


# --------------------------------------------------------------------------- token hygiene


def _known_tokens(api: Any) -> list[str]:
    """The api's own token, then every token `promptgen.core.secrets` knows (`HF_TOKEN`, the saved login).

    All of them are scrubbed, whichever one a request actually used. Read from the environment
    and the token files only: `huggingface_hub.get_token()` may make a network exchange.
    """
    own = getattr(api, "token", None)
    tokens = [own] if isinstance(own, str) and own else []
    return [*tokens, *(t for t in known_secrets() if t not in tokens)]


def _hint(exc: BaseException) -> str:
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if status in (401, 403):
        return " Log in with `hf auth login` or set HF_TOKEN to a token with write access to the repo."
    if status == 412:
        return " The repo changed while publishing; run the command again."
    return ""


# --------------------------------------------------------------------------- I/O


class HubApi(Protocol):
    """The part of `huggingface_hub.HfApi` that publishing uses (tests pass an in-memory fake)."""

    def list_repo_refs(self, repo_id: str, *, repo_type: str | None = ...) -> Any: ...
    def list_repo_commits(self, repo_id: str, *, repo_type: str | None = ..., revision: str | None = ...) -> Any: ...
    def list_repo_tree(
        self, repo_id: str, *, recursive: bool = ..., revision: str | None = ..., repo_type: str | None = ...
    ) -> Any: ...
    def create_repo(
        self, repo_id: str, *, private: bool | None = ..., repo_type: str | None = ..., exist_ok: bool = ...
    ) -> Any: ...
    def create_commit(self, repo_id: str, operations: Any, **kwargs: Any) -> Any: ...
    def create_tag(self, repo_id: str, *, tag: str, **kwargs: Any) -> Any: ...


def make_api() -> HubApi:
    """The real client; the token is whatever huggingface_hub finds (login or HF_TOKEN)."""
    from huggingface_hub import HfApi

    return HfApi()


class _Hub:
    """Thin wrapper: every call is made with repo_type=dataset and its errors are scrubbed."""

    def __init__(self, api: HubApi, repo_id: str) -> None:
        self.api = api
        self.repo_id = repo_id
        self.tokens = _known_tokens(api)

    @contextmanager
    def _call(self, action: str) -> Iterator[None]:
        try:
            yield
        except ProbeError:
            raise
        except Exception as exc:
            from huggingface_hub.errors import RepositoryNotFoundError

            text = scrub(
                f"{action} {self.repo_id} failed: {type(exc).__name__}: {exc}", [*self.tokens, *known_secrets()]
            )
            cls = RepoNotFound if isinstance(exc, RepositoryNotFoundError) else HubError
            # `from None`: the original exception's text is unscrubbed and must not be printed as the cause
            raise cls(" ".join(text.split()) + _hint(exc)) from None

    def refs(self) -> Any:
        with self._call("reading the refs of"):
            return self.api.list_repo_refs(self.repo_id, repo_type=REPO_TYPE)

    def head_commit(self, revision: str) -> Any:
        with self._call("reading the commits of"):
            commits = self.api.list_repo_commits(self.repo_id, repo_type=REPO_TYPE, revision=revision)
            return next(iter(commits), None)

    def tree(self, revision: str) -> list[RemoteFile]:
        with self._call("listing the files of"):
            entries = self.api.list_repo_tree(self.repo_id, recursive=True, revision=revision, repo_type=REPO_TYPE)
            return [rf for e in entries if (rf := RemoteFile.from_entry(e)) is not None]

    def create_repo(self, private: bool) -> None:
        with self._call("creating"):
            self.api.create_repo(self.repo_id, repo_type=REPO_TYPE, private=private or None, exist_ok=True)

    def commit(self, operations: list[Any], title: str, description: str, parent: str | None) -> Any:
        with self._call("committing to"):
            return self.api.create_commit(
                self.repo_id,
                operations,
                commit_message=title,
                commit_description=description,
                repo_type=REPO_TYPE,
                revision=BRANCH,
                parent_commit=parent,
            )

    def tag(self, tag: str, revision: str, message: str) -> None:
        with self._call(f"creating tag {tag} on"):
            self.api.create_tag(
                self.repo_id, tag=tag, tag_message=message, revision=revision, repo_type=REPO_TYPE, exist_ok=False
            )


@dataclass(frozen=True)
class _Remote:
    exists: bool
    head: str | None  # commit id of the branch head
    tags: dict[str, str]  # tag -> commit id


def _read_refs(hub: _Hub) -> _Remote:
    try:
        refs = hub.refs()
    except RepoNotFound:
        return _Remote(False, None, {})
    head = next((b.target_commit for b in refs.branches if b.name == BRANCH), None)
    return _Remote(True, head, {t.name: t.target_commit for t in refs.tags})


def _plan_against(hub: _Hub, local: LocalFolder, commit: str | None) -> PublishPlan:
    """Plan against one remote commit, skipping the tree listing when it carries our fingerprint."""
    if commit is None:
        return plan_publish(local, [])
    head = hub.head_commit(commit)
    if head is not None and fingerprint_of_commit(head) == local.fingerprint:
        return identical_plan(local)
    return plan_publish(local, hub.tree(commit))


TagAction = Literal["create", "exists", "none"]


@dataclass
class PublishResult:
    """What publish did (or, for a dry run, would do)."""

    repo_id: str
    local: LocalFolder
    plan: PublishPlan
    title: str
    description: str
    tag: str | None
    tag_action: TagAction
    dry_run: bool
    will_commit: bool
    commit_id: str | None = None
    commit_url: str | None = None
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """Human summary for the CLI (never contains the token: nothing here comes from it)."""
        would = "would " if self.dry_run else ""
        out = list(self.local.checks) if self.dry_run else []
        out.append(f"{self.local.kind} folder {self.local.root} -> dataset repo {self.repo_id}: {self.plan.summary()}")
        if self.will_commit:
            done = "" if self.dry_run or not self.commit_id else f" {self.commit_id[:12]}"
            out.append(f"{would}commit{done}: {self.title!r} ({_human(self.plan.upload_bytes)} to upload)")
            if self.dry_run:
                out.extend(f"    {line}" for line in self.description.rstrip().splitlines())
            if self.commit_url:
                out.append(self.commit_url)
        else:
            out.append("no commit: the repo already holds this content")
        if self.tag_action == "create":
            out.append(f"{would}create tag {self.tag}")
        elif self.tag_action == "exists":
            out.append(f"tag {self.tag} already holds this content")
        return out


def publish(
    local_dir: Path | str,
    repo_id: str,
    *,
    api: HubApi | None = None,
    revision_tag: str | None = None,
    private: bool = False,
    dry_run: bool = False,
    message: str | None = None,
) -> PublishResult:
    """Upload a Hub-ready folder to `repo_id` in one commit, tag it, and make no commit if nothing changed.

    `api` is an `HfApi`-like object (default: a new `HfApi()`). A dry run only reads from it and
    tolerates any read failure (offline, no such repo, no access) by planning against an empty repo.
    """
    if not _REPO_ID_RE.match(repo_id or ""):
        raise ProbeError(f"--repo-id must look like ORG/NAME, got {repo_id!r}")
    local = inspect_folder(local_dir)
    tag = resolve_tag(local, revision_tag)
    hub = _Hub(api if api is not None else make_api(), repo_id)
    if not dry_run and not hub.tokens:
        raise ProbeError("no Hugging Face token: log in with `hf auth login` or set HF_TOKEN (never pass it as a flag)")
    notes: list[str] = []

    def tolerant(read: Callable[[], _T], fallback: _T, what: str) -> _T:
        # a dry run must work offline: a failed read becomes a note, a real publish stops
        try:
            return read()
        except HubError as exc:
            if not dry_run:
                raise
            notes.append(f"could not read the repo's {what} ({exc}); planning against an empty repo")
            return fallback

    remote = tolerant(lambda: _read_refs(hub), _Remote(False, None, {}), "refs")
    if not remote.exists and not notes:
        verb = "would be" if dry_run else "is"
        notes.append(f"{repo_id} does not exist yet (or is not visible with this token); it {verb} created")
    if private and remote.exists:
        notes.append("--private only applies when the repo is created; the existing repo's visibility is unchanged")

    def result(plan: PublishPlan, tag_action: TagAction, will_commit: bool) -> PublishResult:
        title, description = commit_text(local, plan, tag, message)
        return PublishResult(
            repo_id, local, plan, title, description, tag, tag_action, dry_run, will_commit, notes=notes
        )

    # An existing tag decides between a no-op and an error, before anything is written.
    if tag is not None and tag in remote.tags:
        tagged = remote.tags[tag]
        tag_plan = tolerant(lambda: _plan_against(hub, local, tagged), None, "files")
        if tag_plan is not None:
            if tag_plan.changed:
                fix = "bump `version` in the recipe and rebuild" if local.kind == "prompt" else "choose another tag"
                raise ProbeError(
                    f"tag {tag} already exists on {repo_id} (commit {tagged[:12]}) with other content "
                    f"({tag_plan.summary()}); tags are never moved: {fix}"
                )
            if remote.head != tagged:
                notes.append(f"{BRANCH} has moved on since {tag}; it is left as it is")
            return result(tag_plan, "exists", False)

    maybe_plan = tolerant(lambda: _plan_against(hub, local, remote.head), None, "files")
    plan = maybe_plan if maybe_plan is not None else plan_publish(local, [])
    tag_action: TagAction = "create" if tag is not None else "none"
    n_ops = plan.count("add") + plan.count("update") + plan.count("delete")
    if n_ops > MAX_FILES_PER_COMMIT:
        raise ProbeError(
            f"{n_ops} files to change in one commit; the Hub accepts at most {MAX_FILES_PER_COMMIT}. "
            "Merge the result parts into fewer files before publishing."
        )
    if dry_run:
        return result(plan, tag_action, plan.changed)

    if not remote.exists:
        hub.create_repo(private)
        remote = _read_refs(hub)
        # a new repo starts with an initial commit (.gitattributes): plan against it exactly
        plan = _plan_against(hub, local, remote.head)
    res = result(plan, tag_action, plan.changed)
    target = remote.head
    if plan.changed:
        # parent_commit: if someone pushed since we read the tree, the commit fails instead of mixing
        info = hub.commit(_operations(local, plan), res.title, res.description, remote.head)
        target = getattr(info, "oid", None) or str(info)
        res.commit_id = target
        res.commit_url = getattr(info, "commit_url", None)
    if tag is not None:
        if target is None:
            raise ProbeError(f"{repo_id} has no {BRANCH} branch to tag")
        what = f"{local.name} {local.version}" if local.kind == "prompt" else local.name
        hub.tag(tag, target, f"{what} ({FINGERPRINT_LINE} {local.fingerprint})")
    return res


def _operations(local: LocalFolder, plan: PublishPlan) -> list[Any]:
    """CommitOperationAdd for new and changed files, CommitOperationDelete for stale data files."""
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    sources = {f.path: f.source for f in local.files}
    ops: list[Any] = []
    for e in plan.entries:
        if e.action in ("add", "update"):
            ops.append(CommitOperationAdd(path_in_repo=e.path, path_or_fileobj=str(sources[e.path])))
        elif e.action == "delete":
            ops.append(CommitOperationDelete(path_in_repo=e.path, is_folder=False))
    return ops


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def plan_table(result: PublishResult, *, all_files: bool) -> Any:
    """A rich table of the plan: every file for a dry run, only the changes otherwise."""
    from rich.table import Table

    table = Table(title=f"{'dry run: ' if result.dry_run else ''}{result.repo_id}")
    table.add_column("action")
    table.add_column("path", overflow="fold")
    table.add_column("size", justify="right")
    for e in result.plan.entries:
        if all_files or e.action != "unchanged":
            table.add_row(e.action, e.path, _human(e.size))
    return table
