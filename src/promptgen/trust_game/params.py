"""The Trust Game recipe's `parameters` block (docs/DESIGN.md section 5), validated into typed parameters.

One parser for the whole block, so an unknown key or a wrong type anywhere is one error naming it;
the `games` and `probing` sections are parsed by `games` and checked here against
`paper_pairs.models`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.errors import RecipeError
from ..core.validate import choose, take
from .census import THRESHOLD_BASES
from .games import GamesParams, ProbingParams, parse_games_params, parse_probing_params
from .paper_pairs import TITLES
from .race_probe import RACE_PROBE_VARIANTS, RaceProbeParams


@dataclass(frozen=True)
class CensusParams:
    """`parameters.census`: how many surnames each group keeps, by the Bayesian posterior and by its threshold."""

    bayesian_top: int
    threshold: float
    threshold_top: int
    threshold_basis: str
    threshold_excludes_bayesian: bool


@dataclass(frozen=True)
class PaperPairsParams:
    """`parameters.paper_pairs`: the models whose curated pairs the paper's games use, and pairs per gender."""

    models: tuple[str, ...]
    pairs_per_gender: int


@dataclass(frozen=True)
class TrustGameParams:
    """The recipe's whole `parameters` block, each section parsed."""

    rows_per_shard: int
    census: CensusParams
    paper_pairs: PaperPairsParams
    race_probe: RaceProbeParams
    games: GamesParams
    probing: ProbingParams


def parse_params(raw: dict[str, Any]) -> TrustGameParams:
    """Validate the recipe's `parameters` block (unknown keys are errors)."""
    p = take(
        "parameters",
        raw,
        {
            "rows_per_shard": int,
            "census": dict,
            "paper_pairs": dict,
            "race_probe": dict,
            "games": dict,
            "probing": dict,
        },
        positive_ints=True,
    )
    c = take(
        "parameters.census",
        p["census"],
        {
            "bayesian_top": int,
            "threshold": float,
            "threshold_top": int,
            "threshold_basis": str,
            "threshold_excludes_bayesian": bool,
        },
        positive_ints=True,
    )
    if not 0 < c["threshold"] <= 1:
        raise RecipeError(f"parameters.census.threshold must be in (0, 1], got {c['threshold']!r}")
    choose("parameters.census.threshold_basis", [c["threshold_basis"]], THRESHOLD_BASES)
    pp = take("parameters.paper_pairs", p["paper_pairs"], {"models": list, "pairs_per_gender": int}, positive_ints=True)
    if not pp["models"] or not all(isinstance(m, str) and m for m in pp["models"]):
        raise RecipeError(f"parameters.paper_pairs.models must be a non-empty list of names, got {pp['models']!r}")
    rp = take("parameters.race_probe", p["race_probe"], {"titles": list, "variants": list})
    games = parse_games_params(p["games"], pair_models=tuple(pp["models"]))
    return TrustGameParams(
        rows_per_shard=p["rows_per_shard"],
        census=CensusParams(
            bayesian_top=c["bayesian_top"],
            threshold=float(c["threshold"]),
            threshold_top=c["threshold_top"],
            threshold_basis=c["threshold_basis"],
            threshold_excludes_bayesian=c["threshold_excludes_bayesian"],
        ),
        paper_pairs=PaperPairsParams(tuple(pp["models"]), pp["pairs_per_gender"]),
        race_probe=RaceProbeParams(
            titles=choose("parameters.race_probe.titles", rp["titles"], TITLES),
            variants=choose("parameters.race_probe.variants", rp["variants"], RACE_PROBE_VARIANTS),
        ),
        games=games,
        probing=parse_probing_params(p["probing"], pair_models=tuple(pp["models"]), amounts=games.amounts),
    )
