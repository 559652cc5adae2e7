"""Where `probes sweep` and `probes demo` get each probe's prompt dataset: found in a folder, or built (one rule).

A folder the user names (`--datasets DIR`) is theirs: each probe's dataset there is the one its
recipe file built, whatever its version. A folder the command writes itself (`OUT/datasets`) is
reused only where a dataset was built from the very recipe (its sha256) with the same build
options; anything else is built from the sources. A probe whose private corpus the sources lack
(`ProbeSpec.private_source`) is built from its labelled synthetic stand-in, and the caller is told.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from promptgen.build import build, built_name
from promptgen.core.errors import ProbeError
from promptgen.core.plugins import resolve_reference
from promptgen.hub.read import built_folders, read_build_manifest
from promptgen.probe_registry import probes
from promptgen.recipe import load_recipe
from promptgen.sources import SourceOptions

#: the build options a reused dataset must have been built with, as asked (the others do not name a subset)
MATCHED_OPTIONS = ("configs", "max_events")
#: the recipe a synthetic stand-in folder holds (its sources unpinned)
SYNTHETIC_RECIPE = "recipe.yaml"


@dataclass
class Datasets:
    """Each probe's dataset folder, and those built from a synthetic stand-in (results that test the pipeline only)."""

    folders: dict[str, Path] = field(default_factory=dict)
    synthetic: list[str] = field(default_factory=list)


def find_datasets(folder: Path, names: Sequence[str]) -> dict[str, Path]:
    """The built folder of each probe in `names` under the user's `folder` (`probes build --out folder`)."""
    if not folder.is_dir():
        raise ProbeError(f"--datasets {folder} is not a folder of built datasets")
    found: dict[str, list[Path]] = {}
    for built in built_folders(folder):
        recipe_file = read_build_manifest(built).get("recipe", {}).get("file")
        found.setdefault(str(recipe_file), []).append(built)
    out = {}
    for name in names:
        hits = found.get(load_recipe(name).path.name, [])  # type: ignore[union-attr]
        if not hits:
            raise ProbeError(
                f"--datasets {folder} has no {name} dataset (build it: probes build {name} --out {folder})"
            )
        if len(hits) > 1:
            listed = ", ".join(p.name for p in hits)
            raise ProbeError(f"--datasets {folder} has several {name} datasets ({listed}); keep one")
        out[name] = hits[0]
    return out


def find_built(folder: Path, recipe: str, options: Mapping[str, Any]) -> Path | None:
    """A dataset under `folder` built from `recipe` (by its sha256) with `options`' configs and events."""
    if not folder.is_dir():
        return None
    sha = load_recipe(recipe).sha256
    for built in built_folders(folder):
        info = read_build_manifest(built)
        parameters = info.get("parameters", {})
        same = all(parameters.get(key) == options.get(key) for key in MATCHED_OPTIONS)
        if info.get("recipe", {}).get("sha256") == sha and same:
            return built
    return None


def find_or_build(
    names: Sequence[str],
    sources: SourceOptions,
    *,
    reuse: Path,
    build_into: Path,
    synthetic_dir: Path,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    synthetic_offline: bool = False,
    warn: Callable[[str], None] = lambda _line: None,
    progress: Callable[[str, Callable[[], Path]], Path] = lambda _name, make: make(),
) -> Datasets:
    """Each probe's dataset: reused from `reuse` (`find_built`), else built into `build_into`.

    `options[name]`: the build options of a probe (`configs`, `max_events`, ...). A probe's
    private corpus missing from `sources` (or, with `synthetic_offline`, no source folder and no
    downloads) is written as its synthetic stand-in under `synthetic_dir/<name>`, and `warn` says
    so. `progress(name, make)` wraps each find-or-build (the demo times them).
    """
    out = Datasets()
    for name in names:
        spec, asked = probes()[name], dict((options or {}).get(name, {}))
        source, private = sources, spec.private_source
        if sources.folder is not None:
            lacks = private is not None and not (sources.folder / private).exists()
        else:
            lacks = private is not None and synthetic_offline and sources.offline
        if lacks and spec.synthetic_sources:
            where = "" if sources.folder is None else f"--sources {sources.folder} has no {private} corpus: "
            warn(
                f"{where}{name} is built from a small synthetic corpus in its format, whose results test the "
                "pipeline only"
            )
            folder = resolve_reference(spec.synthetic_sources)(synthetic_dir / name)
            source = replace(sources, folder=Path(folder))
            out.synthetic.append(name)
        recipe_file = source.folder / SYNTHETIC_RECIPE if name in out.synthetic and source.folder else None
        recipe = str(recipe_file) if recipe_file is not None and recipe_file.is_file() else name

        def make(recipe: str = recipe, source: SourceOptions = source, asked: dict = asked, name: str = name) -> Path:
            found = find_built(reuse, recipe, asked)
            if found is not None:
                return found
            stale = reuse / built_name(recipe, **asked)
            if build_into != reuse and stale.exists():  # the build would take this folder's place: say so before it
                raise ProbeError(
                    f"{stale} holds another build of {name} (another version of its recipe, or other build "
                    f"options); move it away to build it again, or name the folder that holds it with --datasets"
                )
            return build(recipe, out_dir=build_into, sources=source, **asked).path

        out.folders[name] = progress(name, make)
    return out


def check_local_sources(sources: Path | None, names: Sequence[str]) -> None:
    """Every source folder the probes' recipes read must be in `sources` (offline), but a private corpus."""
    if sources is None:
        return
    specs = probes()
    needed = {
        source.path.split("/")[0]
        for name in names
        for source in load_recipe(name).sources
        if not source.optional and source.path.split("/")[0] != specs[name].private_source
    }
    missing = sorted(folder for folder in needed if not (sources / folder).exists())
    if missing:
        raise ProbeError(f"--sources {sources} lacks {', '.join(missing)}; see ../shared/sources for the layout")
