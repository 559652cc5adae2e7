"""Where a result lives: the folder's file names, the result key and its key folder, shards.

Paths and the small `key.json`; the parquet parts are `runners.results.parts`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptgen.core.errors import ProbeError
from promptgen.core.files import atomic_write_text
from promptgen.core.layout import RESULTS_MANIFEST
from promptgen.hub.folder import check_path_segment

from .parts import part_files

#: the names of a results folder's files (module docstring), one home each for every writer and reader
CARD_NAME = "README.md"


MANIFEST_NAME = RESULTS_MANIFEST


DATA_DIR = "data"


KEY_FILE = "key.json"


#: everything a results folder holds at its top; all else it holds is under DATA_DIR
TOP_ENTRIES = (CARD_NAME, MANIFEST_NAME, DATA_DIR)


def short_model_name(model: str) -> str:
    """The last component of a model's path or repo id (may be empty): how cards and labels name it."""
    return model.rstrip("/").split("/")[-1]


@dataclass(frozen=True)
class ResultKey:
    """What a result depends on besides the item id."""

    #: portable display name (`--model-name`); names the folder, not part of the identity
    model: str
    #: the model's content revision (`runners.model.identity`)
    model_revision: str
    #: canonical JSON of everything else that changes the scores: scoring settings, chat, dtype, backend
    scoring: str

    def as_dict(self) -> dict[str, str]:
        return {"model": self.model, "model_revision": self.model_revision, "scoring": self.scoring}

    @property
    def digest(self) -> str:
        """sha256 of the identity: the same model and settings under any name give the same digest."""
        payload = json.dumps(
            {"model_revision": self.model_revision, "scoring": self.scoring}, sort_keys=True, separators=(",", ":")
        )
        return hashlib.sha256(payload.encode()).hexdigest()

    @property
    def name(self) -> str:
        """The model's folder or Hub name: the last component of its path or repo id (may be empty)."""
        return short_model_name(self.model)

    @property
    def slug(self) -> str:
        """Folder name: a readable model name and a hash of the identity."""
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", self.name).strip("._") or "model"
        return f"{name[:48]}-{self.digest[:16]}"

    @property
    def label(self) -> str:
        """How reports and figures name a run: `<model folder or Hub name>·<first 8 of the digest>`.

        Short, and unique per key: the digest prefix tells apart one model at two settings, and
        two models of one name (`org-a/m`, `org-b/m`) at different revisions.
        """
        return f"{self.name or 'model'}·{self.digest[:8]}"


#: the item fields `prompt_sha256` covers: what the runners read to score an item
PROMPT_FIELDS = ("task", "prompt", "messages", "choices", "choice_labels", "number_min", "number_max", "stop")


def prompt_sha256(item: Mapping[str, Any]) -> str:
    """sha256 of what a model is asked in an item: the fields the runners read to score it.

    A rebuilt dataset that keeps an id but changes its prompt, messages, options or range
    gets another hash, so a resumed run scores that item again.
    """
    payload = json.dumps({f: item.get(f) for f in PROMPT_FIELDS}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def parse_shard(text: str | None) -> tuple[int, int]:
    """`i/n` -> (i, n) with 0 <= i < n; None -> (0, 1)."""
    if text is None:
        return 0, 1
    m = re.fullmatch(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*", text)
    if not m:
        raise ProbeError(f"--shard must look like i/n (e.g. 0/4), got {text!r}")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 0 <= i < n:
        raise ProbeError(f"--shard {text}: need 0 <= i < n")
    return i, n


def shard_of(item_id: str, n: int) -> int:
    """The shard of an item: a hash of its id, so shards do not depend on row order."""
    return int.from_bytes(hashlib.sha256(item_id.encode("utf-8")).digest()[:8], "big") % n


def key_dir(results: Path, config: str, key: ResultKey) -> Path:
    """The folder of `key`: an existing one with the same digest (under any model name), else its slug.

    The config name is checked here too (`check_path_segment`), the last line before it names a
    folder: `""` would put rows in `data/<key>/`, `..` outside `data/`.
    """
    check_path_segment(config, "config name")
    config_dir = Path(results) / DATA_DIR / config
    if config_dir.is_dir():
        same = sorted(p for p in config_dir.glob(f"*-{key.digest[:16]}") if p.is_dir())
        if same:
            return same[0]
    return config_dir / key.slug


class KeyFileError(ProbeError):
    """A key folder's key.json is missing, unreadable or not a JSON object; `problem` says which."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path} {problem}")
        self.path = path
        self.problem = problem


def read_key_file(folder: Path) -> dict[str, Any]:
    """The key a key folder holds (its key.json), the one reader of it: a `KeyFileError` when it cannot be.

    Every reader (resume, the manifest summary, derived datasets, publishing) gets the same
    refusal for the same fault, and `problem` lets a checker that collects problems name the file its own way.
    """
    path = Path(folder) / KEY_FILE
    if not path.is_file():
        raise KeyFileError(path, "is missing")
    try:
        key = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise KeyFileError(path, f"is not readable JSON ({exc})") from exc
    if not isinstance(key, dict):
        raise KeyFileError(path, "is not a JSON object")
    return key


def named_elsewhere(results: Path, key: ResultKey) -> tuple[Path, str] | None:
    """A key folder of the same identity recorded under another model name, in any config, or None.

    The digest leaves the name out, so a run under a new `--model-name` would add rows with a
    second name to the folder (and another config's folder) of the same model: one model
    would appear as two, and publishing refuses such a folder.
    """
    data = Path(results) / DATA_DIR
    if not data.is_dir():
        return None
    for folder in sorted(p for p in data.glob(f"*/*-{key.digest[:16]}") if p.is_dir()):
        try:
            name = read_key_file(folder).get("model")
        except KeyFileError:
            continue
        if isinstance(name, str) and name != key.model:
            return folder, name
    return None


def write_key_file(folder: Path, key: ResultKey) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / KEY_FILE
    if not target.exists():
        atomic_write_text(target, json.dumps(key.as_dict(), indent=2, sort_keys=True) + "\n")


def key_folders(results: Path, config: str) -> list[Path]:
    """The key folders of one config that hold result parts (`data/<config>/<key>/part-*.parquet`), sorted."""
    config_dir = Path(results) / DATA_DIR / config
    if not config_dir.is_dir():
        return []
    return [p for p in sorted(config_dir.iterdir()) if p.is_dir() and part_files(p)]


def result_configs(results: Path) -> list[str]:
    """The configs a local results folder holds (those with at least one key folder of parts)."""
    data = Path(results) / DATA_DIR
    if not data.is_dir():
        return []
    return [p.name for p in sorted(data.iterdir()) if p.is_dir() and key_folders(results, p.name)]
