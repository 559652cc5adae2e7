"""The `talent-or-luck` dataset: recipe + release files -> configs, report and card context."""

from __future__ import annotations

import copy
import dataclasses
from functools import partial
from typing import Any

from ..core.build_options import BuildOptions
from ..core.contract import Features
from ..hub.draft import DatasetDraft
from ..hub.folder import ConfigData, row_batches
from ..recipe import Recipe
from ..sources import ResolvedSource
from .identities import build_identities
from .item_rows import ITEM_FEATURES
from .items import (
    actor_actor_items,
    actor_observer_items,
    check_params_against_release,
    expected_counts,
    single_actor_items,
)
from .lint import findings_as_dicts, lint_release
from .params import Corrections, parse_corrections, parse_params
from .release import Release, load_release
from .release_items import RELEASE_CONFIGS, release_counts, scorer_seed
from .side_configs import IDENTITY_FEATURES, TEMPLATE_FEATURES, identity_rows, template_rows

ITEM_CONFIGS = {
    "single_actor": (single_actor_items, "One actor with an outcome; the model picks the cause."),
    "actor_actor": (actor_actor_items, "Two actors in one scenario; one item per target actor."),
    "actor_observer": (actor_observer_items, "An observer states a cause first; the model picks the actor's cause."),
}


def _files(sources: dict[str, ResolvedSource]) -> dict:
    return {sid: (src.path, src.spec.path) for sid, src in sources.items()}


def read_release(recipe: Recipe, sources: dict[str, ResolvedSource]) -> tuple[Release, Corrections]:
    """Parse the release files with the recipe's text corrections applied."""
    corrections = parse_corrections(recipe.corrections)
    return load_release(_files(sources), list(corrections.texts)), corrections


def read_release_as_released(sources: dict[str, ResolvedSource]) -> Release:
    """Parse the release files without text corrections: the texts the `*_release` configs reproduce."""
    return load_release(_files(sources), [])


def lint_report(release: Release, corrections: Corrections) -> dict[str, Any]:
    """Lint findings, option-length balance and the corrections that were applied."""
    findings, balance = lint_release(release)
    applied = [
        {
            "rule": dataclasses.asdict(corrections.texts[i]),
            "file": file,
            "strings_changed": n,
        }
        for (i, file), n in sorted(release.corrections_applied.items())
    ]
    return {
        "corrections_version": corrections.version,
        "label_corrections": [dataclasses.asdict(f) for f in corrections.labels],
        "text_corrections_applied": applied,
        "findings": findings_as_dicts(findings),
        "option_length_balance": balance,
    }


def draft(recipe: Recipe, sources: dict[str, ResolvedSource], options: BuildOptions) -> DatasetDraft:
    """The probe's drafter (`spec.SPEC.draft`): it takes none of the probe-specific build options."""
    return draft_talent_or_luck(recipe, sources, full=options.full)


def lint(recipe: Recipe, sources: dict[str, ResolvedSource]) -> dict[str, Any]:
    """`probes lint` (`spec.SPEC.lint`): the findings of the release read with the recipe's corrections."""
    return lint_report(*read_release(recipe, sources))


def draft_talent_or_luck(recipe: Recipe, sources: dict[str, ResolvedSource], *, full: bool = False) -> DatasetDraft:
    """Everything needed to write the dataset; rows are generated lazily by the writer."""
    raw_params = copy.deepcopy(recipe.parameters)
    if full:
        raw_params["sampling"] = "full"
    params = parse_params(raw_params)
    release, corrections = read_release(recipe, sources)
    check_params_against_release(release, params)
    identities = build_identities(release, params, corrections)
    report = lint_report(release, corrections)

    item_columns = list(ITEM_FEATURES)
    counts = expected_counts(release, params)
    configs = [
        ConfigData(
            "templates",
            Features(TEMPLATE_FEATURES),
            lambda: row_batches(template_rows(release), TEMPLATE_FEATURES),
            "One row per single-actor template (outcome x domain x scenario x gender).",
            expected_rows=len(release.single),
        ),
        ConfigData(
            "identities",
            Features(IDENTITY_FEATURES),
            lambda: row_batches(identity_rows(identities), IDENTITY_FEATURES),
            "Every first name of every identity group, with the seeded sample marked.",
            expected_rows=sum(len(n) for gs in identities.values() for g in gs for n in g.all_names.values()),
        ),
    ]
    for config, (generate, description) in ITEM_CONFIGS.items():
        configs.append(
            ConfigData(
                config,
                ITEM_FEATURES,
                partial(lambda g: row_batches(g(release, identities, params), item_columns), generate),
                description,
                expected_rows=counts[config],
            )
        )
    examples = {
        config: next(iter(generate(release, identities, params))) for config, (generate, _) in ITEM_CONFIGS.items()
    }
    release_rows: dict[str, int] = {}
    if params.release_configs:
        as_released = read_release_as_released(sources)
        release_rows = release_counts(as_released)
        for config, (items, features, description) in RELEASE_CONFIGS.items():
            configs.append(
                ConfigData(
                    config,
                    features,
                    partial(lambda g: g(as_released, identities), items),
                    description,
                    expected_rows=release_rows[config],
                )
            )
            examples[config] = next(items(as_released, identities)).slice(0, 1).to_pylist()[0]
    name = recipe.name + ("-full" if params.sampling == "full" else "")
    return DatasetDraft(
        name=name,
        configs=configs,
        parameters=raw_params,
        report={**report, "expected_rows": {**counts, **release_rows}},
        card_context={
            "counts_default": expected_counts(release, params, "default"),
            "counts_full": expected_counts(release, params, "full"),
            "counts_release": release_rows,
            "release_seed": scorer_seed(),
            "params": params,
            "examples": examples,
            "groups": {d: [(g.label_original, g.label) for g in gs] for d, gs in identities.items()},
            "n_templates": {
                "single_actor": len(release.single),
                "actor_actor": len(release.pairs),
                "actor_observer": len(release.observer),
            },
        },
        default_config="single_actor",
        rows_per_shard=params.rows_per_shard,
    )
