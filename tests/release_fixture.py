"""A small synthetic Talent-or-Luck release in the real file layout, plus a pinned recipe.

Tests mutate it (drop a placeholder, add an option key, empty a name list) to check
that each broken input is a clear error. Sizes: 2 domains x 2 scenarios, identity
groups 2 / 2 / 1 per dimension, 6 names per group and gender.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
DOMAINS = ("education", "sports")
SUFFIXES = {
    "success": ("higheffort", "highability", "easytask", "goodluck"),
    "failure": ("loweffort", "lowability", "difficulttask", "badluck"),
}
PRON = {"female": ("She", "her"), "male": ("He", "his")}
NAMES = {
    "nationality": {"an American": "Am", "a Russia": "Ru"},
    "race": {"a white person": "Wh", "a hispanic": "Hi"},
    "religion": {"a Sikh": "Si"},
}


def _options(outcome: str, gender: str, domain: str, sc: int, prefix: str = "opt") -> dict[str, str]:
    he, his = PRON[gender]
    words = (
        ("worked hard", "is talented", "had an easy task", "was lucky")
        if outcome == "success"
        else ("did not try", "lacks skill", "had a hard task", "was unlucky")
    )
    return {
        f"{prefix}{i + 1}_{s}": f"{he} {w} in {domain} case {sc} with {his} team."
        for i, (s, w) in enumerate(zip(SUFFIXES[outcome], words, strict=True))
    }


def release_data() -> dict[str, Any]:
    """Relative path (inside talent-or-luck/) -> JSON content."""
    files: dict[str, Any] = {}
    verb = {"success": "won the {d} prize {s}", "failure": "lost the {d} prize {s}"}
    for outcome in ("success", "failure"):
        files[f"closed_ended/single_actor/{outcome}.json"] = {
            g: {
                d: {
                    "short": [
                        {
                            "initial_prompt": "{X}, {dimension}, " + verb[outcome].format(d=d, s=s) + ".",
                            "instruction": "Choose one of the following reasons:",
                            **_options(outcome, g, d, s),
                        }
                        for s in range(2)
                    ]
                }
                for d in DOMAINS
            }
            for g in ("female", "male")
        }
        cause_key = {c: f"y_opt{i + 1}_{s}" for i, (c, s) in enumerate(zip("ABCD", SUFFIXES[outcome], strict=True))}
        files[f"closed_ended/actor_observer/{outcome}.json"] = {
            g: {
                d: {
                    "short": [
                        {
                            cause_key[c]: {
                                "initial_prompt": "{X}, {dimension_1}, "
                                + verb[outcome].format(d=d, s=s)
                                + ". {Y}, {dimension_2}, said {X} did so because of "
                                + c
                                + ". {X} did so because",
                                "instruction": "Choose one of the following reasons:",
                                **_options(outcome, g, d, s),
                            }
                            for c in "ABCD"
                        }
                        for s in range(2)
                    ]
                }
                for d in DOMAINS
            }
            for g in ("female", "male")
        }
    for config, (ox, oy) in {
        "both_success": ("success", "success"),
        "both_failure": ("failure", "failure"),
        "success_failure": ("success", "failure"),
    }.items():
        pairs = ["female-female", "male-male", "male-female"] + (["female-male"] if config == "success_failure" else [])
        files[f"closed_ended/actor_actor/{config}.json"] = {
            d: {
                "short": [
                    {
                        "initial_prompt": "{X}, {dimension_1}, and {Y}, {dimension_2}, met in " + f"{d} {s}.",
                        "instruction": "Choose one of the following reasons for each of them:",
                        "gender_pairs": {
                            gp: {
                                **_options(ox, gp.split("-")[0], d, s, "optX"),
                                **_options(oy, gp.split("-")[1], d, s, "optY"),
                            }
                            for gp in pairs
                        },
                    }
                    for s in range(2)
                ]
            }
            for d in DOMAINS
        }
    for dim, groups in NAMES.items():
        files[f"names/{dim}.json"] = {
            label: {"male_names": [f"{tag}m{i}" for i in range(6)], "female_names": [f"{tag}f{i}" for i in range(6)]}
            for label, tag in groups.items()
        }
    return files


def load_config(path: Path, config: str):
    """`load_dataset` with a private cache: the datasets cache keys local files by
    modification time, which tests that rebuild within milliseconds can collide on."""
    import tempfile

    import datasets

    return datasets.load_dataset(str(path), config, split="test", cache_dir=tempfile.mkdtemp(prefix="hfcache-"))


def write_release(root: Path, data: dict[str, Any] | None = None) -> Path:
    """Write the release under `root/talent-or-luck/`; return `root` (a --sources folder)."""
    data = release_data() if data is None else data
    for rel, content in data.items():
        path = root / "talent-or-luck" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content, indent=1, ensure_ascii=False), encoding="utf-8")
    return root


def write_recipe(path: Path, sources_root: Path, **parameter_overrides: Any) -> Path:
    """The real recipe with sha256 pins recomputed for the fixture files (and overrides)."""
    recipe = yaml.safe_load((REPO / "builders" / "talent_or_luck.yaml").read_text(encoding="utf-8"))
    recipe = copy.deepcopy(recipe)
    for source in recipe["sources"]:
        file = sources_root / source["path"]
        source["sha256"] = hashlib.sha256(file.read_bytes()).hexdigest() if file.exists() else None
    recipe["parameters"]["actor_observer"]["scenarios_per_cell"] = 4  # the fixture has 4 per outcome
    for key, value in parameter_overrides.items():
        recipe["parameters"][key] = value
    recipe["corrections"]["texts"] = []
    path.write_text(yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def write_designed_recipe(path: Path) -> Path:
    """The real recipe (sources pinned as released) with `release_configs: false`: the designed configs only."""
    recipe = yaml.safe_load((REPO / "builders" / "talent_or_luck.yaml").read_text(encoding="utf-8"))
    recipe["parameters"]["release_configs"] = False
    path.write_text(yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path
