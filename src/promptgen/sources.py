"""Get a recipe's source files: from a local folder, the download cache, or the network.

Resolution order for each source of a recipe:

1. `--sources DIR` (or `PROBES_SOURCES`): the file must be at `DIR/<source.path>`; nothing
   is downloaded (this is how tests, CI and air-gapped machines build).
2. otherwise the cache (`PROBES_CACHE`, default `~/.cache/social-bias-probes/sources`),
   filled on first use by downloading `source.url` with `requests`.

A pinned sha256 is always verified; a download is hashed while it streams to a temporary
file and only renamed into the cache once the hash matches, so a broken download never
poisons the cache.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .core.errors import SourceError
from .core.files import sha256_file
from .core.outputs import Reference
from .recipe import SourceSpec

log = logging.getLogger(__name__)

_CHUNK = 1 << 20


@dataclass(frozen=True)
class SourceOptions:
    """Where a build's source files come from (`--sources`, `--cache-dir`, `--offline`): one value every build takes.

    `folder` holds the files laid out as the recipe's `path` fields, and nothing is downloaded;
    else the download cache (`cache_dir`, default `default_cache_dir()`), filled on first use
    unless `offline`. Both folders are inputs a build's output must never overwrite.
    """

    folder: Path | None = None
    cache_dir: Path | None = None
    offline: bool = False

    @classmethod
    def of(cls, sources: SourceOptions | str | Path | None) -> SourceOptions:
        """`sources` as given: options, or just a folder of source files (`sources="../shared/sources"`)."""
        if isinstance(sources, SourceOptions):
            return sources
        return cls(folder=None if sources is None else Path(sources))

    def references(self) -> list[Reference]:
        """The folders as read-only inputs, named by their flags (`promptgen.core.outputs.check_output`)."""
        return [Reference("--sources", self.folder), Reference("--cache-dir", self.cache_dir)]


@dataclass(frozen=True)
class ResolvedSource:
    """A source file on local disk with the hash that was observed for it."""

    spec: SourceSpec
    path: Path
    sha256: str
    origin: str  # "sources-dir", "cache" or "download"

    @property
    def pinned(self) -> bool:
        return self.spec.sha256 is not None


def default_cache_dir() -> Path:
    """`PROBES_CACHE`, else `$XDG_CACHE_HOME/social-bias-probes/sources`."""
    if os.environ.get("PROBES_CACHE"):
        return Path(os.environ["PROBES_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "social-bias-probes" / "sources"


def _how_to_supply(spec: SourceSpec) -> str:
    origin = f"the member {spec.member!r} of the archive {spec.url}" if spec.member else spec.url
    return f"Get it from {origin} and place it at DIR/{spec.path}, then pass --sources DIR (or set PROBES_SOURCES=DIR)."


def _check_hash(spec: SourceSpec, path: Path, actual: str) -> None:
    if spec.sha256 is not None and actual != spec.sha256:
        raise SourceError(
            f"sha256 mismatch for source {spec.id!r} at {path}:\n"
            f"  expected {spec.sha256}\n  actual   {actual}\n"
            f"The file is not the release the recipe pins. {_how_to_supply(spec)}"
        )
    if spec.sha256 is None:
        log.warning(
            "source %r is not pinned in the recipe; observed sha256 %s is recorded in the manifest",
            spec.id,
            actual,
        )


def _keep_if_matching(tmp: Path, dest: Path, actual: str, expected: str | None, what: str) -> str:
    """Rename a finished temporary file into place only if its hash is the pinned one."""
    if expected is not None and actual != expected:
        raise SourceError(
            f"sha256 mismatch for {what}:\n  expected {expected}\n  actual   {actual}\nThe file was not kept."
        )
    os.replace(tmp, dest)
    return actual


def download(url: str, dest: Path, *, expected_sha256: str | None, timeout: float = 60.0) -> str:
    """Stream `url` to `dest` atomically; return the sha256 of what was written.

    The body goes to a temporary file beside `dest`, is hashed on the way, and is renamed
    into place only when the hash matches (or nothing is pinned).
    """
    import requests  # imported here: only downloads need it

    dest.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            try:
                with requests.get(url, stream=True, timeout=timeout) as response:
                    response.raise_for_status()
                    for chunk in response.iter_content(chunk_size=_CHUNK):
                        fh.write(chunk)
                        digest.update(chunk)
            except requests.RequestException as exc:
                raise SourceError(f"could not download {url}: {exc}") from exc
        return _keep_if_matching(tmp, dest, digest.hexdigest(), expected_sha256, f"the download of {url}")
    finally:
        tmp.unlink(missing_ok=True)


def resolve_source(
    spec: SourceSpec,
    *,
    sources_dir: Path | None = None,
    cache_dir: Path | None = None,
    offline: bool = False,
) -> ResolvedSource:
    """Find (or download) one source file and verify its hash."""
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if sources_dir is not None:
        path = Path(sources_dir) / spec.path
        if path.is_file():
            actual = sha256_file(path)
            _check_hash(spec, path, actual)
            return ResolvedSource(spec, path, actual, "sources-dir")
        archive = Path(sources_dir) / spec.archive if spec.archive else None
        if archive is not None and archive.is_file():
            dest = cache / spec.path
            actual = _extract_member(spec, archive, dest, origin=str(archive))
            _check_hash(spec, dest, actual)
            return ResolvedSource(spec, dest, actual, "sources-dir-archive")
        also = f" or the archive {archive}" if archive is not None else ""
        raise SourceError(
            f"source {spec.id!r} not found: expected the file {path}{also} "
            f"(sources folder {sources_dir}). {_how_to_supply(spec)}"
        )

    path = cache / spec.path
    if path.is_file():
        actual = sha256_file(path)
        try:
            _check_hash(spec, path, actual)
        except SourceError as exc:
            raise SourceError(f"{exc}\nThe cached copy is stale or corrupt: delete {path} to re-download.") from exc
        return ResolvedSource(spec, path, actual, "cache")
    if offline:
        raise SourceError(
            f"source {spec.id!r} is not in the cache ({path}) and downloads are off (--offline). {_how_to_supply(spec)}"
        )
    log.info("downloading %s -> %s", spec.url, path)
    if spec.member:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=path.parent, prefix=".archive-") as tmp:
            archive = Path(tmp) / "archive.zip"
            download(spec.url, archive, expected_sha256=None)
            actual = _extract_member(spec, archive, path, origin=spec.url)
    else:
        actual = download(spec.url, path, expected_sha256=spec.sha256)
    _check_hash(spec, path, actual)
    return ResolvedSource(spec, path, actual, "download")


def _member_name(zf, member: str) -> str:
    """`member`, or the one archive entry ending in `/member` (archives often wrap their
    content in a top-level folder); KeyError when there is none or several."""
    names = zf.namelist()
    if member in names:
        return member
    matches = [n for n in names if n.endswith("/" + member)]
    if len(matches) == 1:
        return matches[0]
    raise KeyError(member)


def _extract_member(spec: SourceSpec, archive: Path, dest: Path, *, origin: str) -> str:
    """Extract `spec.member` of a zip archive to `dest` atomically; return its sha256.

    The member is hashed before it is renamed into place, so a wrong file never lands.
    """
    import zipfile
    import zlib

    if not spec.member:
        raise SourceError(f"source {spec.id!r} names no archive member to extract from {origin}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        try:
            with (
                zipfile.ZipFile(archive) as zf,
                zf.open(_member_name(zf, spec.member)) as src,
                os.fdopen(fd, "wb") as out,
            ):
                for chunk in iter(lambda: src.read(_CHUNK), b""):
                    out.write(chunk)
        except KeyError as exc:
            raise SourceError(f"the archive {origin} has no member {spec.member!r}") from exc
        except zipfile.BadZipFile as exc:
            raise SourceError(f"{origin} is not a zip archive: {exc}") from exc
        except (zlib.error, EOFError) as exc:
            # a damaged deflate stream raises zlib.error and a truncated one EOFError, mid-read
            raise SourceError(f"{origin}: member {spec.member!r} is corrupt, cannot be extracted ({exc})") from exc
        return _keep_if_matching(tmp, dest, sha256_file(tmp), spec.sha256, f"{spec.member!r} extracted from {origin}")
    finally:
        tmp.unlink(missing_ok=True)


def resolve_sources(
    specs: tuple[SourceSpec, ...] | list[SourceSpec], sources: SourceOptions
) -> dict[str, ResolvedSource]:
    """Resolve every source of a recipe; the first failure is raised before any build work.

    An `optional` source is resolved only where it is at hand, in the `--sources` folder (as
    the file or its archive) or the cache, and is left out of the result otherwise: it is an
    extra a user adds by placing it there, never a download the build starts by itself. One
    that is at hand is checked like any other (its pinned hash included).
    """
    out = {}
    for spec in specs:
        if spec.optional and not _at_hand(spec, sources):
            log.info("optional source %r not found; building without it. %s", spec.id, _how_to_supply(spec))
            continue
        out[spec.id] = resolve_source(
            spec, sources_dir=sources.folder, cache_dir=sources.cache_dir, offline=sources.offline
        )
    return out


def _at_hand(spec: SourceSpec, sources: SourceOptions) -> bool:
    """The source file (or its archive) in the `--sources` folder, or else in the cache."""
    if sources.folder is not None:
        folder = Path(sources.folder)
        return (folder / spec.path).is_file() or (spec.archive is not None and (folder / spec.archive).is_file())
    cache = Path(sources.cache_dir) if sources.cache_dir is not None else default_cache_dir()
    return (cache / spec.path).is_file()
