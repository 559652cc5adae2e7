"""`probes import`: another team's released model outputs -> a results folder that `analyze` and `publish` read.

Each format is a probe's own (`ProbeSpec.import_formats`: the Talent-or-Luck release's scorer CSV
files, the inverse of `probes export`; the intergroup-empathy authors' generation TSV files), a
reader in that probe's room (`common.ImportFormat`), found through the registry. Each file's rows
are joined to the prompt dataset's rows and checked against them; the rows are then written with
the results layer a run writes with (`runners.session.Session`: key folders, atomic parts,
compaction, the manifest entry under its lock, the card), so an imported folder is one more
results folder.

- The result key: the model's content is the imported files' content, `model_revision =
  imported-<sha256>` of the format and every imported file's relative name and sha256 (one
  revision for all the configs of one import, so the analysis pairs them as one run); the
  scoring is the format's (the release's scorer, the authors' generation and parser), with
  `backend` `import:<format>` and no dtype. Importing the same files again adds nothing: same
  key, every item already there with its prompt hash. Another set of files (more of them, or
  fewer) is another revision: import a release's files for one model together.
- The manifest entry of each config records `imported`: the format, the digest and each file
  (its name relative to the imported folder, never a local path, its sha256 and rows).
- Before any row is written the manifest records the import (`runners.results.record_import`:
  its format, model and the key folder of each config), so an import killed part way, even
  between configs, leaves keys that `analyze`, `export` and `publish` refuse as unfinished,
  naming `probes import` (`runners.results.unfinished_problem`), until the same import run again
  finishes them. One import of a set of files writes at a time (a lock in the results folder);
  it removes the temporary files a killed one left in its key folders.
- A file with no rows (a header only) is refused, as is anything else wrong, before anything is written.
- Everything is checked before anything is written: the output folder, every file of every
  config against its prompts, the results folder's prompt build (`check_same_prompts`). Then
  the files are read again to write their rows, each checked against the sha256 it had.
- Only the configs found are imported (a subset is fine), and of a config only the items its
  files hold.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from promptgen.core.errors import ProbeError
from promptgen.probe_registry import probe_extras, probe_format
from runners.model import identity as model_identity
from runners.out_folder import check_out_folder
from runners.prompts import PromptConfig, load_prompt_config
from runners.results import KEY_FILE, ResultKey, record_import
from runners.results.check import check_same_prompts
from runners.results.parts import file_lock
from runners.session import Session, result_key

from .common import ImportFormat, SourceFile

#: the model revision of imported rows: this prefix and the digest of the files
REVISION_PREFIX = "imported-"
#: rows a part holds (an import writes as a run does, in parts, then compacts)
FLUSH_EVERY = 100_000


@dataclass(frozen=True)
class ImportRequest:
    """One `probes import`: a folder of released outputs, its format, the prompts they answer, the model's name."""

    source: str | Path
    format: str
    prompts: str | Path
    model_name: str
    out: str | Path
    #: only these configs (None: every config the folder has files for)
    configs: Sequence[str] | None = None
    #: talent-or-luck-csv: the model folder of the release's layout, where it holds several
    source_model: str | None = None
    #: the prompt dataset's revision (a Hub dataset)
    revision: str | None = None

    def __post_init__(self) -> None:
        known = probe_extras("import_formats")
        if self.format not in known:
            raise ProbeError(f"--format must be one of {', '.join(known)}, got {self.format!r}")


@dataclass(frozen=True)
class ImportedConfig:
    """What one config's import did."""

    config: str
    key_dir: Path
    #: the imported files of this config (relative names) and their rows
    files: dict[str, int]
    #: rows in the files; added now; there already under the key (an earlier import of the same files)
    rows: int
    added: int
    already: int
    refusals: int

    def line(self) -> str:
        return (
            f"{self.config}: {self.added:,} rows imported ({self.already:,} already there), "
            f"{self.refusals:,} refused, from {len(self.files)} file(s)"
        )


@dataclass(frozen=True)
class ImportResult:
    """The results folder written, the key the rows are under, and each config's import."""

    path: Path
    key: ResultKey
    configs: list[ImportedConfig] = field(default_factory=list)


@dataclass
class _Config:
    """One config's checked import: its prompts, lookup, files (with sha256 and rows) and prompt positions."""

    prompts: PromptConfig
    index: Any
    files: list[tuple[SourceFile, str, int]] = field(default_factory=list)
    positions: list[np.ndarray] = field(default_factory=list)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def files_digest(format_name: str, files: Sequence[tuple[str, str]]) -> str:
    """sha256 of the format and each file's (relative name, sha256), sorted: what an import's rows are keyed by."""
    payload = {"format": format_name, "files": sorted([name, sha] for name, sha in files)}
    return _sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode())


def _select(
    fmt: ImportFormat, found: list[SourceFile], configs: Sequence[str] | None, folder: Path
) -> list[SourceFile]:
    """The files of the configs asked (`--config`), each asked config one the format holds and the folder has."""
    if configs is None:
        return found
    known = set(fmt.configs())
    unknown = [c for c in configs if c not in known]
    if unknown:
        raise ProbeError(f"--config {unknown[0]!r}: --format {fmt.name} holds {', '.join(sorted(known))}")
    present = {f.config for f in found}
    absent = [c for c in configs if c not in present]
    if absent:
        raise ProbeError(f"--config {absent[0]!r}: {folder} has no file of it")
    return [f for f in found if f.config in set(configs)]


def _check(fmt: ImportFormat, request: ImportRequest, files: list[SourceFile], note: Callable[[str], None]):
    """Pass 1: every file read, hashed and checked against its prompts; nothing kept of the rows but positions."""
    checked: dict[str, _Config] = {}
    for source in files:
        if source.config not in checked:
            prompts = load_prompt_config(str(request.prompts), source.config, revision=request.revision)
            checked[source.config] = _Config(prompts, fmt.prepare(prompts))
        entry = checked[source.config]
        note(f"checking {source.name}")
        data = _read(source)
        parsed = fmt.parse(source, data, entry.prompts, entry.index)
        if not len(parsed.positions):
            raise ProbeError(
                f"{source.name}: no rows (a header, no answers); take it out of {request.source}, or import the "
                "files that hold answers"
            )
        entry.files.append((source, _sha256(data), len(parsed.positions)))
        entry.positions.append(parsed.positions)
    for config, entry in checked.items():
        owner = np.concatenate([np.full(len(p), k) for k, p in enumerate(entry.positions)])
        positions = np.concatenate(entry.positions)
        order = np.argsort(positions, kind="stable")
        twice = np.flatnonzero(positions[order][1:] == positions[order][:-1])
        if len(twice):
            a, b = owner[order][twice[0]], owner[order][twice[0] + 1]
            item = entry.prompts.dataset[int(positions[order][twice[0]])]["id"]
            raise ProbeError(
                f"{entry.files[b][0].name}: item {item!r} of config {config!r} is answered in "
                f"{entry.files[a][0].name} too: each item is imported once"
            )
    return checked


@contextlib.contextmanager
def _quiet_datasets() -> Iterator[None]:
    """No `datasets` progress bars while the prompt configs load: the command's one line is its output."""
    from datasets.utils import logging as datasets_logging

    shown = datasets_logging.is_progress_bar_enabled()
    datasets_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            datasets_logging.enable_progress_bar()


def _read(source: SourceFile) -> bytes:
    try:
        return source.path.read_bytes()
    except OSError as exc:
        raise ProbeError(f"{source.name}: cannot read it ({exc.strerror or exc})") from exc


def import_results(request: ImportRequest, *, progress: Callable[[str], None] | None = None) -> ImportResult:
    """`probes import` (module docstring): check everything, then write the rows into `request.out`."""
    note = progress or (lambda _text: None)
    fmt: ImportFormat = probe_format("import_formats", request.format)
    folder = Path(request.source).expanduser()
    if not folder.is_dir():
        raise ProbeError(f"{request.source}: not a folder (the released outputs to import: {fmt.layout})")
    name = model_identity.check_model_name(request.model_name)
    out = check_out_folder(request.out, inputs=[("DIR", folder), ("--prompts", request.prompts)])
    files = _select(fmt, fmt.discover(folder, request.source_model), request.configs, folder)
    with _quiet_datasets():
        checked = _check(fmt, request, files, note)
    digest = files_digest(fmt.name, [(s.name, sha) for e in checked.values() for s, sha, _ in e.files])
    settings, chat = fmt.scoring()
    key = result_key(name, REVISION_PREFIX + digest, settings, chat, dtype=None, backend=fmt.backend)
    sessions = {}
    for config, entry in checked.items():  # the results folder's checks of a run, for every config, before writing
        positions = np.sort(np.concatenate(entry.positions))
        narrowed = replace(entry.prompts, dataset=entry.prompts.dataset.select(positions))
        check_same_prompts(out, narrowed.provenance())
        sessions[config] = Session.open(narrowed, out, key, chat=chat, batch_size=None, flush_every=FLUSH_EVERY)
    with _alone(out, key):
        for session in sessions.values():
            _remove_left_temp_files(session.folder)
        configs = {config: session.folder.name for config, session in sessions.items()}
        record_import(out, key.model_revision, {"format": fmt.name, "model": key.model, "configs": configs})
        return ImportResult(out, key, _write(fmt, checked, sessions, digest, note))


def _write(
    fmt: ImportFormat,
    checked: dict[str, _Config],
    sessions: dict[str, Session],
    digest: str,
    note: Callable[[str], None],
) -> list[ImportedConfig]:
    """Pass 2: each config's files read again (each checked against the sha256 it had), its rows written, its run
    recorded."""
    imported = []
    for config, entry in checked.items():
        session = sessions[config]
        for source, sha, _ in entry.files:
            note(f"writing {source.name}")
            data = _read(source)
            if _sha256(data) != sha:
                raise ProbeError(f"{source.name} changed while it was imported; import it again")
            rows = fmt.parse(source, data, entry.prompts, entry.index).rows()
            session.add([row for row in rows if row["id"] in session.hashes])
        record = {
            "format": fmt.name,
            "digest": digest,
            "files": [{"path": s.name, "sha256": sha, "rows": n} for s, sha, n in entry.files],
        }
        summary = session.finish(backend=fmt.backend, dtype=None, hardware={}, extra={"imported": record})
        imported.append(
            ImportedConfig(
                config=config,
                key_dir=summary.key_dir,
                files={s.name: n for s, _, n in entry.files},
                rows=summary.selected,
                added=summary.items,
                already=summary.skipped,
                refusals=summary.refusals,
            )
        )
    return imported


@contextlib.contextmanager
def _alone(out: Path, key: ResultKey) -> Iterator[None]:
    """Hold this import's lock in `out` (one per key: an import of the same files), or refuse: only one writes."""
    from filelock import Timeout

    out.mkdir(parents=True, exist_ok=True)
    lock = file_lock(out / f"import-{key.digest[:16]}")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise ProbeError(
            f"{out}: another `probes import` of these files into it is running; let it finish (it writes the same rows)"
        ) from None
    try:
        yield
    finally:
        lock.release()


def _remove_left_temp_files(folder: Path) -> None:
    """Remove the temporary files a killed import left in its key folder.

    Only an import of the same files writes the key folder (its revision is their digest), and
    this one holds their lock (`_alone`): any temporary file there is a killed import's.
    """
    for pattern in (".part-*.tmp", f".{KEY_FILE}.*.tmp"):
        for path in folder.glob(pattern):
            path.unlink(missing_ok=True)
