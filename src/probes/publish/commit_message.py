"""What a publish commit says: its title and description, and its `publish-fingerprint:` line read back.

The fingerprint line lets a later publish of the same content skip the tree listing
(package docstring).
"""

from __future__ import annotations

import re
from typing import Any

from .local import LocalFolder
from .plan import PublishPlan

FINGERPRINT_LINE = "publish-fingerprint"
_FINGERPRINT_RE = re.compile(rf"^{FINGERPRINT_LINE}: ([0-9a-f]{{64}})\s*$", re.MULTILINE)


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
