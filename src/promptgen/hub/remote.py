"""Read a dataset on the Hub at one commit: the one home of every Hub read of a dataset's files.

A Hub dataset argument names a revision (a branch, a tag or a commit; `main` when none is
given), and a branch moves. Every reader therefore resolves it to a commit once
(`resolve`), then reads the rows (`datasets.load_dataset(..., revision=ref.commit)`), the
build manifest and the card at that commit, so the protocol and fingerprint always describe
the rows that were read, and a results manifest can record what was scored (`HubRef.provenance`).

A file the commit does not have (a 404) is `None`: a dataset without `build_manifest.json`
declares no protocol. Any other failure (auth, a 5xx, no network and nothing cached) is one
`ProbeError` naming the repo, the commit and the file, never a silent default.
With `HF_HUB_OFFLINE=1` the revision is resolved from the Hugging Face cache (`refs/<branch>`),
as `huggingface_hub` itself does.

Tests run these reads against a real Hub server (olah, `tests/hub_server.py`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import ProbeError
from ..core.layout import BUILD_MANIFEST

REPO_TYPE = "dataset"
#: a full commit sha: immutable, so a revision given as one needs no lookup
COMMIT = re.compile(r"[0-9a-f]{40}")
CARD = "README.md"


@dataclass(frozen=True)
class HubRef:
    """A Hub dataset at one commit: `revision` as asked (None: `main`), `commit` what it resolved to."""

    repo_id: str
    revision: str | None
    commit: str

    @property
    def label(self) -> str:
        """`ORG/NAME@<commit 12>` (and the revision asked, when it is not the commit): for messages."""
        asked = "" if self.revision in (None, self.commit) else f" ({self.revision})"
        return f"{self.repo_id}@{self.commit[:12]}{asked}"

    def provenance(self) -> dict[str, Any]:
        """What a results manifest, card or sweep record says of it: repo, revision asked, commit."""
        return {"repo_id": self.repo_id, "revision": self.revision, "commit": self.commit}


def _ref_file(repo_id: str, revision: str) -> Path:
    """Where the Hugging Face cache records the commit of a dataset's revision (`refs/<revision>`)."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE) / f"datasets--{repo_id.replace('/', '--')}" / "refs" / revision


def _remember(repo_id: str, revision: str, commit: str) -> None:
    """Record `revision` -> `commit` in the cache as huggingface_hub does, so an offline run resolves it too."""
    from ..core.files import atomic_write_text

    try:
        path = _ref_file(repo_id, revision)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, commit)
    except OSError:  # a read-only cache: offline runs then need the commit itself
        pass


def _cached_commit(repo_id: str, revision: str) -> str | None:
    """The commit the Hugging Face cache recorded for `revision` of a dataset (`refs/<revision>`), or None."""
    ref = _ref_file(repo_id, revision)
    if not ref.is_file():
        return None
    commit = ref.read_text(encoding="utf-8").strip()
    return commit if COMMIT.fullmatch(commit) else None


def resolve(repo_id: str, revision: str | None, what: str = "prompt dataset") -> HubRef:
    """`repo_id` at `revision` (default `main`) resolved to its commit, once, by huggingface_hub.

    A 40-hex revision is a commit already. A missing repo or revision, no access, or no network
    is one `ProbeError` naming the repo and the revision.
    """
    if revision is not None and COMMIT.fullmatch(revision):
        return HubRef(repo_id, revision, revision)
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError, RevisionNotFoundError

    asked = revision or "main"
    if constants.HF_HUB_OFFLINE:
        commit = _cached_commit(repo_id, asked)
        if commit is None:
            raise ProbeError(
                f"{what} {repo_id}: revision {asked!r} is not in the Hugging Face cache and HF_HUB_OFFLINE is set; "
                "read it once online, or pass --revision with a 40-hex commit that is cached"
            )
        return HubRef(repo_id, revision, commit)
    no_revision = f"{what} {repo_id} has no revision {asked!r} on the Hub (a branch, tag or commit)"
    try:
        sha = HfApi().dataset_info(repo_id, revision=asked).sha
    except RevisionNotFoundError:
        raise ProbeError(no_revision) from None
    except RepositoryNotFoundError:
        if asked != "main" and _exists(repo_id):  # some servers answer an unknown revision as an unknown repo
            raise ProbeError(no_revision) from None
        raise ProbeError(
            f"{what} {repo_id}: no such dataset on the Hub, or no access to it (log in with `hf auth login` or set "
            "HF_TOKEN)"
        ) from None
    except (HfHubHTTPError, OSError, ValueError) as exc:  # ValueError: an id huggingface_hub refuses
        raise ProbeError(f"cannot resolve {what} {repo_id} at revision {asked!r}: {exc}") from None
    if not sha or not COMMIT.fullmatch(sha):
        raise ProbeError(f"the Hub did not say which commit {what} {repo_id} at {asked!r} is (got {sha!r})")
    _remember(repo_id, asked, sha)
    return HubRef(repo_id, revision, sha)


def _exists(repo_id: str) -> bool:
    """Whether the dataset answers at `main`."""
    from huggingface_hub import HfApi

    try:
        HfApi().dataset_info(repo_id, revision="main")
    except Exception:
        return False
    return True


def download(ref: HubRef, filename: str, what: str = "prompt dataset") -> Path | None:
    """The local path of `filename` at `ref.commit` (fetched or cached), or None when the commit has no such file."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import RemoteEntryNotFoundError

    try:
        return Path(hf_hub_download(ref.repo_id, filename, repo_type=REPO_TYPE, revision=ref.commit))
    except RemoteEntryNotFoundError:
        return None
    except Exception as exc:  # auth, 5xx, network, offline and not cached: never a silent "no file"
        raise ProbeError(f"cannot read {filename} of {what} {ref.label}: {_cause(exc)}") from None


def _cause(exc: BaseException) -> str:
    """The HTTP error behind huggingface_hub's "cannot find it in the local cache" (a 500, a 403), else `exc`."""
    from huggingface_hub.errors import HfHubHTTPError

    seen: BaseException | None = exc
    while seen is not None and not isinstance(seen, HfHubHTTPError):
        seen = seen.__cause__ or seen.__context__
    first = str(seen if seen is not None else exc).strip().splitlines()
    return f"{type(seen if seen is not None else exc).__name__}: {first[0] if first else ''}"


def read_json_file(ref: HubRef, filename: str, what: str = "prompt dataset") -> dict[str, Any] | None:
    """A JSON object file at `ref.commit`; None when the commit has none; an error when it is not an object."""
    path = download(ref, filename, what)
    if path is None:
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ProbeError(f"{filename} of {what} {ref.label} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ProbeError(f"{filename} of {what} {ref.label}: expected a JSON object, got {type(value).__name__}")
    return value


def config_data_files(
    ref: HubRef, config: str, built: dict[str, Any], what: str = "prompt dataset"
) -> dict[str, tuple[int, str]]:
    """{path: (size, sha256)} of the files in `data/<config>/` at `ref.commit`, hidden ones left out.

    Each file is fetched into the Hugging Face cache and hashed here: `datasets` reads a Hub
    dataset's data files through that same cache (`hf_hub_download`), so the bytes checked
    against build_manifest.json (`built`) are the bytes then loaded, for plain git blobs and LFS
    files alike, at no second download. The folder is listed at the commit, so a file the
    manifest does not name is seen; offline (`HF_HUB_OFFLINE`) nothing can be listed, and the
    files the manifest names are checked from the cache.
    """
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import EntryNotFoundError
    from huggingface_hub.hf_api import RepoFile

    from ..core.files import sha256_file
    from .read import manifest_data_files

    prefix = f"data/{config}/"
    if constants.HF_HUB_OFFLINE:
        listed = [p for p in manifest_data_files(built, Path(ref.label) / BUILD_MANIFEST) if p.startswith(prefix)]
    else:
        try:
            tree = HfApi().list_repo_tree(
                ref.repo_id, path_in_repo=prefix.rstrip("/"), recursive=True, revision=ref.commit, repo_type=REPO_TYPE
            )
            listed = [entry.path for entry in tree if isinstance(entry, RepoFile)]
        except EntryNotFoundError:  # the commit has no such folder: the manifest check names the missing files
            listed = []
        except Exception as exc:  # auth, 5xx, network: never a silent "no files"
            raise ProbeError(f"cannot list {prefix} of {what} {ref.label}: {_cause(exc)}") from None
    found: dict[str, tuple[int, str]] = {}
    for name in sorted(listed):
        if any(part.startswith(".") for part in name[len(prefix) :].split("/")):
            continue
        path = download(ref, name, what)
        if path is not None:
            found[name] = (path.stat().st_size, sha256_file(path))
    return found


def read_build_manifest(ref: HubRef, what: str = "prompt dataset") -> dict[str, Any] | None:
    """build_manifest.json at the commit (None: the dataset has none, so it declares no protocol)."""
    return read_json_file(ref, BUILD_MANIFEST, what)


def read_card_header(ref: HubRef, what: str = "prompt dataset") -> dict[str, Any]:
    """The YAML header of the card (README.md) at the commit; {} when it has none."""
    from .read import card_header

    path = download(ref, CARD, what)
    return {} if path is None else card_header(path.read_text(encoding="utf-8"))


def config_names(ref: HubRef, what: str = "prompt dataset") -> list[str]:
    """The configs of a Hub dataset at the commit: its card's `configs` (what `datasets` reads them from).

    A card without a `configs` list (not one `probes build` or `probes run` wrote) is asked of
    `datasets`, which infers them from the files.
    """
    listed = read_card_header(ref, what).get("configs")
    if isinstance(listed, list) and listed:
        return sorted(str(c["config_name"]) for c in listed if isinstance(c, dict) and "config_name" in c)
    import datasets

    from ..core.errors import dataset_load_errors

    try:
        return sorted(datasets.get_dataset_config_names(ref.repo_id, revision=ref.commit))
    except dataset_load_errors() as exc:
        raise ProbeError(f"cannot list the configs of {ref.label}: {exc}") from None
