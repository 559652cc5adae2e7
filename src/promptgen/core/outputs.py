"""Where a command may write: one guard that every command runs on its output target before any work.

`build`, `curate-pairs`, `rewrite`, `run`, `analyze`, `demo` and `plan --json` each describe their
output (an `Output`: what it is, how to recognise one this command wrote before) and call
`check_output` first. Refused, as one `OutputError` line naming the flag and the path, and
before anything is read, computed or written:

- an empty path: `--out ""` means the current folder, where `run` would write its card over
  ./README.md and `analyze --overwrite` would replace the folder;
- a file where a folder is meant, a folder where a file is meant;
- an existing folder (or file) the command did not write: another command's output (a prompt
  dataset, a results folder) or anything else that is not empty. `--overwrite` only ever
  replaces the command's own earlier output, never a foreign one;
- a target that is, holds, or lies inside one of the command's inputs (a report written into
  the results it reads, a plan written into the prompt dataset); inside an input that is only
  read from known files (a `Reference`: sources, a cache, a model, a recipe) is allowed;
- a location where nothing can be created (a read-only folder, a file in the path).

What identifies a command's own output (its marker) is decided by the command's module and
never changes what the command publishes: a results folder holds only README.md,
results_manifest.json and data/; a demo folder only its datasets/, results/, reports/,
synthetic-sources/ and report.html; a plan file is a JSON object with the plan's keys. An
output that `--overwrite` replaces as a whole (a prompt dataset folder, a report, an export)
is judged by every entry in it, hidden ones and subfolders included (`Layout`): only the files
its command wrote, as its build manifest or its `INVENTORY` lists them, so a `.git` folder or
a user's file in it is never deleted.

A write that fails later all the same (the disk fills up) is turned into one line by
`files.writing`, which every writer goes through.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from .errors import OutputError
from .layout import BUILD_MANIFEST, RESULTS_MANIFEST

#: files by which the guard names another command's output in a refusal
_KNOWN = ((BUILD_MANIFEST, "a prompt dataset folder"), (RESULTS_MANIFEST, "a results folder"))

#: an input of a command: (its flag or argument name, its path; a Hub id or None is skipped)
Input = tuple[str, "str | Path | None"]


class Reference(tuple):
    """An input that is only read from known files (sources, a download cache, a model, a recipe).

    An output may lie inside one (`probes build --sources .` writes `./datasets`): nothing the
    command writes there changes what is read. It may not be one, or hold one.
    """

    def __new__(cls, label: str, path: str | Path | None) -> Reference:
        return super().__new__(cls, (label, path))


@dataclass(frozen=True)
class Output:
    """One kind of command output and how to recognise an existing one the command wrote."""

    #: what it is, in messages: "report", "results folder", "plan file"
    kind: str
    #: whether an existing target is this command's own earlier output (its marker)
    owns: Callable[[Path], bool]
    #: a single file (`plan --json`), not a folder
    file: bool = False
    #: True: replaced as a whole (needs --overwrite); False: written into (`run` adds results)
    replaces: bool = True


def visible_entries(folder: Path) -> set[str]:
    """The names in `folder` that are not hidden (staging folders, locks and .gitattributes are)."""
    return {p.name for p in folder.iterdir() if not p.name.startswith(".")}


def holds_only(required: Iterable[str], allowed: Iterable[str]) -> Callable[[Path], bool]:
    """A marker: the folder has every `required` entry and nothing visible beyond `allowed`."""
    required, allowed = frozenset(required), frozenset(allowed)

    def owns(folder: Path) -> bool:
        entries = visible_entries(folder)
        return required <= entries and entries <= (allowed | required)

    return owns


#: the hidden file in which a folder replaced as a whole lists the files its command wrote
#: (`write_inventory`), so that `--overwrite` can tell them from anything added later
INVENTORY = ".probes-files.json"


def write_inventory(folder: Path) -> None:
    """List every file now under `folder` (a staging folder, just before it is swapped into place)."""
    import json

    files = sorted([INVENTORY, *(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())])
    (folder / INVENTORY).write_text(json.dumps({"files": files}, indent=0) + "\n", encoding="utf-8")


def read_inventory(folder: Path) -> list[str] | None:
    """The files a command listed in `folder` (`write_inventory`); None when there is no readable list."""
    import json

    try:
        files = json.loads((folder / INVENTORY).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return [f for f in files if isinstance(f, str)] if isinstance(files, list) else None


@dataclass(frozen=True)
class Layout:
    """The marker of an output that `--overwrite` replaces as a whole: every entry it may hold.

    A folder is the command's own earlier output only when it has every `required` file and
    every entry in it, hidden ones and those in subfolders included, is one the command wrote:
    a `.git` folder, a user's table in `tables/` or a link anywhere make it foreign, since
    replacing it would delete them. What the command wrote is the folder's own list when
    `listed` finds one (its `INVENTORY`, or a build manifest's data files), else any path
    matching `files` or `folders`: `/`-separated patterns, each segment an `fnmatch` pattern
    and `**` any number of segments (folders written before the lists existed).
    """

    required: tuple[str, ...]
    files: tuple[str, ...]
    folders: tuple[str, ...] = ()
    #: the exact files the command wrote there, read from the folder (None: not listed)
    listed: Callable[[Path], list[str] | None] | None = read_inventory

    def __call__(self, folder: Path) -> bool:
        return self.has_required(folder) and self.foreign(folder) is None

    def has_required(self, folder: Path) -> bool:
        return all((folder / name).is_file() for name in self.required)

    def foreign(self, folder: Path) -> str | None:
        """The first entry (a relative path, in name order, shallow first) the command did not write; None if none."""
        listed = self.listed(folder) if self.listed is not None else None
        patterned = lambda rel: any(_matches(rel, p.split("/")) for p in self.folders)  # noqa: E731
        is_file: Callable[[tuple[str, ...]], bool]
        if listed is not None:
            files = {tuple(f.split("/")) for f in listed} | {(name,) for name in self.required}
            folders = {f[:k] for f in files for k in range(1, len(f))}
            is_file = files.__contains__
            # a folder the command makes may stay empty (a report without figures): its pattern allows it,
            # and any file in it must still be listed
            is_folder = lambda rel: rel in folders or patterned(rel)  # noqa: E731
        else:
            is_file = lambda rel: any(_matches(rel, p.split("/")) for p in self.files)  # noqa: E731
            is_folder = patterned
        pending: list[tuple[Path, tuple[str, ...]]] = [(folder, ())]
        while pending:
            here, parts = pending.pop(0)
            with os.scandir(here) as it:
                entries = sorted(it, key=lambda e: e.name)
            for entry in entries:
                rel = (*parts, entry.name)
                if entry.is_symlink():
                    return "/".join(rel)
                if entry.is_dir():
                    if not is_folder(rel):
                        return "/".join(rel) + "/"
                    pending.append((Path(entry.path), rel))
                elif not is_file(rel):
                    return "/".join(rel)
        return None


def _matches(parts: tuple[str, ...], pattern: list[str]) -> bool:
    """`parts` (a relative path's segments) against `pattern`'s segments (`fnmatch` each, `**` any run)."""
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_matches(parts[k:], pattern[1:]) for k in range(len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], pattern[0]) and _matches(parts[1:], pattern[1:])


def output_path(raw: str | os.PathLike[str] | None, flag: str) -> Path:
    """`raw` as a path; an empty one is refused (`Path("")` would silently be the current folder)."""
    if raw is None or not str(raw).strip():
        raise OutputError(f"{flag} is empty; name the folder or file to write")
    return Path(raw).expanduser()


def check_output(
    raw: str | os.PathLike[str] | None,
    output: Output,
    *,
    flag: str = "--out",
    inputs: Iterable[Input] = (),
    overwrite: bool = False,
) -> Path:
    """The target path, after every check of the module docstring; raises `OutputError` otherwise."""
    target = output_path(raw, flag)
    _check_inputs(target, output, flag, inputs)  # first: "is the input X" says more than "exists"
    if target.exists() or target.is_symlink():
        _check_existing(target, output, flag, overwrite)
    _check_writable(target, output, flag)
    return target


def _describe(folder: Path) -> str | None:
    for name, what in _KNOWN:
        if (folder / name).is_file():
            return f"{what} (it has {name})"
    return None


def _check_existing(target: Path, output: Output, flag: str, overwrite: bool) -> None:
    if output.file:
        if target.is_dir():
            raise OutputError(f"{flag} {target} is a folder; name the {output.kind} to write")
        if not output.owns(target):
            raise OutputError(f"{flag} {target} exists and is not a {output.kind}; nothing was replaced")
        return
    if not target.is_dir():
        raise OutputError(f"{flag} {target} exists and is not a folder")
    layout = output.owns if isinstance(output.owns, Layout) else None
    # a folder replaced as a whole is judged by every entry, hidden ones included
    entries = visible_entries(target) if layout is None else set(os.listdir(target))
    if entries and not output.owns(target):
        if layout is not None and layout.has_required(target):
            raise OutputError(
                f"{flag} {target} holds {layout.foreign(target)}, which this command did not write, so it is not a "
                f"{output.kind} of its own: nothing was replaced or deleted; move that out, or write the "
                f"{output.kind} to a new folder"
            )
        what = _describe(target) or f"a folder of other files ({', '.join(sorted(entries)[:3])})"
        raise OutputError(
            f"{flag} {target} is {what}, not a {output.kind} this command wrote; nothing was written: "
            f"write the {output.kind} to a new or empty folder of its own"
        )
    if output.replaces and not overwrite:
        raise OutputError(f"output folder {target} already exists; pass --overwrite to replace it")


def _check_inputs(target: Path, output: Output, flag: str, inputs: Iterable[Input]) -> None:
    here = target.resolve()
    for item in inputs:
        label, path = item
        if path is None or not Path(path).expanduser().exists():
            continue  # a Hub id, or an input another check reports
        source = Path(path).expanduser().resolve()
        if here == source:
            what = _describe(target) if target.is_dir() else None
            relation = f"is {what}: it is" if what else "is"
        elif here.is_relative_to(source):
            if isinstance(item, Reference):
                continue
            relation = "is inside"
        elif source.is_relative_to(here):
            relation = "holds"
        else:
            continue
        raise OutputError(
            f"{flag} {target} {relation} the input {label} {path}; write the {output.kind} elsewhere "
            "(nothing was written)"
        )


def _check_writable(target: Path, output: Output, flag: str) -> None:
    """Create and remove one hidden folder where the first write goes (as root, mode bits say nothing)."""
    start = target if (target.is_dir() and not output.replaces) else target.parent
    ancestor = start
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".probes-write-check-", dir=ancestor))
    except OSError as exc:
        raise OutputError(
            f"{flag} {target}: cannot write the {output.kind} into {ancestor} ({exc.strerror or exc})"
        ) from exc
