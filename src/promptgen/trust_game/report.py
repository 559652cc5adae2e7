"""The build report of `trust-game-names`: what each step measured (`DatasetDraft.report`, the
build manifest's `build_report`, also read by the card).

Split from `dataset` so that module stays the wiring of the configs to the writer: these
functions only summarise what the pure steps (`census`, `paper_pairs`, `games`, `curation`)
produced; none of them makes a row of a config.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd

from .census import PCT_COLUMNS, RACES, THRESHOLD_BASES, bayesian_ranking, compute_lists, threshold_ranking
from .curation import CuratedPairs, curated_games_config_name, model_size_from_name, pairs_config_name
from .games import TRUSTEE_GROUPS, Game, games_config_name, games_per_condition, pair_source, probing_count
from .paper_pairs import PaperPair, pair_rows
from .params import TrustGameParams

#: Table 1 of the paper: the first surname of each race's bayesian list and its Census count.
PAPER_TABLE1_FIRST: dict[str, tuple[str, int]] = {
    "Asian": ("Nguyen", 437_645),
    "Black": ("Williams", 1_625_252),
    "Hispanic": ("Garcia", 1_166_120),
    "Native American": ("Begay", 17_553),
    "White": ("Miller", 1_161_437),
}
TOP_SHOWN = 5


def _top_entries(frame: pd.DataFrame, n: int) -> dict[str, list[dict[str, Any]]]:
    return {
        race: [
            {
                "rank": int(r.rank),
                "surname": r.surname,
                "count": int(r.count),
                "posterior": round(float(r.posterior), 6),
            }
            for r in frame[frame["race"] == race].head(n).itertuples()
        ]
        for race in RACES
    }


def census_report(
    census: pd.DataFrame,
    shares: pd.DataFrame,
    lists: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame],
    params: TrustGameParams,
) -> dict[str, Any]:
    """What the build measured: pool sizes, top entries (vs. the paper's Table 1), seed-list make-up."""
    bayesian, threshold, seed = lists
    pct = census[list(PCT_COLUMNS)]
    best = bayesian_ranking(shares, top=len(shares))["race"].value_counts()
    over = threshold_ranking(
        shares, threshold=params.census.threshold, top=len(shares), basis=params.census.threshold_basis
    )["race"].value_counts()
    pools = {
        race: {"bayesian_candidates": int(best.get(race, 0)), "threshold_candidates": int(over.get(race, 0))}
        for race in RACES
    }
    first = {}
    for race, (surname, count) in PAPER_TABLE1_FIRST.items():
        ours = bayesian[bayesian["race"] == race].iloc[0]
        first[race] = {
            "paper": {"surname": surname, "count": count},
            "ours": {"surname": ours["surname"], "count": int(ours["count"])},
            "match": ours["surname"] == surname and int(ours["count"]) == count,
        }
    makeup = {
        race: {
            "rows": int((seed["race"] == race).sum()),
            "both": int(((seed["race"] == race) & (seed["methods"].map(len) == 2)).sum()),
            "bayesian_only": int(((seed["race"] == race) & seed["methods"].map(lambda m: m == ["bayesian"])).sum()),
            "threshold_only": int(((seed["race"] == race) & seed["methods"].map(lambda m: m == ["threshold"])).sum()),
        }
        for race in RACES
    }
    return {
        "census_rows": len(census),
        "surnames": len(shares),
        "suppressed_shares_imputed": int(pct.isna().sum().sum()),
        "rows_with_suppressed_shares": int(pct.isna().any(axis=1).sum()),
        "pools": pools,
        "table1_first": first,
        "top_bayesian": _top_entries(bayesian, TOP_SHOWN),
        "top_threshold": _top_entries(threshold, TOP_SHOWN),
        "seed_list": makeup,
    }


def pairs_report(pairs: list[PaperPair], seed: pd.DataFrame) -> dict[str, Any]:
    """Per model: how many of the paper's 170 (surname, gender) pairs use a surname of our seed list."""
    rows = pd.DataFrame(list(pair_rows(pairs, seed)))
    out: dict[str, Any] = {}
    for model, group in rows.groupby("model", sort=False):
        missing = group.loc[~group["in_seed_list"], ["race", "surname"]].drop_duplicates()
        out[str(model)] = {
            "pairs": len(group),
            "in_seed_list": int(group["in_seed_list"].sum()),
            "surnames_not_in_seed_list": [f"{r.surname} ({r.race})" for r in missing.itertuples()],
        }
    return out


def threshold_variants_report(shares: pd.DataFrame, pairs: list[PaperPair], params: TrustGameParams) -> list[dict]:
    """Which published surnames each reading of step 5 leaves out of the seed list.

    docs/DESIGN.md section 5 reads the threshold as Pr(race | name) >= 0.9 over all surnames; the
    paper's pairs suggest Census percentages and a threshold list counted after the
    bayesian one. Reporting all four readings lets a reader see the evidence.
    """
    published = sorted({(p.race, p.surname) for p in pairs}, key=lambda rs: (RACES.index(rs[0]), rs[1]))
    out = []
    for basis in THRESHOLD_BASES:
        for exclude in (False, True):
            _, _, seed = compute_lists(
                shares,
                bayesian_top=params.census.bayesian_top,
                threshold=params.census.threshold,
                threshold_top=params.census.threshold_top,
                threshold_basis=basis,
                threshold_excludes_bayesian=exclude,
            )
            seeded = set(zip(seed["race"], seed["surname"], strict=True))
            missing = [f"{surname} ({race})" for race, surname in published if (race, surname) not in seeded]
            out.append(
                {
                    "threshold_basis": basis,
                    "threshold_excludes_bayesian": exclude,
                    "published_surnames": len(published),
                    "missing": missing,
                }
            )
    return out


def games_report(games: dict[str, list[Game]], params: TrustGameParams) -> dict[str, Any]:
    """Per games config: sizes, and the cross-gender same-race games that share a surname."""
    per_condition = games_per_condition(params.paper_pairs.pairs_per_gender)
    out = {}
    for model in params.games.models:
        same = [g for g in games[model] if g.same_surname]
        out[games_config_name(model)] = {
            "pair_source": pair_source(model),
            "games_per_condition": per_condition,
            "games_per_investor_group": per_condition * len(TRUSTEE_GROUPS),
            "games": len(games[model]),
            "rows": len(games[model]) * len(params.games.variants),
            "same_surname_games": len(same),
            "same_surname_examples": [f"{g.investor.name} / {g.trustee.name}" for g in same[:3]],
        }
    return out


def probing_report(sample: list[Game], params: TrustGameParams) -> dict[str, Any]:
    """The sampled games, so a reader sees which names the probing questions use."""
    return {
        "games": len(sample),
        "rows": probing_count(len(sample), len(params.probing.variants), params.games.amounts),
        "sample": [
            {
                "pair_source": g.source,
                "investor_group": g.investor.group.label,
                "trustee_group": g.trustee.group.label,
                "investor": g.investor.name,
                "trustee": g.trustee.name,
                "pair_index_investor": g.investor.index,
                "pair_index_trustee": g.trustee.index,
            }
            for g in sample
        ],
    }


#: a model whose name states fewer parameters than this gets the card's "pipeline check" warning.
SMALL_MODEL_PARAMETERS = 1e9


def curated_report(curated: CuratedPairs, games: list[Game], params: TrustGameParams) -> dict[str, Any]:
    """What the card says about one curated source: provenance, selection, and the games' cells."""
    cells = Counter((g.investor.group.label, g.trustee.group.label) for g in games)
    full = games_per_condition(curated.per_gender)
    conditions = [
        {"investor_group": i.label, "trustee_group": t.label, "games": cells.get((i.label, t.label), 0)}
        for i in params.games.investors
        for t in TRUSTEE_GROUPS
    ]
    size = model_size_from_name(str(curated.record.get("model", "")))
    groups = curated.record["selection"]["groups"]
    return {
        "slug": curated.slug,
        "pairs_config": pairs_config_name(curated.slug),
        "games_config": curated_games_config_name(curated.slug) if games else None,
        "record": curated.record,
        "pairs": len(curated.pairs),
        "wanted": curated.per_gender * len(groups),
        "shortfall": [g for g in groups if g["shortfall"] > 0],
        "model_parameters_from_name": size,
        "pipeline_check": size is not None and size < SMALL_MODEL_PARAMETERS,
        "games": len(games),
        "rows": len(games) * len(params.games.variants),
        "games_per_full_condition": full,
        "balanced": all(c["games"] == full for c in conditions),
        "conditions": conditions,
        "no_games_reason": None
        if games
        else "no game: an investor group or every trustee group it could meet has no curated pair",
    }
