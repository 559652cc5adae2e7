"""The item contract (DESIGN section 2): the columns every prompt row carries, and its check.

The builders write it (`item_features`) and the runners check it on load
(`check_prompt_config`): one definition for both sides. Declared as `datasets.Features`
rather than inferred, so every shard of every config has exactly the same Arrow schema and
`load_dataset` gets list-of-struct `messages` right.
"""

from __future__ import annotations

import re
from typing import Any

from datasets import Features, List, Value

from .errors import ProbeError

ITEM_FEATURES: dict = {
    "id": Value("string"),
    "probe": Value("string"),
    "task": Value("string"),
    "prompt": Value("string"),
    "messages": List({"role": Value("string"), "content": Value("string")}),
    "choices": List(Value("string")),
    "choice_labels": List(Value("string")),
    "choice_types": List(Value("string")),
    "number_min": Value("int32"),
    "number_max": Value("int32"),
}

CHOICE_LABELS = ("A", "B", "C", "D", "E", "F", "G", "H")

#: the columns a config must have for a runner to score it
REQUIRED_COLUMNS = ("id", "probe", "task", "prompt", "messages")
#: per task, the columns its items need; `text` items (free generation, e.g. the empathy
#: third-person rewrite) may name `stop` strings and are run with --scoring generate only
TASK_COLUMNS = {"choice": ("choices", "choice_labels"), "number": ("number_min", "number_max"), "text": ()}


def item_features(extra: dict) -> Features:
    """The item contract followed by a probe's own metadata columns."""
    clash = set(extra) & set(ITEM_FEATURES)
    if clash:
        raise ValueError(f"metadata columns {sorted(clash)} clash with the item contract")
    return Features({**ITEM_FEATURES, **extra})


def slug(text: str) -> str:
    """A lowercase ASCII-ish id fragment: `a white person` -> `white_person`."""
    text = re.sub(r"^(a|an)\s+", "", text.strip(), flags=re.IGNORECASE)
    return re.sub(r"[^0-9a-z]+", "_", text.lower()).strip("_")


def user_messages(prompt: str) -> list[dict[str, str]]:
    """Chat form of a plain prompt: the same text as one user turn."""
    return [{"role": "user", "content": prompt}]


def check_prompt_config(ds: Any, where: str) -> None:
    """The item contract: required columns, per-task columns, unique ids, at least one row."""
    columns = set(ds.column_names)
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise ProbeError(f"{where}: not a prompt-item config, missing column(s) {', '.join(missing)}")
    if len(ds) == 0:
        raise ProbeError(f"{where}: the config has no rows")
    tasks = set(ds["task"])
    unknown = sorted(str(t) for t in tasks - set(TASK_COLUMNS))
    if unknown:
        raise ProbeError(f"{where}: unknown task(s) {', '.join(unknown)}; expected choice, number or text")
    for task in sorted(tasks):
        lacking = [c for c in TASK_COLUMNS[task] if c not in columns]
        if lacking:
            raise ProbeError(f"{where}: has {task} items but no column(s) {', '.join(lacking)}")
    ids = ds["id"]
    if len(set(ids)) != len(ids):
        raise ProbeError(f"{where}: item ids are not unique")
