"""The `trust-game-names` dataset: recipe + census + paper pairs -> configs, report and card context.

The I/O edge of the Trust Game builder: it reads the two source files, runs the pure
steps of `census`, `paper_pairs`, `race_probe` and `games`, and hands lazily generated configs
to the writer; `report` summarises what the steps measured.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from typing import Any

import pandas as pd

from ..core.build_options import BuildOptions
from ..core.contract import Features
from ..core.errors import RecipeError, SourceFormatError
from ..hub.draft import DatasetDraft
from ..hub.folder import BATCH_ROWS, Batch, ConfigData, row_batches
from ..recipe import Recipe
from ..sources import ResolvedSource
from .census import (
    LIST_FEATURES,
    RACES,
    SEED_FEATURES,
    compute_lists,
    impute_suppressed,
    load_census,
    race_given_name,
)
from .curation import (
    CURATED_PAIR_FEATURES,
    PAIR_COLUMNS,
    CuratedPairs,
    as_paper_pairs,
    curated_games_config_name,
    curated_version,
    pairs_config_name,
)
from .games import (
    GAME_FEATURES,
    PROBING_FEATURES,
    Amounts,
    Game,
    build_games,
    game_rows,
    games_between,
    games_config_name,
    games_per_condition,
    group_players,
    pair_source,
    probing_count,
    probing_rows,
    render_game,
    render_probing,
    sample_probing_games,
)
from .paper_pairs import PAIR_FEATURES, PaperPair, pair_rows, parse_paper_pairs
from .params import TrustGameParams, parse_params
from .race_probe import RACE_PROBE_FEATURES, RACE_PROBE_VARIANTS, race_probe_count, race_probe_rows, render_race_probe
from .report import (
    census_report,
    curated_report,
    games_report,
    pairs_report,
    probing_report,
    threshold_variants_report,
)
from .spec import CURATED_PAIRS

CENSUS_SOURCE = "census"
PAIRS_SOURCE = "paper_pairs"


def frame_batches(frame: pd.DataFrame, columns: list[str], size: int = BATCH_ROWS) -> Iterator[Batch]:
    """A data frame as column batches of plain Python values (missing -> None)."""
    for start in range(0, len(frame), size):
        chunk = frame.iloc[start : start + size]
        yield {c: _plain(chunk[c]) for c in columns}


def _plain(series: pd.Series) -> list:
    if series.dtype == object:
        return series.tolist()
    return series.astype(object).where(series.notna(), None).tolist()


def read_paper_pairs(source: ResolvedSource, params: TrustGameParams) -> list[PaperPair]:
    """Parse and check paper_pairs.json."""
    file = source.spec.path
    try:
        data = json.loads(source.path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SourceFormatError(file, "file", f"not valid JSON: {exc}") from exc
    return parse_paper_pairs(
        data, file=file, models=params.paper_pairs.models, per_gender=params.paper_pairs.pairs_per_gender
    )


def model_games(pairs: list[PaperPair], params: TrustGameParams, *, file: str) -> dict[str, list[Game]]:
    """Per model named by `games` or `probing`: all its games, after checking its pairs."""
    out = {}
    for model in dict.fromkeys((*params.games.models, *params.probing.models)):
        players = group_players(
            (p for p in pairs if p.model == model),
            source=pair_source(model),
            file=file,
            per_group=params.paper_pairs.pairs_per_gender,
        )
        out[model] = list(build_games(players, params.games.investors, model=model))
    return out


def _examples(games: list[Game], sample: list[Game], params: TrustGameParams) -> dict[str, Any]:
    """Card examples: one game in every variant and one probing question 3 (amt 3)."""
    amounts: Amounts = params.games.amounts
    game = games[0]
    probe = sample[0]
    return {
        "game": {
            "investor": game.investor.name,
            "trustee": game.trustee.name,
            "source": game.source,
            "id": next(game_rows([game], ["base"], amounts))["id"],
        },
        "game_variants": {v: render_game(game, v, amounts) for v in params.games.variants},
        "probing_game": {"investor": probe.investor.name, "trustee": probe.trustee.name},
        "probing_variants": {v: render_probing(probe, 3, 3, v, amounts) for v in params.probing.variants},
    }


def curated_games(curated: CuratedPairs, params: TrustGameParams) -> list[Game]:
    """The games of one curated source: the paper's design on whatever each group holds.

    A group keeps its own n <= per_gender pairs (a shortfall is never padded), so a condition
    has n_investor x n_trustee games minus the index diagonal; with every group full this is
    the paper's 272 per condition.
    """
    source = pairs_config_name(curated.slug)
    players = group_players(
        as_paper_pairs(curated), source=source, file=source, per_group=curated.per_gender, exact=False
    )
    return list(games_between(players, params.games.investors, source=source, key=curated.slug))


def check_curated_surnames(curated: tuple[CuratedPairs, ...], seed: pd.DataFrame) -> None:
    """Every curated pair's surname is in this build's seed list for its race: the pairs were
    chosen among these items, so any other surname means they come from another dataset."""
    seeded = set(zip(seed["race"], seed["surname"], strict=True))
    for cur in curated:
        for i, r in enumerate(cur.pairs.itertuples()):
            if (r.race, r.surname) not in seeded:
                raise SourceFormatError(
                    pairs_config_name(cur.slug),
                    f"row {i} ({r.title} {r.surname}), column 'surname'",
                    f"not in this build's {r.race} seed list; were the pairs curated on another dataset?",
                )


def curated_configs(
    curated: tuple[CuratedPairs, ...], params: TrustGameParams
) -> tuple[list[ConfigData], dict[str, Any]]:
    """`pairs_<slug>` and (when any game exists) `games_<slug>` per curated source, and their report."""
    configs: list[ConfigData] = []
    report: dict[str, Any] = {}
    game_columns = list(GAME_FEATURES)
    for cur in sorted(curated, key=lambda c: c.slug):
        games = curated_games(cur, params)
        report[cur.slug] = curated_report(cur, games, params)
        configs.append(
            ConfigData(
                pairs_config_name(cur.slug),
                Features(CURATED_PAIR_FEATURES),
                partial(lambda cur: frame_batches(cur.pairs, list(PAIR_COLUMNS)), cur),
                f"Pairs curated from {cur.record['model_name']}'s race-probe scores (variant {cur.record['variant']}): "
                f"up to {cur.per_gender} per race and gender, {len(cur.pairs)} kept.",
                expected_rows=len(cur.pairs),
            )
        )
        if games:
            configs.append(
                ConfigData(
                    curated_games_config_name(cur.slug),
                    GAME_FEATURES,
                    partial(
                        lambda games: row_batches(
                            game_rows(games, params.games.variants, params.games.amounts), game_columns
                        ),
                        games,
                    ),
                    f"Trust Game prompts on the `{pairs_config_name(cur.slug)}` pairs, "
                    f"{len(params.games.variants)} prompt variants.",
                    expected_rows=len(games) * len(params.games.variants),
                )
            )
    return configs, report


def draft(recipe: Recipe, sources: dict[str, ResolvedSource], options: BuildOptions) -> DatasetDraft:
    """The probe's drafter (`spec.SPEC.draft`): `--full` and curated pairs."""
    return draft_trust_game(recipe, sources, full=options.full, curated=options.derived.get(CURATED_PAIRS, ()))


def draft_trust_game(
    recipe: Recipe,
    sources: dict[str, ResolvedSource],
    *,
    full: bool = False,
    curated: tuple[CuratedPairs, ...] = (),
) -> DatasetDraft:
    """Everything needed to write `trust-game-names`; item rows are generated lazily by the writer.

    `curated`: per-model pairs (`probes.trust_game.pair_curation.curate_pairs`); each adds `pairs_<slug>` and
    `games_<slug>`, its record joins the parameters, and the version gets a `+pairs.<hash>` suffix.
    """
    if full:
        raise RecipeError(f"{recipe.path}: {recipe.name} has no full variant; build it without --full")
    slugs = [c.slug for c in curated]
    if len(set(slugs)) != len(slugs):
        raise RecipeError(f"curated pairs name a model slug twice: {slugs}")
    params = parse_params(recipe.parameters)
    census_src = sources[CENSUS_SOURCE]
    census = load_census(census_src.path, display_name=census_src.spec.path)
    shares = race_given_name(impute_suppressed(census), file=census_src.spec.path)
    bayesian, threshold, seed = compute_lists(
        shares,
        bayesian_top=params.census.bayesian_top,
        threshold=params.census.threshold,
        threshold_top=params.census.threshold_top,
        threshold_basis=params.census.threshold_basis,
        threshold_excludes_bayesian=params.census.threshold_excludes_bayesian,
    )
    pairs = read_paper_pairs(sources[PAIRS_SOURCE], params)
    list_columns = list(LIST_FEATURES)
    seed_columns = list(SEED_FEATURES)
    pair_columns = list(PAIR_FEATURES)
    probe_columns = list(RACE_PROBE_FEATURES)
    game_columns = list(GAME_FEATURES)
    probing_columns = list(PROBING_FEATURES)
    games = model_games(pairs, params, file=sources[PAIRS_SOURCE].spec.path)
    sample = sample_probing_games(
        [g for model in params.probing.models for g in games[model]],
        k=params.probing.games_per_condition,
        seed=params.probing.seed,
    )
    amounts = params.games.amounts
    configs = [
        ConfigData(
            "bayesian_ranking",
            Features(LIST_FEATURES),
            lambda: frame_batches(bayesian, list_columns),
            f"Top {params.census.bayesian_top} surnames per race by posterior Pr(name | race) (the paper's list).",
            expected_rows=len(bayesian),
        ),
        ConfigData(
            "threshold_ranking",
            Features(LIST_FEATURES),
            lambda: frame_batches(threshold, list_columns),
            f"Top {params.census.threshold_top} surnames per race with Pr(race | name) >= "
            f"{params.census.threshold}, most frequent first (Aher et al. 2023).",
            expected_rows=len(threshold),
        ),
        ConfigData(
            "seed_list",
            Features(SEED_FEATURES),
            lambda: frame_batches(seed, seed_columns),
            "Per race, the de-duplicated union of both lists, with the method(s) that proposed each surname.",
            expected_rows=len(seed),
        ),
        ConfigData(
            "pairs_paper",
            Features(PAIR_FEATURES),
            lambda: row_batches(pair_rows(pairs, seed), pair_columns),
            "The paper's selected (title, surname) pairs for Llama2-13B, Mistral-7B and Phi-2 (Appendix A.3).",
            expected_rows=len(pairs),
        ),
        ConfigData(
            "race_probe",
            RACE_PROBE_FEATURES,
            lambda: row_batches(race_probe_rows(seed, params.race_probe), probe_columns),
            "True/False items 'title surname is race' for every seed surname, title, race and prompt variant.",
            expected_rows=race_probe_count(seed, params.race_probe),
        ),
        *(
            ConfigData(
                games_config_name(model),
                GAME_FEATURES,
                partial(
                    lambda model: row_batches(game_rows(games[model], params.games.variants, amounts), game_columns),
                    model,
                ),
                f"Trust Game prompts on the {model} pairs: {len(params.games.investors)} investor groups x 10 trustee "
                f"groups x {games_per_condition(params.paper_pairs.pairs_per_gender)} name pairs, in "
                f"{len(params.games.variants)} prompt variants ({', '.join(params.games.variants)}).",
                expected_rows=len(games[model]) * len(params.games.variants),
            )
            for model in params.games.models
        ),
        ConfigData(
            "probing",
            PROBING_FEATURES,
            lambda: row_batches(
                probing_rows(sample, params.probing.variants, amounts, params.probing.number_max), probing_columns
            ),
            f"Construct-validity questions (3 per amount 0..{amounts.investor}) on {len(sample)} sampled games, in "
            f"{len(params.probing.variants)} prompt variants.",
            expected_rows=probing_count(len(sample), len(params.probing.variants), amounts),
        ),
    ]
    check_curated_surnames(curated, seed)
    extra_configs, curated_section = curated_configs(curated, params)
    configs.extend(extra_configs)
    report = {
        **census_report(census, shares, (bayesian, threshold, seed), params),
        "paper_pairs": pairs_report(pairs, seed),
        "threshold_variants": threshold_variants_report(shares, pairs, params),
        "games": games_report(games, params),
        "probing": probing_report(sample, params),
        "curated_pairs": curated_section,
        "expected_rows": {c.name: c.expected_rows for c in configs},
    }
    parameters = recipe.parameters
    if curated:
        parameters = {**parameters, "curated_pairs": {c.slug: c.record for c in sorted(curated, key=lambda c: c.slug)}}
    examples = {
        variant: {
            "prompt": render_race_probe(variant, "Ms.", "Begay", "Native American"),
            "choices": list(RACE_PROBE_VARIANTS[variant].choices),
        }
        for variant in params.race_probe.variants
    }
    return DatasetDraft(
        name=recipe.name,
        configs=configs,
        parameters=parameters,
        report=report,
        card_context={
            "params": params,
            "races": RACES,
            "probe_examples": examples,
            "game_examples": _examples(games[params.games.models[0]], sample, params),
        },
        default_config="seed_list",
        rows_per_shard=params.rows_per_shard,
        version=curated_version(recipe.version, curated) if curated else None,
    )
