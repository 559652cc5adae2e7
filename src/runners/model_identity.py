"""What a model IS, for the result key, and what it is CALLED, for every file a run writes.

Identity (`model_revision`): results are reused only for the very same model, so the key holds
a revision that changes whenever anything that changes the numbers changes:

- a local folder: a sha256 over the bytes of every file that shapes the scores (weights,
  config, generation config, tokenizer files, chat template), so a checkpoint copied over
  another at the same path, or an edited chat template, is a new key. Hashing 16 GB of an 8B
  model takes a minute, so each file's digest is cached by (resolved path, size, mtime) in
  `file-hashes.json` under the cache root: a rerun only stats the files. A file rewritten in
  place gets a new mtime and is hashed again.
- a folder inside a Hugging Face cache (`.../snapshots/<commit>/`): that commit sha, which
  names the content already.
- a Hub id: the commit sha the loaded config resolved to (never a branch name like `main`).

The same folder reached by a copy, a relative path or a trailing `/` has the same bytes, so
the same revision, so one key.

Name (`model_name`): rows, manifests, cards and reports carry a portable name, never a local
path: `--model-name`, else the Hub id a local folder's config records (`_name_or_path`, when
it is one), else the folder's name.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

from promptgen.core.errors import ProbeError
from promptgen.core.files import atomic_write_text, sha256_file

#: files of a model folder whose bytes change the numbers (weights are matched by suffix)
CONTENT_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "tokenizer.model",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
    "chat_template.json",
    "preprocessor_config.json",
)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
_SNAPSHOT = re.compile(r"(?:^|/)snapshots/(?P<commit>[0-9a-f]{40})(?:/|$)")
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def cache_root() -> Path:
    """`PROBES_HASH_CACHE`, else `$XDG_CACHE_HOME/social-bias-probes` (beside the sources and models)."""
    if os.environ.get("PROBES_HASH_CACHE"):
        return Path(os.environ["PROBES_HASH_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "social-bias-probes"


def content_files(folder: Path, *, gguf_file: str | None = None) -> list[Path]:
    """The files of `folder` whose bytes shape the scores, sorted by name.

    With `gguf_file`, that GGUF file is the weights (it carries its own tokenizer and template)
    and other weight files in the folder do not count.
    """
    files = []
    for path in sorted(folder.iterdir()):
        if not path.is_file():
            continue
        if gguf_file is not None:
            if path.name == gguf_file or (path.name in CONTENT_FILES and path.suffix != ".gguf"):
                files.append(path)
        elif path.name in CONTENT_FILES or path.suffix in WEIGHT_SUFFIXES:
            files.append(path)
    return files


class FileHashCache:
    """sha256 of files, remembered by (resolved path, size, mtime_ns) in one JSON file.

    The cache is advisory: a missing or unreadable cache file only means hashing again, and
    it is rewritten atomically (a concurrent writer's entries may be lost, never corrupted).
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or cache_root() / "file-hashes.json"
        try:
            self.entries: dict[str, dict[str, object]] = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.entries = {}
        self.hashed = 0  # files actually read by this instance (for tests and benchmarks)
        self._dirty = False

    def sha256(self, path: Path) -> str:
        real = Path(path).resolve()
        stat = real.stat()
        entry = self.entries.get(str(real))
        if entry and entry.get("size") == stat.st_size and entry.get("mtime_ns") == stat.st_mtime_ns:
            return str(entry["sha256"])
        digest = sha256_file(real)
        self.hashed += 1
        self.entries[str(real)] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": digest}
        self._dirty = True
        return digest

    def save(self) -> None:
        if not self._dirty:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(self.path, json.dumps(self.entries, sort_keys=True))
            self._dirty = False
        except OSError:  # a read-only cache costs time on the next run, not correctness
            pass


def folder_revision(folder: Path, *, gguf_file: str | None = None, cache: FileHashCache | None = None) -> str:
    """The content revision of a local model folder (module docstring)."""
    folder = Path(folder).expanduser()
    snapshot = _SNAPSHOT.search(folder.resolve().as_posix()) or _SNAPSHOT.search(folder.absolute().as_posix())
    if snapshot and gguf_file is None:
        return snapshot["commit"]
    files = content_files(folder, gguf_file=gguf_file)
    if not any(p.suffix in WEIGHT_SUFFIXES for p in files):
        raise ProbeError(f"model folder {folder} has no weight files ({', '.join(WEIGHT_SUFFIXES)})")
    cache = cache or FileHashCache()
    h = hashlib.sha256()
    for path in files:
        h.update(f"{path.name}\0{cache.sha256(path)}\n".encode())
    cache.save()
    return f"sha256-{h.hexdigest()[:32]}"


def hub_revision(asked: str | None, resolved_commit: str | None) -> str:
    """A Hub model's key revision: the commit that was loaded, else what was asked for."""
    return resolved_commit or asked or "unknown"


def default_model_name(model: str, *, local: bool) -> str:
    """A portable name for `model` (module docstring): never a local path."""
    if not local:
        return model
    folder = Path(model).expanduser()
    try:
        recorded = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("_name_or_path")
    except (OSError, ValueError, AttributeError):
        recorded = None
    if isinstance(recorded, str) and _HUB_ID.match(recorded) and not Path(recorded).is_absolute():
        return recorded
    return folder.resolve().name or "model"


def check_model_name(name: str) -> str:
    """`--model-name`: printable, one line, not a path of this machine."""
    if not name or not name.strip() or any(c in name for c in "\n\r\t\0"):
        raise ProbeError(f"--model-name must be one non-empty line, got {name!r}")
    if Path(name).is_absolute() or name.startswith("~"):
        raise ProbeError(f"--model-name {name!r} is a local path; give a portable name such as ORG/MODEL")
    return name.strip()


def hashed_bytes(files: Iterable[Path]) -> int:
    """Total size of `files` (what a first run reads)."""
    return sum(Path(p).stat().st_size for p in files)
