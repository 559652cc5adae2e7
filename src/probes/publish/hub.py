"""The Hub side of a publish: one dataset repo, every call's error scrubbed of the token.

The token is whatever huggingface_hub finds (login or HF_TOKEN), never a flag; errors are
re-raised as `HubError` with every known token masked, `from None` (package docstring).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from promptgen.core.errors import ProbeError
from promptgen.core.secrets import known_secrets, scrub

from .plan import RemoteFile

REPO_TYPE = "dataset"
BRANCH = "main"


class HubError(ProbeError):
    """A Hugging Face Hub call failed; the message is already scrubbed of the token."""


class RepoNotFound(HubError):
    """The repo does not exist (or is private and the token cannot see it)."""


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
    def create_commit(
        self,
        repo_id: str,
        operations: Any,
        *,
        commit_message: str,
        commit_description: str | None = ...,
        repo_type: str | None = ...,
        revision: str | None = ...,
        parent_commit: str | None = ...,
    ) -> Any: ...
    def create_tag(
        self,
        repo_id: str,
        *,
        tag: str,
        tag_message: str | None = ...,
        revision: str | None = ...,
        repo_type: str | None = ...,
        exist_ok: bool = ...,
    ) -> Any: ...


def make_api() -> HubApi:
    """The real client; the token is whatever huggingface_hub finds (login or HF_TOKEN)."""
    from huggingface_hub import HfApi

    return HfApi()


class Hub:
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
class RemoteRefs:
    """What the repo's refs say: whether it exists, its branch head and its tags."""

    exists: bool
    head: str | None  # commit id of the branch head
    tags: dict[str, str]  # tag -> commit id


def read_refs(hub: Hub) -> RemoteRefs:
    """The repo's refs; a repo that does not exist (or cannot be seen) has none."""
    try:
        refs = hub.refs()
    except RepoNotFound:
        return RemoteRefs(False, None, {})
    head = next((b.target_commit for b in refs.branches if b.name == BRANCH), None)
    return RemoteRefs(True, head, {t.name: t.target_commit for t in refs.tags})
