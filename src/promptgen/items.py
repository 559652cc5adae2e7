"""The item contract (DESIGN section 2): the columns every prompt row carries.

Declared as `datasets.Features` rather than inferred, so every shard of every config has
exactly the same Arrow schema and `load_dataset` gets list-of-struct `messages` right.
"""

from __future__ import annotations

import re

from datasets import Features, List, Value

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
