"""Arrow's allocator set to give freed memory back at once, in the process the `probes` command owns.

pyarrow allocates through mimalloc, which keeps the pages it frees for reuse a while
(`purge_delay`) and commits whole arenas as it grows. A command that streams a
release-sized input (`probes import` of the empathy authors' files: a 2.2 M-row config's
parquet converted to Arrow, then 300,000-row TSVs read in blocks) frees hundreds of MB a few
seconds apart, and the peak is what was freed but not yet given back plus what is in use.
With both options off, the peak resident memory of that import falls from 500 MB to 429 MB
(3.4 to 2.9 times its largest file), in the same time (benchmarks/import_memory.py
`--allocator-defaults`).

mimalloc reads its options from the environment once, when pyarrow loads `libarrow`: they must
be set before anything imports pyarrow, so `probes.cli` sets them first thing. A value the user
set is kept. A Python program using `probes.api` owns its process and its allocator; it may set
the same variables before importing pyarrow.
"""

from __future__ import annotations

import os
import sys

#: mimalloc's options, as environment variables, and the values that give freed memory back at once
GIVE_BACK_AT_ONCE = {"MIMALLOC_PURGE_DELAY": "0", "MIMALLOC_ARENA_EAGER_COMMIT": "0"}


def give_freed_memory_back() -> bool:
    """Set `GIVE_BACK_AT_ONCE` in this process's environment, where the user has not set them.

    False, and nothing set, once pyarrow is loaded: its allocator has read its options already.
    """
    if "pyarrow" in sys.modules:
        return False
    for name, value in GIVE_BACK_AT_ONCE.items():
        os.environ.setdefault(name, value)
    return True
