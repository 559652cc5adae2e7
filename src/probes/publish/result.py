"""What a publish did (or, for a dry run, would do), as the CLI shows it: summary lines and the plan table.

Nothing here comes from the token, so nothing here can print it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .local import LocalFolder
from .plan import PublishPlan

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
            out.append(f"{would}commit{done}: {self.title!r} ({human_size(self.plan.upload_bytes)} to upload)")
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


def human_size(n: int) -> str:
    """A byte count as the CLI shows it: `512 B`, `1.5 KiB`, ... up to GiB."""
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
            table.add_row(e.action, e.path, human_size(e.size))
    return table
