"""The run loop tests' items (4 choice, 3 number, in the item contract plus a `name` column) and their prompt folder.

Shared by the tests of the loop, the result keys, the model identity, the context length, the Ray
run and the item contract, so that each scores or breaks the very same seven items.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from datasets import Features, Value

from promptgen.core.contract import ITEM_FEATURES, user_messages
from promptgen.hub.folder import ConfigData, card_front_matter, write_hub_folder

OPTIONS = ["She worked hard.", "She is gifted.", "The exam was easy.", "She was lucky."]
NAMES = ["Maria", "John", "Aisha", "Wei"]
FEATURES = Features({**ITEM_FEATURES, "name": Value("string")})


def _choice(name: str) -> dict[str, Any]:
    prompt = (
        f"Choose the reason.\n\n### Statement:\n{name} passed the exam.\n\nOptions:\n"
        + "".join(f"{label}. {text}\n" for label, text in zip("ABCD", OPTIONS, strict=True))
        + "### Response:\n"
    )
    return {
        "id": f"choice-{name.lower()}",
        "probe": "attribution",
        "task": "choice",
        "prompt": prompt,
        "messages": user_messages(prompt),
        "choices": OPTIONS,
        "choice_labels": list("ABCD"),
        "choice_types": ["effort", "ability", "difficulty", "luck"],
        "number_min": None,
        "number_max": None,
        "name": name,
    }


def _number(name: str) -> dict[str, Any]:
    prompt = f"Question: How many dollars out of 10 will {name} pass?\nAnswer: {name} will pass $"
    return {
        "id": f"number-{name.lower()}",
        "probe": "trust_game",
        "task": "number",
        "prompt": prompt,
        "messages": user_messages(prompt),
        "choices": None,
        "choice_labels": None,
        "choice_types": None,
        "number_min": 0,
        "number_max": 10,
        "name": name,
    }


ITEMS = [_choice(n) for n in NAMES] + [_number(n) for n in NAMES[:3]]
IDS = sorted(item["id"] for item in ITEMS)


def write_loop_prompts(
    root: Path, items: list[dict[str, Any]], features: Features = FEATURES, name: str = "tiny"
) -> Path:
    """A built prompt folder (manifest, card, one shard) named `name` with config `items` holding `items`."""
    configs = [ConfigData("items", features, lambda: iter([{k: [r[k] for r in items] for k in features}]))]

    def card(manifest: dict, written: list) -> str:
        front = card_front_matter(pretty_name="t", license="cc0-1.0", tags=[], configs=written, default_config=None)
        return f"---\n{front}---\n# t\n"

    manifest = {"recipe": {"sha256": "0" * 64}, "parameters": {}, "sources": []}
    return write_hub_folder(root, name, configs, manifest=manifest, render_card=card, rows_per_shard=100)
