"""`probes build`: recipe -> sources -> the builder's dataset draft -> Hub-ready folder."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .core.errors import RecipeError
from .core.outputs import Reference, output_path
from .core.version import __version__
from .hub.cards import render_card
from .hub.draft import DatasetDraft
from .hub.folder import check_dataset_target, write_hub_folder
from .hub.read import read_build_manifest
from .protocols import protocols_by_config
from .recipe import Recipe, load_recipe
from .sources import ResolvedSource, SourceOptions, resolve_sources

if TYPE_CHECKING:
    from .empathy.model_rewrites import ModelRewrites
    from .trust_game.curation import CuratedPairs


@dataclass(frozen=True)
class BuildOptions:
    """Command-line choices that change what is built (and so the dataset's name).

    `full`: the full cross product instead of the recipe's sampling; `max_events`: a
    stratified subset of N source events (empathy), for tests and quick runs;
    `curated_pairs`: per-model pairs selected from race-probe results (trust game), each
    added as `pairs_<slug>` + `games_<slug>` configs of a new dataset version; `rewrites`:
    a model's third-person rewrites replacing the rule-based T2 narratives (empathy), also
    a new dataset version; `configs`: only these configs of the recipe (sorted, once each), so
    a run that scores one config does not wait for the others (the default talent-or-luck
    build spends minutes on 3 M release rows that a `single_actor` run never reads).
    """

    full: bool = False
    max_events: int | None = None
    curated_pairs: tuple[CuratedPairs, ...] = ()
    rewrites: ModelRewrites | None = None
    configs: tuple[str, ...] = ()

    def dataset_name(self, recipe_name: str) -> str:
        """`talent-or-luck`, `talent-or-luck-full`, `intergroup-empathy-events24`, `talent-or-luck-single_actor`, ...

        A build of some configs is named by them, so it is never taken for the whole dataset.
        """
        name = recipe_name + ("-full" if self.full else "")
        name += f"-events{self.max_events}" if self.max_events is not None else ""
        return name + "".join(f"-{config}" for config in self.configs)


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


def _no_max_events(recipe: Recipe, options: BuildOptions) -> None:
    if options.max_events is not None:
        raise RecipeError(f"--max-events applies to event-based datasets; {recipe.name!r} has no events")


def _no_curated_pairs(recipe: Recipe, options: BuildOptions) -> None:
    if options.curated_pairs:
        raise RecipeError(f"curated pairs apply to the trust game; {recipe.name!r} has no pairs")


def _no_rewrites(recipe: Recipe, options: BuildOptions) -> None:
    if options.rewrites is not None:
        raise RecipeError(f"third-person rewrites apply to intergroup-empathy; {recipe.name!r} has no narratives")


def _talent_or_luck(recipe: Recipe, sources: dict[str, ResolvedSource], options: BuildOptions) -> DatasetDraft:
    from .attribution.dataset import draft_talent_or_luck

    _no_max_events(recipe, options)
    _no_curated_pairs(recipe, options)
    _no_rewrites(recipe, options)
    return draft_talent_or_luck(recipe, sources, full=options.full)


def _trust_game(recipe: Recipe, sources: dict[str, ResolvedSource], options: BuildOptions) -> DatasetDraft:
    from .trust_game.dataset import draft_trust_game

    _no_max_events(recipe, options)
    _no_rewrites(recipe, options)
    return draft_trust_game(recipe, sources, full=options.full, curated=options.curated_pairs)


def _intergroup_empathy(recipe: Recipe, sources: dict[str, ResolvedSource], options: BuildOptions) -> DatasetDraft:
    from .empathy.dataset import draft_intergroup_empathy

    _no_curated_pairs(recipe, options)
    return draft_intergroup_empathy(
        recipe,
        sources,
        full=options.full,
        max_events=options.max_events,
        rewrites=options.rewrites,
        dataset_name=options.dataset_name(recipe.name),
    )


#: recipe `builder:` value -> drafter. Drafters import their probe module lazily.
BUILDERS: dict[str, Callable[[Recipe, dict[str, ResolvedSource], BuildOptions], DatasetDraft]] = {
    "attribution": _talent_or_luck,
    "trust_game": _trust_game,
    "empathy": _intergroup_empathy,
}


@dataclass(frozen=True)
class BuildResult:
    path: Path
    manifest: dict[str, Any]


def draft_build(
    recipe: Recipe, sources: SourceOptions, options: BuildOptions
) -> tuple[DatasetDraft, dict[str, ResolvedSource]]:
    """Resolve the sources and ask the recipe's builder for its draft (no output written)."""
    if recipe.builder not in BUILDERS:
        raise RecipeError(f"{recipe.path}: unknown builder {recipe.builder!r}; known: {sorted(BUILDERS)}")
    resolved = resolve_sources(recipe.sources, sources)
    return BUILDERS[recipe.builder](recipe, resolved, options), resolved


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


def build(
    name_or_path: str,
    *,
    out_dir: Path,
    sources: SourceOptions | str | Path | None = None,
    full: bool = False,
    max_events: int | None = None,
    curated_pairs: Sequence[CuratedPairs] = (),
    rewrites: ModelRewrites | None = None,
    configs: Sequence[str] | None = None,
    overwrite: bool = False,
    on_rows: Callable[[str, int], None] | None = None,
    on_draft: Callable[[DatasetDraft], None] | None = None,
) -> BuildResult:
    """Build one dataset folder `out_dir/<name>` from its recipe; atomic on failure.

    `sources`: a folder of source files (nothing is downloaded), or `SourceOptions` (the download
    cache, offline); None downloads into the default cache.

    `curated_pairs` (trust game only) adds per-model pairs and their games; see `probes.derive.curate_pairs`.
    `rewrites` (intergroup-empathy only) replaces rule-based T2 narratives with a model's; see
    `probes.derive.apply_rewrites`. `configs`: build only these (written to `out_dir/<name>-<config>...`).
    """
    recipe = load_recipe(name_or_path)
    sources = SourceOptions.of(sources)
    options = BuildOptions(
        full=full,
        max_events=max_events,
        curated_pairs=tuple(curated_pairs),
        rewrites=rewrites,
        configs=chosen_configs(configs),
    )
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
    """`probes lint`: the findings a reviewer of a recipe's stimuli would check by hand (attribution only)."""
    recipe = load_recipe(name_or_path)
    if recipe.builder != "attribution":
        raise RecipeError(f"no lint is defined for builder {recipe.builder!r}")
    from .attribution.dataset import lint_report, read_release

    resolved = resolve_sources(recipe.sources, SourceOptions.of(sources))
    return LintResult(recipe, lint_report(*read_release(recipe, resolved)))
