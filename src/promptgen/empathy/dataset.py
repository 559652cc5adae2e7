"""The `intergroup-empathy` dataset: recipe + the authors' released narratives (+ the optional crowd-enVent
corpus) -> configs, report, card context."""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from functools import partial
from typing import Any

from ..core.build_options import BuildOptions
from ..core.errors import RecipeError
from ..core.validate import choose, take
from ..hub.draft import DatasetDraft
from ..hub.folder import ConfigData, row_batches
from ..recipe import Recipe
from ..seeding import stratified_sample
from ..sources import ResolvedSource
from .corpus import EXPECTED_PER_EMOTION, EXPECTED_TOTAL, count_deviations, load_events
from .events import EVENT_FEATURES, REWRITE_CONFIG, REWRITE_FEATURES, T2_SOURCES, event_rows, rewrite_rows
from .model_rewrites import ModelRewrites
from .prompts import (
    CATEGORIES,
    IDENTITY_FEATURES,
    PROMPT_FEATURES,
    SETTING_FEATURES,
    SETTINGS,
    expected_rows,
    identities,
    identity_rows,
    prompt_batches,
    setting,
    setting_rows,
)
from .release import RELEASE_EMOTIONS, load_release, source_id
from .spec import REWRITES

log = logging.getLogger(__name__)
#: the optional extra: the crowd-enVent corpus (human intensity ratings, emotion-masked texts)
CORPUS_SOURCE_ID = "crowd-envent"


def draft(recipe: Recipe, sources: dict[str, ResolvedSource], options: BuildOptions) -> DatasetDraft:
    """The probe's drafter (`spec.SPEC.draft`): `--max-events` and a model's third-person rewrites."""
    return draft_intergroup_empathy(
        recipe,
        sources,
        full=options.full,
        max_events=options.max_events,
        rewrites=options.derived.get(REWRITES),
        dataset_name=options.dataset_name(recipe.name),
    )


def draft_intergroup_empathy(
    recipe: Recipe,
    sources: dict[str, ResolvedSource],
    *,
    full: bool,
    max_events: int | None,
    rewrites: ModelRewrites | None,
    dataset_name: str,
) -> DatasetDraft:
    """Events, identities, settings and one prompt config per (category, setting)."""
    if full:
        raise RecipeError("--full does not apply: intergroup-empathy is always the full design (use --max-events N)")
    p = take(
        "parameters",
        recipe.parameters,
        {"seed": int, "rows_per_shard": int, "categories": list, "settings": list, "materialize_prompts": bool},
        {"t2": str},
    )
    categories = choose("parameters.categories", p["categories"], CATEGORIES)
    settings = choose("parameters.settings", p["settings"], SETTINGS)
    t2 = p.get("t2", "release")
    if t2 not in T2_SOURCES:
        raise RecipeError(f"{recipe.path}: parameters.t2 must be one of {list(T2_SOURCES)}, got {t2!r}")
    events = load_release({e: (sources[source_id(e)].path, sources[source_id(e)].spec.path) for e in RELEASE_EMOTIONS})
    release_events = len(events)
    deviations = [] if max_events is not None else count_deviations(events)
    for message in deviations:
        log.warning("the release's narratives differ from the published counts: %s", message)
    corpus = None
    if CORPUS_SOURCE_ID in sources:
        extra = sources[CORPUS_SOURCE_ID]
        corpus = {e.text_id: e for e in load_events(extra.path, extra.spec.path)}
    if max_events is not None:
        by_emotion: dict[str, list] = defaultdict(list)
        for e in events:
            by_emotion[e.emotion].append(e)
        if max_events > len(events):
            raise RecipeError(f"--max-events {max_events} exceeds the {len(events)} events of the corpus")
        events = [e for _, e in stratified_sample(p["seed"], "events", dict(by_emotion), max_events)]
        events.sort(key=lambda e: e.position)
    if rewrites is not None:
        stray = sorted(set(rewrites.texts) - {e.text_id for e in events})
        if stray:
            raise RecipeError(f"rewrites name {len(stray)} event(s) this build does not have, e.g. {stray[0]!r}")
    by_model = {t: (text, rewrites.method()) for t, text in rewrites.texts.items()} if rewrites else None
    rows = event_rows(events, release_events=release_events, t2=t2, corpus=corpus, rewrites=by_model)
    rewrite_items = rewrite_rows(rows)

    configs = [
        ConfigData(
            "events",
            EVENT_FEATURES,
            lambda: row_batches(rows, EVENT_FEATURES),
            "One event of the authors' release with its three narrative forms (and, with the crowd-enVent corpus, "
            "its human intensity rating).",
            expected_rows=len(rows),
        ),
        ConfigData(
            REWRITE_CONFIG,
            REWRITE_FEATURES,
            lambda: row_batches(rewrite_items, REWRITE_FEATURES),
            "The 1-shot third-person rewrite prompt per event (free text, stop `}`), for `probes rewrite`.",
            expected_rows=len(rewrite_items),
        ),
        ConfigData(
            "identities",
            IDENTITY_FEATURES,
            lambda: row_batches(identity_rows(), IDENTITY_FEATURES),
            "Perceiver/experiencer identities in matrix order, `a person` first; `authors_order`: the prompts' order.",
            expected_rows=47,
        ),
        ConfigData(
            "settings",
            SETTING_FEATURES,
            lambda: row_batches(_setting_rows(settings), SETTING_FEATURES),
            "The prompt settings with their persona, system and task templates.",
            expected_rows=len(settings),
        ),
    ]
    counts = expected_rows(len(rows))
    if p["materialize_prompts"]:
        for category in categories:
            n_people = len(identities(category))
            for name in settings:
                s = setting(name)
                configs.append(
                    ConfigData(
                        f"{category}_{name}",
                        PROMPT_FEATURES,
                        partial(lambda c, n: prompt_batches(c, n, rows), category, name),
                        f"{n_people} x {n_people} {category} identities x {len(rows):,} events; persona {s.persona}, "
                        f"scale 0-{s.number_max}, narrative {s.narrative_form}.",
                        expected_rows=counts[f"{category}_{name}"],
                    )
                )
    prompt_total = sum(counts[f"{c}_{s}"] for c in categories for s in settings)
    example = next(prompt_batches(categories[0], settings[0], rows[:1])).to_pylist()[0]
    return DatasetDraft(
        name=dataset_name,
        configs=configs,
        parameters={**recipe.parameters, "max_events": max_events},
        report={
            "events": len(rows),
            "events_per_emotion": {
                e: sum(r["emotion"] == e for r in rows) for e in sorted({r["emotion"] for r in rows})
            },
            "corpus_deviations": deviations,
            "prompt_rows": prompt_total if p["materialize_prompts"] else 0,
            "prompt_rows_full_design": expected_total(len(rows), categories, settings),
            "corpus_extra": CORPUS_SOURCE_ID in sources,
            "corpus_matched": sum(r["intensity"] is not None for r in rows) if corpus is not None else 0,
            "t2_methods": sorted({r["t2_method"] for r in rows}),
            "t2_method_counts": dict(sorted(Counter(r["t2_method"] for r in rows).items())),
            "t2_rewrite": rewrites.record if rewrites else None,
        },
        card_context={
            "n_events": len(rows),
            "max_events": max_events,
            "expected_total": EXPECTED_TOTAL,
            "expected_per_emotion": EXPECTED_PER_EMOTION,
            "categories": categories,
            "settings": [setting(s) for s in settings],
            "n_people": {c: len(identities(c)) for c in categories},
            "prompt_total": prompt_total,
            "materialize": p["materialize_prompts"],
            "example": example,
            "event_example": rows[0],
            "release_events": release_events,
            "t2": t2,
            "corpus_extra": CORPUS_SOURCE_ID in sources,
        },
        default_config="events",
        rows_per_shard=p["rows_per_shard"],
        version=rewrites.version(recipe.version) if rewrites else None,
    )


def _setting_rows(names: tuple[str, ...]) -> list[dict[str, Any]]:
    return [r for r in setting_rows() if r["setting"] in names]


def expected_total(n_events: int, categories, settings) -> int:
    counts = expected_rows(n_events)
    return sum(counts[f"{c}_{s}"] for c in categories for s in settings)
