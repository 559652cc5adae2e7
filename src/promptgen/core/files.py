"""Files written so that nothing is ever half there: atomic files, staged folders, and their hashes.

Every writer in the project goes through here: a dataset folder and a report are built in a
staging folder beside the target and renamed into place (`make_staging_dir`,
`swap_into_place`); a single file (a result part, a manifest, a card) is written to a temporary
file and renamed over the old one (`atomic_write`). So an interrupted process leaves the old
output or the new one, never a mix, and a reader never sees a partial file. A write that fails
(disk full, quota, a read-only folder) becomes one `OutputError` naming what could not be
written (`writing`); what the target may be is checked before any work (`promptgen.core.outputs`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .errors import OutputError, ProbeError

log = logging.getLogger(__name__)

_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_json(path: Path, *, hint: str = "") -> Any:
    """A JSON file's value, or one `ProbeError` line naming the file (unreadable, not UTF-8, not JSON).

    `hint` says what to do about invalid JSON (e.g. "rebuild with `probes build`"); the shape of
    the value is the caller's to check.
    """
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProbeError(f"{path}: cannot be read ({exc})") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProbeError(f"{path}: not valid JSON ({exc}){'; ' + hint if hint else ''}") from exc


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def writing(what: str, target: Path) -> Iterator[None]:
    """Turn an `OSError` of the writes inside (disk full, quota, read-only, a folder in the way) into one line.

    pyarrow, pandas and matplotlib raise their own OSErrors, often naming a temporary file or
    nothing at all; the message names the output the user asked for instead. Callers clean up
    their temporary file or staging folder first, so nothing partial is left.
    """
    try:
        yield
    except OSError as exc:
        raise OutputError(f"cannot write {what} {target}: {exc.strerror or exc}") from exc


def atomic_write(path: Path, write: Callable[[str], object]) -> None:
    """Call `write(tmp)` on a temporary file beside `path`, then rename it over `path`."""
    path = Path(path)
    with writing("the file", path):
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        try:
            write(tmp)
            # mkstemp makes the file private (0600); outputs are meant to be shared and
            # published, so it gets the permissions any other new file would (0666 less the umask)
            os.chmod(tmp, 0o666 & ~_umask())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def atomic_write_text(path: Path, text: str) -> None:
    """`text` as UTF-8 with `\\n` line ends, atomically."""

    def write(tmp: str) -> None:
        Path(tmp).write_text(text, encoding="utf-8", newline="\n")

    atomic_write(Path(path), write)


def write_text(path: Path, text: str) -> None:
    """UTF-8 with `\\n` line ends (inside a staging folder, which is itself renamed into place)."""
    path.write_text(text, encoding="utf-8", newline="\n")


# ----------------------------------------------------------------------------- staging folders


#: a staging folder: `.<name>.pid<pid>@<host tag>.<random>.tmp`; the pid and a hash of the host
#: name say which process owns it, so a later build can tell a dead build's leftovers from a live one
_STAGING_RE = re.compile(r"^\.(?P<name>.+)\.pid(?P<pid>[0-9]+)@(?P<host>[0-9a-f]{8})\.[A-Za-z0-9_]+\.tmp$")
#: staging folders named before the pid was recorded: `.<name>.<random>.tmp` (tempfile's 8 characters)
_LEGACY_STAGING_RE = re.compile(r"^\.(?P<name>.+)\.[a-z0-9_]{8}\.tmp$")
#: a staging folder whose owner cannot be checked (another host, or no pid recorded) is removed
#: only when untouched for this long: far longer than any build, so a live one is never removed
STALE_UNCHECKABLE_SECONDS = 48 * 3600


def _host_tag() -> str:
    """8 hex digits naming this machine (a pid only means something on its own host)."""
    return hashlib.sha256(socket.gethostname().encode("utf-8")).hexdigest()[:8]


def _pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this host (signal 0 checks without signalling)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    except (OverflowError, ValueError):  # not a possible pid
        return False
    return True


def clean_stale_staging(parent: Path, name: str) -> list[Path]:
    """Remove the staging folders that killed builds left in `parent`; return what was removed.

    A build killed by SIGKILL (or a lost node) cannot clean up after itself, and its
    `.<name>.*.tmp` folder (possibly gigabytes) would stay forever. Removed here: staging
    folders of any dataset whose owning process, recorded in the folder name, no longer exists
    on this host; and, when the owner cannot be checked (written on another host sharing the
    folder, or by a version that did not record the pid), only `name`'s own folders untouched
    for `STALE_UNCHECKABLE_SECONDS`. A concurrent build's folder is never removed: its process
    is alive. A reused pid only keeps a stale folder longer, never removes a live one.
    """
    parent = Path(parent)
    if not parent.is_dir():
        return []
    host, now, removed = _host_tag(), time.time(), []
    for entry in parent.iterdir():
        if entry.is_symlink() or not entry.is_dir():
            continue
        owned = _STAGING_RE.match(entry.name)
        legacy = _LEGACY_STAGING_RE.match(entry.name)
        if owned is not None and owned["host"] == host:
            stale = not _pid_alive(int(owned["pid"]))
        elif owned is not None or (legacy is not None and legacy["name"] == name):
            try:
                stale = now - entry.stat().st_mtime > STALE_UNCHECKABLE_SECONDS
            except FileNotFoundError:  # another build removed it meanwhile
                continue
        else:
            continue
        if stale:
            log.info("removing stale staging folder %s (its build was interrupted)", entry)
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def make_staging_dir(parent: Path, name: str) -> Path:
    """A hidden temporary folder beside the target, with the permissions of an ordinary new folder.

    Its name records this process (see `clean_stale_staging`, called first, which removes what
    killed builds left behind). `mkdtemp` makes it private (0700), and the folder is renamed
    into place as the output, which is meant to be shared and published.
    """
    clean_stale_staging(parent, name)
    prefix = f".{name}.pid{os.getpid()}@{_host_tag()}."
    tmp = Path(tempfile.mkdtemp(prefix=prefix, suffix=".tmp", dir=parent))
    mask = os.umask(0)
    os.umask(mask)
    tmp.chmod(0o777 & ~mask)
    return tmp


@contextmanager
def removed_on_error(staging: Path) -> Iterator[None]:
    """Remove a staging folder when anything fails inside, so no partial output is left."""
    try:
        yield
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def swap_into_place(tmp: Path, target: Path, *, overwrite: bool) -> None:
    if not target.exists():
        os.rename(tmp, target)
        return
    if not overwrite:
        raise OutputError(f"output folder {target} appeared during the build; nothing was replaced")
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    os.rename(target, old)
    try:
        os.rename(tmp, target)
    except BaseException:
        os.rename(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)
