"""`probes.cli` tells Arrow's allocator to give freed memory back at once, before pyarrow loads (#69, finding 7)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from probes.cli.allocator import GIVE_BACK_AT_ONCE, give_freed_memory_back

#: import the CLI as the console script does, then allocate ~200 MB of Arrow strings and free them
_CHILD = r"""
import json, os, sys, time
import probes.cli
loaded_before = "pyarrow" in sys.modules
def rss_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
import pyarrow as pa
base = rss_mb()
arrays = [pa.array([f"row {i} of chunk {j} " * 3 for i in range(20000)]) for j in range(60)]
peak = rss_mb()
del arrays
time.sleep(0.2)
print(json.dumps({"env": {k: os.environ.get(k) for k in %r}, "loaded_before": loaded_before,
                  "held_after_free_mb": rss_mb() - base, "peak_mb": peak - base}))
"""


def _child(env: dict[str, str]) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MIMALLOC_")}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD % (sorted(GIVE_BACK_AT_ONCE),)],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_cli_sets_the_allocator_before_pyarrow_loads_and_the_memory_freed_is_given_back() -> None:
    ours = _child({})
    assert ours["env"] == GIVE_BACK_AT_ONCE
    assert ours["loaded_before"] is False  # importing the CLI loads no pyarrow: the options are read after
    # the user's own values are kept: here mimalloc's defaults, which keep what is freed for reuse
    theirs = _child({"MIMALLOC_PURGE_DELAY": "1000", "MIMALLOC_ARENA_EAGER_COMMIT": "2"})
    assert theirs["env"] == {"MIMALLOC_PURGE_DELAY": "1000", "MIMALLOC_ARENA_EAGER_COMMIT": "2"}
    assert theirs["held_after_free_mb"] > 100  # ~200 MB allocated: most of it kept
    assert ours["held_after_free_mb"] < 0.5 * theirs["held_after_free_mb"], (ours, theirs)


def test_once_pyarrow_is_loaded_nothing_is_set(monkeypatch) -> None:
    import pyarrow  # noqa: F401  (loaded in this process: its allocator has read its options)

    for name in GIVE_BACK_AT_ONCE:
        monkeypatch.delenv(name, raising=False)
    assert give_freed_memory_back() is False
    assert not any(name in os.environ for name in GIVE_BACK_AT_ONCE)
