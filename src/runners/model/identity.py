"""What a model IS, for the result key, and what it is CALLED, for every file a run writes.

Identity (`model_revision`): results are reused only for the very same model, so the key holds
a revision that changes whenever anything that changes the numbers changes. `locate` is the
one place every driver (`probes run`, Ray, the demo) turns a model argument into it:

- a local folder: a sha256 over the bytes of every file that shapes the scores: the weights,
  the config, the generation config and every tokenizer and chat-template file transformers
  may read, `additional_chat_templates/` included (`content_files`). So a checkpoint copied
  over another at the same path, or an edited chat template, is a new key. Hashing 16 GB of
  an 8B model takes a minute, so each file's digest is cached by (resolved path, size, mtime,
  ctime, inode) in `file-hashes.json` under the cache root: a rerun only stats the files, and
  a file rewritten or swapped in place is hashed again. The folder is hashed before the model
  loads and checked again after (`ModelRef.check_unchanged`), so weights replaced while a run
  loads them are an error, never filed under the wrong key.
- a Hugging Face cache snapshot folder itself (`.../models--ORG--NAME/snapshots/<commit>`):
  that commit, which names the content already. A `snapshots/<40 hex>` folder outside that
  layout is only named so: it is hashed, and new weights there are a new key. A folder *below*
  a snapshot (`.../snapshots/<commit>/ckpt-100`) is one of several checkpoints of that commit,
  so it is hashed like any local folder.
- a Hub id: the commit huggingface_hub resolves the asked revision (default `main`) to, read
  from the snapshot the files come from (online or from the cache, `HF_HUB_OFFLINE`), never a
  branch name. The model is then loaded *at that commit*, so a branch that moves while the run
  loads cannot change what was keyed. A revision that cannot be resolved is an error, unless
  `--model-revision` names a full 40-hex commit.

The same folder reached by a copy, a relative path or a trailing `/` has the same bytes, so
the same revision, so one key.

Name (`model_name`): rows, manifests, cards and reports carry a portable name, never a local
path: `--model-name`, else the Hub id a local folder's config records (`_name_or_path`, when
it is one), else the folder's name. Given or derived, it is checked (`check_model_name`): no secret,
no invisible or compatibility character, no empty, `.` or `..` part.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from promptgen.core.errors import ProbeError
from promptgen.core.files import atomic_write_text, sha256_file
from promptgen.core.secrets import BIDI_CONTROLS_RE, INVISIBLE_RE, PUBLISH_LEAK_PATTERNS, SECRET_KINDS, named_secrets
from promptgen.hub.read import is_path_like

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
#: the other top-level files whose bytes change the numbers, by suffix: the config and generation
#: config (`.json`), and every file a tokenizer class may read under names of its own
#: (`tokenizer.json`, `vocab.json`, `merges.txt`, `tokenizer.model`, `spiece.model`, `vocab.txt`,
#: `tekken.json`, `*.tiktoken`, `chat_template.jinja`, `chat_template.json`, ...)
CONTENT_SUFFIXES = (".json", ".txt", ".model", ".jinja", ".tiktoken")
#: the folder transformers reads extra named chat templates from (`CHAT_TEMPLATE_DIR`)
CHAT_TEMPLATE_DIR = "additional_chat_templates"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
#: the folder IS a snapshot of the HF cache (not a folder below one): `models--ORG--NAME/snapshots/<commit>`,
#: the layout huggingface_hub writes; a `snapshots/<40 hex>` folder anywhere else is hashed like any folder
_SNAPSHOT_DIR = re.compile(r"(?:^|/)models--[^/]+/snapshots/(?P<commit>[0-9a-f]{40})$")
#: a file inside a snapshot of the HF cache, as huggingface_hub returns its path
_SNAPSHOT_FILE = re.compile(r"/snapshots/(?P<commit>[0-9a-f]{40})/")
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
#: why a model's name may not hold a secret (`model_name_problem`)
_PRINTED = (
    "a model's name is printed and written into every row, manifest, folder name and card; give the model's name, "
    "never a credential"
)


def cache_root() -> Path:
    """`PROBES_HASH_CACHE`, else `$XDG_CACHE_HOME/social-bias-probes` (beside the sources and models)."""
    if os.environ.get("PROBES_HASH_CACHE"):
        return Path(os.environ["PROBES_HASH_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "social-bias-probes"


def content_files(folder: Path, *, gguf_file: str | None = None) -> list[Path]:
    """The files of `folder` whose bytes shape the scores, sorted by name.

    The weights and the other content files (by suffix: `WEIGHT_SUFFIXES`, `CONTENT_SUFFIXES`),
    and every chat template under `additional_chat_templates/`,
    which transformers loads as named templates beside the default one. With `gguf_file`,
    that GGUF file is the weights (it carries its own tokenizer and template) and other
    weight files in the folder do not count. Other subfolders (e.g. checkpoints of a
    training run) are other models and do not count.
    """
    files = []
    for path in sorted(folder.iterdir()):
        if not path.is_file():
            continue
        if path.suffix in WEIGHT_SUFFIXES:
            if gguf_file is None or path.name == gguf_file:
                files.append(path)
        elif path.suffix in CONTENT_SUFFIXES:
            files.append(path)
    templates = folder / CHAT_TEMPLATE_DIR
    if templates.is_dir():
        files.extend(sorted(p for p in templates.rglob("*") if p.is_file()))
    return files


class FileHashCache:
    """sha256 of files, remembered by (resolved path, size, mtime_ns, ctime_ns, inode) in one JSON file.

    The mtime alone can be carried over by a copy (`cp -p`, `shutil.copy2`, rsync -t); a file
    swapped in by rename has another inode, and any write changes the ctime, which no user
    call can set back. So a swapped or rewritten file is always hashed again.

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
        seen = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "ctime_ns": stat.st_ctime_ns, "ino": stat.st_ino}
        entry = self.entries.get(str(real))
        if entry and all(entry.get(k) == v for k, v in seen.items()):
            return str(entry["sha256"])
        digest = sha256_file(real)
        self.hashed += 1
        self.entries[str(real)] = {**seen, "sha256": digest}
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
    snapshot = _SNAPSHOT_DIR.search(folder.resolve().as_posix()) or _SNAPSHOT_DIR.search(folder.absolute().as_posix())
    if snapshot and gguf_file is None:
        return snapshot["commit"]
    files = content_files(folder, gguf_file=gguf_file)
    if not any(p.suffix in WEIGHT_SUFFIXES for p in files):
        raise ProbeError(f"model folder {folder} has no weight files ({', '.join(WEIGHT_SUFFIXES)})")
    cache = cache or FileHashCache()
    h = hashlib.sha256()
    for path in files:
        h.update(f"{path.relative_to(folder).as_posix()}\0{cache.sha256(path)}\n".encode())
    cache.save()
    return f"sha256-{h.hexdigest()[:32]}"


def hub_commit(model: str, revision: str | None, *, filename: str = "config.json") -> str:
    """The commit a Hub model's `revision` (default `main`) resolves to, by huggingface_hub.

    A full 40-hex commit is taken as it is. Otherwise huggingface_hub fetches (or, offline,
    finds in the cache) `filename` at that revision; the snapshot folder it comes from is
    named by the commit. Anything else is an error: a branch name never keys results.
    """
    if revision is not None and _COMMIT.match(revision):
        return revision
    from huggingface_hub import hf_hub_download

    asked = revision or "main"
    try:
        path = hf_hub_download(model, filename, revision=revision)
    except Exception as exc:  # offline misses, 404s, auth and network errors all end here
        raise ProbeError(
            f"cannot resolve Hub model {model!r} at revision {asked!r} to a commit "
            f"({type(exc).__name__}: {exc}); check the id, or pass --model-revision with a 40-hex commit sha"
        ) from None
    found = _SNAPSHOT_FILE.search(Path(path).as_posix())
    if found is None:
        raise ProbeError(
            f"cannot tell which commit of Hub model {model!r} was loaded (huggingface_hub returned a file outside "
            "a cache snapshot); pass --model-revision with a 40-hex commit sha"
        )
    return found["commit"]


@dataclass(frozen=True)
class ModelRef:
    """A model argument resolved to what loads and what keys it (`locate`)."""

    #: the argument as given: a folder or a Hub id (the backends record it as their model id)
    model: str
    local: bool
    #: the result key's revision (module docstring)
    revision: str
    #: the `revision=` to load with: the resolved commit for a Hub id, the asked one for a folder
    load_revision: str | None
    gguf_file: str | None = None

    def check_unchanged(self, cache: FileHashCache | None = None) -> None:
        """After loading: a local folder must still hash to the revision it was keyed by.

        The file cache makes this a stat of each file unless one changed, so it costs nothing
        on a stable folder; a file swapped during the load is hashed again and differs.
        """
        if not self.local:
            return
        now = folder_revision(Path(self.model), gguf_file=self.gguf_file, cache=cache)
        if now != self.revision:
            raise ProbeError(
                f"model folder {self.model} changed while it was loading (its content went from {self.revision} "
                f"to {now}); nothing was scored: rerun once the folder is no longer being written"
            )


def locate(
    model: str, *, revision: str | None = None, gguf_file: str | None = None, cache: FileHashCache | None = None
) -> ModelRef:
    """The one rule for a model argument: check it, resolve it, and compute its key revision.

    An existing path is a local folder (it must hold `config.json`, or `gguf_file`); a
    path-like argument that does not exist is an error (`promptgen.hub.read.is_path_like`, the rule
    every dataset argument follows too); anything else is a Hub id, resolved
    to a commit by `hub_commit`. Runs before any weights load.
    """
    folder = Path(model).expanduser()
    if folder.exists():
        if not folder.is_dir():
            raise ProbeError(f"model {model} is a file, not a model folder (GGUF: give its folder and --gguf-file)")
        if gguf_file and (Path(gguf_file).name != gguf_file or gguf_file in (".", "..")):
            raise ProbeError(
                f"--gguf-file {gguf_file} is a path: give the GGUF file's name inside the model folder, and its "
                f"folder as --model (here --model {(folder / gguf_file).parent} --gguf-file {Path(gguf_file).name})"
            )
        if gguf_file and not (folder / gguf_file).is_file():
            raise ProbeError(f"model folder {model} has no GGUF file {gguf_file}")
        if not gguf_file and not (folder / "config.json").is_file():
            raise ProbeError(f"model folder {model} has no config.json (not a transformers model folder)")
        key = folder_revision(folder, gguf_file=gguf_file, cache=cache)
        return ModelRef(model, True, key, revision, gguf_file)
    if is_path_like(model):
        raise ProbeError(f"model folder {model} does not exist")
    commit = hub_commit(model, revision, filename=gguf_file or "config.json")
    return ModelRef(model, False, commit, commit, gguf_file)


def default_model_name(model: str, *, local: bool) -> str:
    """A portable name for `model` (module docstring): never a local path."""
    if not local:
        # a path of another machine (a served model's name, `vllm serve /models/x`): its last folder
        if model.startswith(("/", "~")):
            return model.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] or "model"
        return model
    folder = Path(model).expanduser()
    try:
        recorded = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("_name_or_path")
    except (OSError, ValueError, AttributeError):
        recorded = None
    if isinstance(recorded, str) and _HUB_ID.match(recorded) and not Path(recorded).is_absolute():
        return recorded
    return folder.resolve().name or "model"


def check_model_name(name: str, flag: str = "--model-name", *, fix: str = "") -> str:
    """A model's name for its results (`model_name_problem`), stripped; else one line starting with `flag`.

    `fix`: what to do instead, for a name that was not given but derived (`session.model_name_for`).
    """
    problem = model_name_problem(name)
    if problem:
        raise ProbeError(f"{flag} {problem}{fix}")
    return name.strip()


def model_name_problem(name: str) -> str | None:
    """Why `name` cannot name a model's results (None when it can), as the rest of a line after the flag.

    A model's name is printed, written into every row, manifest, card and key folder name, and published,
    so it is refused when it holds: a known secret or a token's shape (`promptgen.core.secrets`; said by kind,
    the name never shown), more than one line, an invisible or directional character (it would display as
    another name: `org/m1\u200b` as `org/m1`), any other unprintable character, compatibility characters
    (not NFKC-stable: fullwidth `ｏｒｇ` displays like `org`; the NFKC form is named, not taken silently),
    a local path, an empty part (`org/`, `a//b`) or a `.` or `..` part (`org/../../x`).
    """
    visible = re.sub(INVISIBLE_RE, "", name)
    for text in dict.fromkeys((name, visible, unicodedata.normalize("NFKC", visible))):
        for secret, kind in named_secrets().items():
            if secret in text:
                return f"holds {kind} (not shown): {_PRINTED}"
        for kind in SECRET_KINDS:
            if re.search(PUBLISH_LEAK_PATTERNS[kind], text):
                return f"holds what looks like {kind} (not shown): {_PRINTED}"
    if not name.strip() or any(c in name for c in "\n\r\t\0"):
        return f"must be one non-empty line, got {name!r}"
    found = re.search(BIDI_CONTROLS_RE, name)
    if found:
        return (
            f"{name!r} holds a bidirectional control character (U+{ord(found.group()):04X}), which makes it "
            "display as another name; give the name without it"
        )
    hidden = re.search(INVISIBLE_RE, name) or next((c for c in name if not c.isprintable() and c != " "), None)
    if hidden:
        char = hidden if isinstance(hidden, str) else hidden.group()
        return (
            f"{name!r} holds an invisible or unprintable character (U+{ord(char):04X}), which makes it display as "
            "another name; give the name without it"
        )
    normal = unicodedata.normalize("NFKC", name)
    if normal != name:
        return (
            f"{name!r} holds compatibility characters (e.g. fullwidth letters) that display like others: it is not "
            f"in NFKC form; give it as {normal.strip()!r}"
        )
    stripped = name.strip()
    if Path(stripped).is_absolute() or stripped.startswith("~"):
        return f"{name!r} is a local path; give a portable name such as ORG/MODEL"
    parts = re.split(r"[/\\]", stripped)
    if any(not part.strip() for part in parts):
        return f"{name!r} has an empty part (nothing between, before or after a /); give a name such as ORG/MODEL"
    dots = next((part for part in parts if part.strip() in (".", "..")), None)
    if dots is not None:
        return f"{name!r} has a {dots.strip()!r} part (a path step, not a name); give a name such as ORG/MODEL"
    return None


def refuse_spoofed_name(name: str, flag: str) -> None:
    """One line when `name` holds a bidirectional control: `org/\u202eevil` displays as `org/live` (Trojan Source),
    and a model's name is in every row, manifest and card, where it would pass for another model's results."""
    found = re.search(BIDI_CONTROLS_RE, name)
    if found:
        raise ProbeError(
            f"{flag} {name!r} holds a bidirectional control character (U+{ord(found.group()):04X}), which makes it "
            "display as another name; give the name without it"
        )
