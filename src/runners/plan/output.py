"""A plan's outputs: the `--json` file (`write_json`, `PLAN_OUTPUT`) and the command line's table (`plan_rows`)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from promptgen.core.files import atomic_write_text, writing
from promptgen.core.outputs import Output
from runners.backends import priced_backends
from runners.plan.count import BOUNDED, GENERATE
from runners.scoring.distributions import NUMBER_MODES


def _is_plan(path: Path) -> bool:
    """Whether `path` is a plan `write_json` wrote (so `--json` may replace it): a JSON object with its keys."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and {"model_shape", "configs", "totals"} <= data.keys()


#: the `--json` file: written over only when it is an earlier plan
PLAN_OUTPUT = Output("plan file", owns=_is_plan, file=True)


def write_json(plan: Mapping[str, Any], path: str | Path) -> None:
    """Write the plan atomically (`files.atomic_write_text`: a temporary file beside `path`, renamed over it)."""
    path = Path(path)
    with writing("the plan", path):
        path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(plan, indent=2, default=float) + "\n")


def plan_rows(plan: Mapping[str, Any]) -> Iterator[tuple[str, ...]]:
    """Table rows (config, backend, mode, items, prompt/item, computed prompt/item, saved/item, trie min/item,
    continuation/item, decoded/item, hours) for the command line.

    A number mode's prompt is its context; a generated config's (mode `generate`) is its prompt,
    prefilled, then its decoded tokens (the answers), whose hours are the backend's own batching's.
    """
    for name, counts in [*plan["configs"].items(), ("TOTAL", None)]:
        for backend in priced_backends():
            for mode in (*NUMBER_MODES, BOUNDED, GENERATE):
                cell = (counts or plan["totals"]).get(backend, {}).get(mode)
                if cell is None:
                    continue
                if "unavailable" in cell:
                    yield (name, backend, mode, f"{cell['items']:,}", *["-"] * 6, "n/a: " + cell["unavailable"])
                    continue
                n = max(cell["items"], 1)
                # a served model is priced by what it is sent: its time is its server's
                hours = f"{cell['hours']:.2f}" if "hours" in cell else f"served: {cell['prompts']:,.0f} prompts"
                if mode == GENERATE:
                    computed = cell.get("computed_prompt_tokens", cell["prompt_tokens"])
                    figures: tuple[str, ...] = (
                        f"{cell['prompt_tokens'] / n:.1f}",
                        f"{computed / n:.1f}",
                        f"{(cell['prompt_tokens'] - computed) / n:.1f}",
                        "-",
                        "-",
                        f"{cell['decoded_tokens'] / n:.1f}",
                    )
                else:
                    figures = (
                        f"{cell['context_tokens'] / n:.1f}",
                        f"{cell['computed_context_tokens'] / n:.1f}",
                        f"{cell['shared_prefix_saved'] / n:.1f}",
                        f"{cell['prefix_trie_minimum'] / n:.1f}",
                        f"{cell['continuation_positions'] / n:.1f}",
                        "-",
                    )
                yield (name, backend, mode, f"{cell['items']:,}", *figures, hours)
