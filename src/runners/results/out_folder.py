"""The `--out` guard: a run writes only into a results folder or a new one.

Checked before a model loads, for every config a run resolves (`runners.run.runner.resolve_protocol`:
`probes run`, the sweep, the demo, `probes rewrite`) and by `probes import`, so a wrong `--out`
is one line, not a traceback after the loading and scoring.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from promptgen.core.outputs import Input, Output, check_output, visible_entries
from runners import results as res


#: a results folder: `probes run` writes into it only when it holds nothing but what runs write
#: (`results.TOP_ENTRIES`: README.md, results_manifest.json, data/), so a prompt dataset, a report or any
#: other folder is refused
def is_results_folder(folder: Path) -> bool:
    """Whether `folder` holds only what runs write, and a card only beside its manifest (never a project's README)."""
    entries = visible_entries(folder)
    return entries <= set(res.TOP_ENTRIES) and (res.CARD_NAME not in entries or res.MANIFEST_NAME in entries)


RESULTS_OUTPUT = Output("results folder", owns=is_results_folder, replaces=False)


def check_out_folder(results: str | Path, *, inputs: Iterable[Input] = ()) -> Path:
    """`--out` is a results folder or new, and writable: never empty, a file, a prompt dataset or an input.

    Checked before a model loads (`promptgen.core.outputs.check_output`), so an unwritable folder
    or a damaged manifest is one line, not a traceback after minutes of loading and scoring.
    """
    target = check_output(results, RESULTS_OUTPUT, inputs=inputs)
    res.read_manifest(target)  # a manifest of the wrong shape: refused now, not after the scoring
    return target
