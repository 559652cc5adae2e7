"""The publish itself: read the repo's refs, plan against them, then one commit and the tag, or nothing.

An existing tag decides between a no-op and an error before anything is written; a dry run
only reads and plans against an empty repo when the Hub cannot be read (package docstring).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from promptgen.core.errors import ProbeError

from . import hub as hub_api
from .commit_message import FINGERPRINT_LINE, commit_text, fingerprint_of_commit
from .folder import inspect_folder
from .hub import BRANCH, Hub, HubApi, HubError, RemoteRefs, read_refs
from .local import LocalFolder
from .plan import PublishPlan, identical_plan, plan_publish
from .result import PublishResult, TagAction
from .target import check_repo_id, resolve_tag

#: create_commit accepts at most 25k LFS files per commit; fail before uploading anything
MAX_FILES_PER_COMMIT = 25_000

_T = TypeVar("_T")


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
    check_repo_id(repo_id)
    local = inspect_folder(local_dir)
    tag = resolve_tag(local, revision_tag)
    # `hub_api.make_api`, looked up at call time: a test substitutes the client there
    hub = Hub(api if api is not None else hub_api.make_api(), repo_id)
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

    remote = tolerant(lambda: read_refs(hub), RemoteRefs(False, None, {}), "refs")
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
        remote = read_refs(hub)
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


def _plan_against(hub: Hub, local: LocalFolder, commit: str | None) -> PublishPlan:
    """Plan against one remote commit, skipping the tree listing when it carries our fingerprint."""
    if commit is None:
        return plan_publish(local, [])
    head = hub.head_commit(commit)
    if head is not None and fingerprint_of_commit(head) == local.fingerprint:
        return identical_plan(local)
    return plan_publish(local, hub.tree(commit))
