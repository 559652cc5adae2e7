"""What the command-line tests check of a failed command, and a place no command can write.

Bad input must end in exit 1 and ONE `error:` line naming what is wrong (no traceback): every
module that checks this through `CliRunner` uses `one_line_error`, so they all check the same thing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

#: progress lines of libraries that load data or models (they go to stderr too)
LIBRARY_PROGRESS = re.compile(r"^(WARNING |Generating test split|Loading weights)")


def one_line_error(result, *names: str, ignore: re.Pattern[str] | None = None) -> str:
    """The command failed cleanly: exit 1, exactly one `error:` line that names every `names`; returns it.

    Every non-blank line of the output counts, except those `ignore` matches (`LIBRARY_PROGRESS` for
    commands that load a dataset or a model, whose libraries print progress lines of their own).
    """
    text = re.sub(r"\x1b\[[0-9;]*m", "", result.output)
    assert result.exit_code == 1, text
    assert "Traceback" not in text, text
    lines = [line for line in text.splitlines() if line.strip() and not (ignore and ignore.match(line.strip()))]
    assert len(lines) == 1 and lines[0].startswith("error: "), text
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


def unwritable_out(tmp_path: Path) -> Path:
    """A folder no write can go into: read-only bits, or (as root, whom bits do not stop) one under /sys."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        (folder / "probe").mkdir()
    except PermissionError:
        return folder / "out"
    if not Path("/sys/kernel").is_dir():
        pytest.skip("running as root without /sys: no folder refuses writes")
    return Path("/sys/kernel/probes-test-out")
