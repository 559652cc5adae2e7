"""`probes build`: recipe -> sources -> the builder's dataset draft -> Hub-ready folder."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .core.build_options import BuildOptions
from .core.errors import RecipeError
from .core.outputs import Input, Reference, output_path
from .core.plugins import resolve_reference
from .core.version import __version__
from .hub.cards import render_card
from .hub.draft import DatasetDraft
from .hub.folder import check_dataset_target, write_hub_folder
from .hub.read import read_build_manifest, read_built_from
from .probe_registry import spec_of_builder
from .protocols import protocols_by_config
from .recipe import Recipe, load_recipe
from .sources import ResolvedSource, SourceOptions, resolve_sources


def chosen_configs(configs: Sequence[str] | None) -> tuple[str, ...]:
    """`--config` values as `BuildOptions.configs`: sorted, each once (the dataset's name is made of them)."""
    chosen = tuple(configs or ())
    repeated = sorted({c for c in chosen if chosen.count(c) > 1})
    if repeated:
        raise RecipeError(f"--config names {repeated[0]!r} twice")
    return tuple(sorted(chosen))


def select_configs(draft: DatasetDraft, recipe: Recipe, options: BuildOptions) -> DatasetDraft:
    """The draft with only the chosen configs (rows are drawn lazily: the others are never made)."""
    if not options.configs:
        return draft
    names = [config.name for config in draft.configs]
    unknown = [c for c in options.configs if c not in names]
    if unknown:
        raise RecipeError(f"recipe {recipe.name!r} has no config {unknown[0]!r}; it builds: {', '.join(names)}")
    kept = [config for config in draft.configs if config.name in options.configs]
    default = draft.default_config if draft.default_config in options.configs else None
    return replace(
        draft,
        name=options.dataset_name(recipe.name),
        configs=kept,
        parameters={**draft.parameters, "configs": [config.name for config in kept]},
        default_config=default,
    )


@dataclass(frozen=True)
class BuildResult:
    path: Path
    manifest: dict[str, Any]


def draft_build(
    recipe: Recipe, sources: SourceOptions, options: BuildOptions
) -> tuple[DatasetDraft, dict[str, ResolvedSource]]:
    """Resolve the sources and ask the recipe's probe for its draft (no output written)."""
    spec = spec_of_builder(recipe.builder, recipe.path)
    options.check_taken(recipe.name, spec.build_options)
    resolved = resolve_sources(recipe.sources, sources)
    return resolve_reference(spec.draft)(recipe, resolved, options), resolved


def build_manifest(recipe: Recipe, draft: DatasetDraft, sources: dict[str, ResolvedSource]) -> dict[str, Any]:
    """The manifest fields known before writing (rows, files, fingerprint come later)."""
    import pyarrow

    return {
        "name": draft.name,
        "version": draft.version or recipe.version,
        "pretty_name": recipe.pretty_name,
        "license": recipe.license,
        "recipe": {"file": recipe.path.name if recipe.path else None, "sha256": recipe.sha256},
        "sources": [
            {
                "id": s.spec.id,
                "path": s.spec.path,
                "url": s.spec.url,
                "sha256": s.sha256,
                "pinned": s.pinned,
                "license": s.spec.license,
            }
            for s in sources.values()
        ],
        "parameters": draft.parameters,
        "protocols": {
            config: protocol.as_manifest()
            for config, protocol in protocols_by_config(recipe.protocols, [c.name for c in draft.configs]).items()
        },
        "build_report": draft.report,
        "generator": {"package": "social-bias-probes", "version": __version__, "pyarrow": pyarrow.__version__},
    }


def _options(
    *,
    full: bool = False,
    max_events: int | None = None,
    derived: Mapping[str, Any] | None = None,
    configs: Sequence[str] | None = None,
) -> BuildOptions:
    return BuildOptions(full=full, max_events=max_events, derived=dict(derived or {}), configs=chosen_configs(configs))


def built_name(name_or_path: str, **options: Any) -> str:
    """The folder name `build(name_or_path, **options)` writes under its `out_dir`, known before any work."""
    return _options(**options).dataset_name(load_recipe(name_or_path).name)


def check_new_version(
    dataset: Path,
    recipe: str,
    out_dir: Path,
    *,
    inputs: Sequence[Input],
    sources: SourceOptions | str | Path | None,
    overwrite: bool,
    flag: str,
    expected: str,
    same_name: bool = False,
) -> tuple[dict[str, Any], Recipe]:
    """(manifest, recipe) of DATASET, which a derive step rebuilds as a new version, checked before any work.

    `probes rewrite` and `probes curate-pairs` rebuild DATASET from `recipe` with a model's output
    as an extra input, at DATASET's own --max-events: DATASET must have been built from `recipe`
    (`read_built_from`), and the folder the rebuild writes (`built_name`) must be one `build` may
    take, none of `inputs` (the results read, DATASET) or the sources.
    """
    manifest, spec = read_built_from(Path(dataset), recipe, flag=flag, expected=expected, same_name=same_name)
    # the name differs from the recipe's with --max-events (`intergroup-empathy-events24`)
    name = BuildOptions(max_events=manifest.get("parameters", {}).get("max_events")).dataset_name(spec.name)
    references = [*inputs, *SourceOptions.of(sources).references()]
    check_dataset_target(output_path(out_dir, "--out") / name, overwrite=overwrite, inputs=references)
    return manifest, spec


def build(
    name_or_path: str,
    *,
    out_dir: Path,
    sources: SourceOptions | str | Path | None = None,
    full: bool = False,
    max_events: int | None = None,
    derived: Mapping[str, Any] | None = None,
    configs: Sequence[str] | None = None,
    overwrite: bool = False,
    on_rows: Callable[[str, int], None] | None = None,
    on_draft: Callable[[DatasetDraft], None] | None = None,
) -> BuildResult:
    """Build one dataset folder `out_dir/<name>` from its recipe; atomic on failure.

    `sources`: a folder of source files (nothing is downloaded), or `SourceOptions` (the download
    cache, offline); None downloads into the default cache.

    `derived`: what a probe's own derive step adds to the new version it rebuilds (`probes curate-pairs`'
    pairs, `probes rewrite`'s narratives), by the names its spec's `build_options` lists; another probe's is
    refused before any work. `configs`: build only these (written to `out_dir/<name>-<config>...`).
    """
    recipe = load_recipe(name_or_path)
    sources = SourceOptions.of(sources)
    options = _options(full=full, max_events=max_events, derived=derived, configs=configs)
    if max_events is not None and max_events < 1:
        raise RecipeError(f"--max-events must be a positive number, got {max_events}")
    # fail before any work if the target may not be written (exists, foreign, an input, read-only)
    inputs = [*sources.references(), Reference("the recipe", recipe.path)]
    out_dir = output_path(out_dir, "--out")
    check_dataset_target(out_dir / options.dataset_name(recipe.name), overwrite=overwrite, inputs=inputs)
    draft, resolved = draft_build(recipe, sources, options)
    draft = select_configs(draft, recipe, options)
    if on_draft is not None:
        on_draft(draft)
    manifest = build_manifest(recipe, draft, resolved)
    path = write_hub_folder(
        Path(out_dir),
        draft.name,
        draft.configs,
        manifest=manifest,
        render_card=lambda m, written: render_card(recipe, draft, m, written),
        rows_per_shard=draft.rows_per_shard,
        overwrite=overwrite,
        on_rows=on_rows,
    )
    return BuildResult(path, read_build_manifest(path))


@dataclass(frozen=True)
class LintResult:
    recipe: Recipe
    report: dict[str, Any]


def lint(name_or_path: str, *, sources: SourceOptions | str | Path | None = None) -> LintResult:
    """`probes lint`: the findings a reviewer of a recipe's stimuli would check by hand (probes that define one)."""
    recipe = load_recipe(name_or_path)
    spec = spec_of_builder(recipe.builder, recipe.path)
    if spec.lint is None:
        raise RecipeError(f"no lint is defined for builder {recipe.builder!r}")
    resolved = resolve_sources(recipe.sources, SourceOptions.of(sources))
    return LintResult(recipe, resolve_reference(spec.lint)(recipe, resolved))
