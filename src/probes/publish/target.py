"""Where a publish goes: the repo id and the tag, both checked before the folder or the Hub is read.

Prompt folders are tagged `v<version>` from their manifest, result folders only when
`--revision-tag` names a tag (package docstring).
"""

from __future__ import annotations

import re

from promptgen.core.errors import ProbeError
from promptgen.core.layout import BUILD_MANIFEST

from .local import LocalFolder

_TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def check_repo_id(repo_id: str) -> None:
    """`ORG/NAME`, nothing else: refused before the folder is read."""
    if not _REPO_ID_RE.match(repo_id or ""):
        raise ProbeError(f"--repo-id must look like ORG/NAME, got {repo_id!r}")


def resolve_tag(folder: LocalFolder, revision_tag: str | None) -> str | None:
    """The tag this publish creates: `v<version>` for prompts, `--revision-tag` (or none) for results."""
    tag: str | None
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
