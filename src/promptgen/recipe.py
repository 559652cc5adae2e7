"""Load and validate a dataset recipe (`builders/<name>.yaml`).

A recipe is the whole, declarative description of one published dataset: its name and
semantic version, the sources with URL + sha256 + license, and the builder's parameters.
Unknown keys are errors (a typo must not silently fall back to a default), and the
recipe's sha256 goes into the manifest so a dataset names the exact recipe it came from.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .assets import builders_dirs
from .core.errors import RecipeError
from .core.validate import take
from .protocols import ProtocolRule, parse_protocols

_SEMVER = re.compile(r"^\d+\.\d+\.\d+$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class SourceSpec:
    """One source file of a recipe.

    `path` is where the file lives inside a sources folder (`--sources DIR`) and inside
    the download cache; `url` is where it is downloaded from; `sha256` pins the content of
    the file at `path` (None means "not pinned": the build records the observed hash and
    warns). When `member` is set, `url` is a zip archive (a wheel is one) and the file is
    that member of it: the archive is downloaded, the member extracted, and its hash checked.
    `archive` is where a sources folder may hold that archive instead of the extracted file.
    `optional`: an extra the build uses where it is at hand (the `--sources` folder or the cache)
    and goes without otherwise; it is never downloaded unasked (`promptgen.sources.resolve_sources`).
    """

    id: str
    path: str
    url: str
    sha256: str | None
    license: str
    citation: str
    member: str | None = None
    archive: str | None = None
    optional: bool = False


@dataclass(frozen=True)
class Recipe:
    """A parsed recipe. `parameters` and `corrections` are validated by the builder."""

    name: str
    version: str
    builder: str
    pretty_name: str
    license: str
    card: str
    description: str
    citation: str
    tags: tuple[str, ...]
    sources: tuple[SourceSpec, ...]
    parameters: dict[str, Any]
    corrections: dict[str, Any] = field(default_factory=dict)
    #: the scoring the paper used, per config pattern (`promptgen.protocols`)
    protocols: tuple[ProtocolRule, ...] = ()
    path: Path | None = None
    sha256: str = ""

    def source(self, source_id: str) -> SourceSpec:
        for spec in self.sources:
            if spec.id == source_id:
                return spec
        raise RecipeError(f"{self.path}: recipe has no source with id {source_id!r}")


#: the required texts a `Recipe` holds as written
_TOP_TEXTS = ("name", "version", "builder", "pretty_name", "license", "card")
_TOP_REQUIRED = {**dict.fromkeys(_TOP_TEXTS, str), "sources": list, "parameters": dict}
_TOP_OPTIONAL = {"description": str, "citation": str, "tags": list, "corrections": dict, "protocols": list}
_SOURCE_REQUIRED = {"id": str, "path": str, "url": str, "license": str}
_SOURCE_OPTIONAL = {"sha256": (str, type(None)), "citation": str, "member": str, "archive": str, "optional": bool}


def find_recipe(name_or_path: str) -> Path:
    """A recipe file from a dataset name (`talent-or-luck`) or a path to a YAML file."""
    candidate = Path(name_or_path)
    if candidate.suffix in {".yaml", ".yml"}:
        if not candidate.is_file():
            raise RecipeError(f"recipe file {candidate} does not exist")
        return candidate
    folders = builders_dirs()
    for folder in folders:
        path = folder / f"{name_or_path.replace('-', '_')}.yaml"
        if path.is_file():
            return path
    # a dataset name that differs from its file name (a recipe's `name:` is the dataset's)
    by_name = list_recipes()
    if name_or_path in by_name:
        return by_name[name_or_path]
    known = ", ".join(sorted(by_name)) or "none"
    where = " or ".join(str(folder) for folder in folders)
    raise RecipeError(f"no recipe named {name_or_path!r} in {where} (known: {known})")


def list_recipes() -> dict[str, Path]:
    """Dataset name -> recipe path for every recipe in the recipe folders (the first folder's wins)."""
    out: dict[str, Path] = {}
    for path in (p for folder in reversed(builders_dirs()) for p in sorted(folder.glob("*.yaml"))):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except yaml.YAMLError:
            continue
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            out[data["name"]] = path
    return out


def parse_recipe(data: Any, *, path: Path, sha256: str) -> Recipe:
    """Validate a recipe's YAML content (already parsed) into a `Recipe`."""
    data = take(str(path), data, _TOP_REQUIRED, _TOP_OPTIONAL)
    if not _SEMVER.match(data["version"]):
        raise RecipeError(f"{path}: version {data['version']!r} is not semantic (MAJOR.MINOR.PATCH)")
    sources = []
    seen: set[str] = set()
    for i, raw in enumerate(data["sources"]):
        where = f"{path}: sources[{i}]"
        raw = take(where, raw, _SOURCE_REQUIRED, _SOURCE_OPTIONAL)
        for key in _SOURCE_REQUIRED:
            if not raw[key]:
                raise RecipeError(f"{where}.{key} must not be empty")
        if "archive" in raw and "member" not in raw:
            raise RecipeError(f"{where}: `archive` needs `member` (the file to extract from it)")
        sha = raw.get("sha256")
        if sha is not None and not _SHA256.match(sha):
            raise RecipeError(f"{where}.sha256 must be 64 lowercase hex digits or null, got {sha!r}")
        if raw["id"] in seen:
            raise RecipeError(f"{where}: duplicate source id {raw['id']!r}")
        seen.add(raw["id"])
        sources.append(
            SourceSpec(
                **{key: raw[key] for key in _SOURCE_REQUIRED},
                sha256=sha,
                citation=str(raw.get("citation", "")),
                member=raw.get("member"),
                archive=raw.get("archive"),
                optional=bool(raw.get("optional", False)),
            )
        )
    return Recipe(
        **{key: data[key] for key in _TOP_TEXTS},
        description=str(data.get("description", "")).strip(),
        citation=str(data.get("citation", "")).strip(),
        tags=tuple(str(t) for t in data.get("tags", [])),
        sources=tuple(sources),
        parameters=dict(data["parameters"]),
        corrections=dict(data.get("corrections", {})),
        protocols=parse_protocols(data.get("protocols"), str(path)),
        path=path,
        sha256=sha256,
    )


def load_recipe(name_or_path: str) -> Recipe:
    """Find, read and validate a recipe; its sha256 is taken over the file's bytes."""
    path = find_recipe(name_or_path)
    raw = path.read_bytes()
    try:
        data = yaml.safe_load(raw.decode("utf-8"))
    except yaml.YAMLError as exc:
        raise RecipeError(f"{path}: not valid YAML: {exc}") from exc
    return parse_recipe(data, path=path, sha256=hashlib.sha256(raw).hexdigest())
