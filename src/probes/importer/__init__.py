"""`probes import`: another team's released model outputs -> a results folder that `analyze` and `publish` read.

Each format is a probe's own (`ProbeCommands.import_formats`: the Talent-or-Luck release's scorer CSV
files, the inverse of `probes export`; the intergroup-empathy authors' generation TSV files), a
reader in that probe's room (`common.ImportFormat`), found through the registry. Each file's rows
are joined to the prompt dataset's rows and checked against them; the rows are then written with
the results layer a run writes with (`runners.run.session.Session`: key folders, atomic parts,
compaction, the manifest entry under its lock, the card), so an imported folder is one more
results folder.

- The result key: the model's content is the imported files' content, `model_revision =
  imported-<sha256>` of the format and every imported file's relative name and sha256 (one
  revision for all the configs of one import, so the analysis pairs them as one run); the
  scoring is each config's declared protocol, as a run's is, which must be the one the format's
  answers followed (the release's scorer, the authors' generation and parser: `resolve_import`),
  with `backend` `import:<format>` and no dtype. Importing the same files again adds nothing: same
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
- Everything is checked before anything is written: each config resolved as `probes run` resolves
  it (`runners.run.runner.resolve_protocol`: the output folder, the results folder's prompt build,
  the protocol), every file of every config against its prompts.
- Each file is read once, as a stream: its sha256 is of the bytes parsed, and a format that
  reads in chunks (`common.ChunkedImportFormat.read`; the empathy authors' files) holds one
  chunk in memory, never the file. Each chunk's rows are made as it is checked and kept in a
  temporary folder (Arrow, compressed; removed when the import ends, whatever the outcome);
  once every file is checked they are added to each config's session a batch at a time
  (`Session.add_table`: each row's prompt hashed as it is added), in parts merged into one per
  config a row group at a time (`Session.open`'s `merge_parts`), so an import's memory is a
  chunk's and a batch's, not a config's (benchmarks/import_memory.py).
- Only the configs found are imported (a subset is fine), and of a config only the items its
  files hold.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from promptgen.core.errors import ProbeError
from promptgen.core.files import writing
from promptgen.core.memory import release_memory
from promptgen.core.release_format import load_format
from runners.model import identity as model_identity
from runners.prompts import PromptConfig
from runners.results import KEY_FILE, RESULT_SCHEMA, ResultKey, finished_keys, read_manifest, record_import, rows_table
from runners.results.out_folder import check_out_folder
from runners.results.parts import file_lock
from runners.run.request import ResolvedRun
from runners.run.session import Session, result_key

from ..probe_part import probe_extras
from .common import ImportFormat, ParsedFile, SourceFile, rows_to_arrow
from .resolve import resolve_import

#: the model revision of imported rows: this prefix and the digest of the files
REVISION_PREFIX = "imported-"
#: rows added to a session and written to its part at a time
FLUSH_EVERY = 32_768
#: rows of a staged chunk read back at a time
STAGED_BATCH = 32_768
#: bytes read from a file at a time
READ_BYTES = 1 << 20
#: a staged chunk's columns: the result row's, and the row's position in its prompt config
STAGED_SCHEMA = RESULT_SCHEMA.append(pa.field("_position", pa.int64()))


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
    #: (relative name, sha256) of each imported file of this config
    sha256s: tuple[tuple[str, str], ...] = ()

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
    #: one line each: an earlier import of the same model that shares files with this one (`earlier_imports`)
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Config:
    """One config's checked import: its resolved run (prompts, protocol), lookup, files (with sha256 and rows), prompt
    positions, staged rows."""

    @property
    def prompts(self) -> PromptConfig:
        return self.run.prompts

    run: ResolvedRun
    index: Any
    files: list[tuple[SourceFile, str, int]] = field(default_factory=list)
    positions: list[np.ndarray] = field(default_factory=list)
    #: each file's rows, made as it was checked (`_stage`)
    staged: list[Path] = field(default_factory=list)


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


def _check(
    fmt: ImportFormat,
    request: ImportRequest,
    files: list[SourceFile],
    note: Callable[[str], None],
    staging: Path,
    out: Path,
) -> dict[str, _Config]:
    """Every config resolved (`resolve_import`); every file read once, hashed and checked against its prompts, its
    rows staged in `staging` (`_stage`)."""
    checked: dict[str, _Config] = {}
    for k, source in enumerate(files):
        if source.config not in checked:
            run = resolve_import(fmt, request, source.config, out)
            release_memory(run.prompts.dataset)
            checked[source.config] = _Config(run, fmt.prepare(run.prompts))
            release_memory(run.prompts.dataset)
        entry = checked[source.config]
        note(f"checking {source.name}")
        staged = staging / f"{k:06d}.arrow"
        sha, positions = _stage(fmt, source, entry, staged)
        if not len(positions):
            raise ProbeError(
                f"{source.name}: no rows (a header, no answers); take it out of {request.source}, or import the "
                "files that hold answers"
            )
        entry.files.append((source, sha, len(positions)))
        entry.positions.append(positions)
        entry.staged.append(staged)
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


class _Hashing(io.RawIOBase):
    """A file read through: the sha256 of every byte read; a read error is one line naming the file."""

    def __init__(self, source: SourceFile) -> None:
        try:
            self._raw = source.path.open("rb", buffering=0)
        except OSError as exc:
            raise ProbeError(f"{source.name}: cannot read it ({exc.strerror or exc})") from exc
        self._source = source
        self.sha = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        try:
            n = self._raw.readinto(buffer)
        except OSError as exc:
            raise ProbeError(f"{self._source.name}: cannot read it ({exc.strerror or exc})") from exc
        if n:
            self.sha.update(memoryview(buffer)[:n])
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


def _stage(fmt: ImportFormat, source: SourceFile, entry: _Config, path: Path) -> tuple[str, np.ndarray]:
    """Read `source` once: its chunks checked (`read`, else the whole file through `parse`), each chunk's rows made
    and written to `path` (Arrow, with each row's prompt position); its sha256 and the positions of its rows."""
    chunked = getattr(fmt, "read", None)
    positions: list[np.ndarray] = []
    hashing = _Hashing(source)
    with io.BufferedReader(hashing, READ_BYTES) as stream, _stage_writer(path) as write:
        if chunked is not None:
            chunks: Iterator[ParsedFile] = chunked(source, stream, entry.prompts, entry.index)
        else:
            chunks = iter([fmt.parse(source, stream.read(), entry.prompts, entry.index)])
        for chunk in chunks:
            at = np.asarray(chunk.positions, dtype=np.int64)
            made = chunk.rows()
            table = rows_table(made) if isinstance(made, pa.Table) else rows_to_arrow(made)
            if len(table) != len(at):
                raise ProbeError(f"--format {fmt.name}: {source.name}: {len(at)} rows checked but {len(table)} made")
            write(table.append_column("_position", pa.array(at)))
            positions.append(at)
            del chunk, made, table
            release_memory(entry.prompts.dataset)
        while stream.read(READ_BYTES):  # what the reader left unread is the file's too
            pass
    return hashing.sha.hexdigest(), np.concatenate(positions) if positions else np.zeros(0, dtype=np.int64)


@contextlib.contextmanager
def _stage_writer(path: Path) -> Iterator[Callable[[pa.Table], None]]:
    """Write tables to the staged file `path` (an Arrow stream, compressed); a write error is one line."""
    with writing("the import's staged rows", path.parent):
        sink = pa.OSFile(str(path), "wb")
        writer = pa.ipc.new_stream(sink, STAGED_SCHEMA, options=pa.ipc.IpcWriteOptions(compression="zstd"))

    def write(table: pa.Table) -> None:
        with writing("the import's staged rows", path.parent):
            writer.write_table(table, max_chunksize=STAGED_BATCH)

    try:
        yield write
    except BaseException:
        with contextlib.suppress(OSError, pa.ArrowException):
            writer.close()
            sink.close()
        raise
    with writing("the import's staged rows", path.parent):
        writer.close()
        sink.close()


def _staged(path: Path) -> Iterator[tuple[pa.Table, np.ndarray]]:
    """A file's staged rows, a batch at a time: (result rows, their prompt positions)."""
    with pa.OSFile(str(path), "rb") as source, pa.ipc.open_stream(source) as reader:
        for batch in reader:
            table = pa.Table.from_batches([batch])
            yield table.drop_columns(["_position"]), table["_position"].to_numpy()


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


def import_results(request: ImportRequest, *, progress: Callable[[str], None] | None = None) -> ImportResult:
    """`probes import` (module docstring): check everything, then write the rows into `request.out`."""
    note = progress or (lambda _text: None)
    fmt: ImportFormat = load_format(request.format, probe_extras("import_formats")[request.format])
    folder = Path(request.source).expanduser()
    if not folder.is_dir():
        raise ProbeError(f"{request.source}: not a folder (the released outputs to import: {fmt.layout})")
    name = model_identity.check_model_name(request.model_name)
    out = check_out_folder(request.out, inputs=[("DIR", folder), ("--prompts", request.prompts)])
    files = _select(fmt, fmt.discover(folder, request.source_model), request.configs, folder)
    with tempfile.TemporaryDirectory(prefix="probes-import-") as staging:  # removed whatever the outcome
        with _quiet_datasets():
            checked = _check(fmt, request, files, note, Path(staging), out)
        return _import_checked(fmt, request, checked, name, out, note)


def _import_checked(
    fmt: ImportFormat,
    request: ImportRequest,
    checked: dict[str, _Config],
    name: str,
    out: Path,
    note: Callable[[str], None],
) -> ImportResult:
    """Every file checked and staged: the results folder's checks, then each config's rows written."""
    digest = files_digest(fmt.name, [(s.name, sha) for e in checked.values() for s, sha, _ in e.files])
    if not checked:
        raise ProbeError(f"{request.source}: no files of --format {fmt.name} to import ({fmt.layout})")
    # every config's protocol is the format's scoring (`resolve_import`): one key for the import's configs
    first = next(iter(checked.values())).run
    chat = bool(first.chat)  # decided: `resolve_import` checked it is the format's
    key = result_key(name, REVISION_PREFIX + digest, first.settings, chat, dtype=None, backend=fmt.backend)
    sessions = {}
    for config, entry in checked.items():  # each config's results checks were its resolving's (`resolve_import`)
        positions = np.sort(np.concatenate(entry.positions))
        narrowed = replace(entry.prompts, dataset=entry.prompts.dataset.select(positions))
        sessions[config] = Session.open(
            narrowed, out, key, chat=chat, batch_size=None, flush_every=FLUSH_EVERY, hash_later=True, merge_parts=True
        )
    with _alone(out, key):
        for session in sessions.values():
            _remove_left_temp_files(session.folder)
        configs = {config: session.folder.name for config, session in sessions.items()}
        record_import(out, key.model_revision, {"format": fmt.name, "model": key.model, "configs": configs})
        imported = _write(fmt, checked, sessions, digest, note)
        manifest = read_manifest(out)
        warnings = [line for c in imported for line in earlier_imports(out, manifest, fmt.name, key.model, c)]
        return ImportResult(out, key, imported, warnings)


def earlier_imports(
    out: Path, manifest: dict[str, Any], format_name: str, model: str, imported: ImportedConfig
) -> list[str]:
    """One line for each other finished import of `model` in this config, of this format, that shares a file (its
    name and sha256) with `imported`: the analysis reads the two as two runs of the model.

    A partial import (one batch, to try it) and the later import of every file are each keyed by their own files,
    so the later one adds a second run beside the first, as a second `probes run` of another revision does. Nothing
    is deleted for the user (the first may be wanted): the line names the folder that holds fewer of the files and
    says to delete it to leave it out, as the unfinished keys' lines do.
    """
    ours = set(imported.sha256s)
    lines = []
    finished = finished_keys(manifest)
    for run in manifest.get("runs", {}).values():
        record, config, folder = run.get("imported") or {}, imported.config, run.get("key")
        if (run.get("prompt_dataset") or {}).get("config") != config or folder == imported.key_dir.name:
            continue
        if run.get("model") != model or record.get("format") != format_name or (config, folder) not in finished:
            continue
        theirs = {(f.get("path"), f.get("sha256")) for f in record.get("files") or []}
        shared = len(theirs & ours)
        if not shared or not (imported.key_dir.parent / str(folder)).is_dir():
            continue
        earlier = imported.key_dir.parent / str(folder)
        if theirs <= ours:
            what, drop = f"{shared} of these {len(ours)} files", earlier
        elif ours <= theirs:
            what, drop = f"every one of these files and {len(theirs) - shared} more", imported.key_dir
        else:
            what, drop = f"{shared} of these files and {len(theirs - ours)} others", earlier
        lines.append(
            f"{config}: {earlier} holds an earlier import of {model} from {what}; analyze reads the two as two runs "
            f"of the model: delete {drop} to leave it out"
        )
    return lines


def _write(
    fmt: ImportFormat,
    checked: dict[str, _Config],
    sessions: dict[str, Session],
    digest: str,
    note: Callable[[str], None],
) -> list[ImportedConfig]:
    """Each config's staged rows added to its session, a batch at a time (those not under the key already), its run
    recorded."""
    imported = []
    for config, entry in checked.items():
        session = sessions[config]
        rows = np.sort(np.concatenate(entry.positions))  # the session's dataset rows, by their config position
        todo = np.sort(np.asarray(session.todo, dtype=np.int64))
        for (source, _, _), staged in zip(entry.files, entry.staged, strict=True):
            note(f"writing {source.name}")
            for table, positions in _staged(staged):
                at = np.searchsorted(rows, positions)
                found = np.searchsorted(todo, at)
                keep = (found < len(todo)) & (todo[np.minimum(found, len(todo) - 1)] == at) if len(todo) else found < 0
                session.add_table(table.filter(pa.array(keep)), at[keep])
                release_memory(session.prompts.dataset)
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
                sha256s=tuple((s.name, sha) for s, sha, _ in entry.files),
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
