"""Talent-or-Luck items (docs/DESIGN.md section 3): single-actor, actor-actor, actor-observer.

Pure functions from a parsed `Release` + parameters to row dictionaries; no I/O. Every
random choice is a hash of `(seed, key)` (see `seeding`), so a row depends on its own
factors only, never on row order or on what else is built.

Two-person rows describe the persons as they appear in the statement: `name`,
`identity`, `gender`, `outcome` are person X (named first), `name_2`, `identity_2`, ...
are person Y, and `target` says whose cause the item asks for (always X outside the
actor-actor setting).

Also here, from the same design: the rows each config will have (`expected_counts`, without
generating them) and the check that the release can supply the sample sizes asked for.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..core.errors import RecipeError
from ..seeding import hash_choice, stratified_sample
from .identities import Identity, Name
from .item_rows import choice_items, fill, person_fields
from .params import AttributionParams
from .release import CAUSES, DIMENSIONS, GENDERS, OUTCOMES, PairTemplate, Release


def single_actor_items(
    release: Release, identities: dict[str, list[Identity]], params: AttributionParams
) -> Iterator[dict[str, Any]]:
    """Every template x identity group x sampled name (108,000 with 5 names)."""
    for t in release.single:
        for dimension in DIMENSIONS:
            for ident in identities[dimension]:
                for name in ident.sampled[t.gender]:
                    statement = fill(t.statement, {"X": name.name, "dimension": ident.label})
                    base = (
                        f"sa.{t.outcome}.{t.domain}.{t.scenario:02d}.{t.gender}."
                        f"{dimension}.{ident.key}.n{name.index:02d}"
                    )
                    meta = {
                        "setting": "single_actor",
                        "template_id": t.template_id,
                        "outcome": t.outcome,
                        "domain": t.domain,
                        "scenario": t.scenario,
                        "dimension": dimension,
                        "target": "X",
                        **person_fields("x", ident, t.gender, name),
                    }
                    yield from choice_items(base, statement, t.options, meta, params)


def _scenarios_by_domain(release: Release) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t in release.single:
        if t.outcome == "success" and t.gender == "female":
            out.setdefault(t.domain, []).append(t.scenario)
    return out


def stratified_scenarios(seed: int, key: str, by_domain: dict[str, list[int]], k: int) -> list[tuple[str, int]]:
    """k (domain, scenario) draws spread over domains (see `seeding.stratified_sample`)."""
    try:
        return stratified_sample(seed, key, by_domain, k)
    except ValueError as exc:
        raise RecipeError(f"cannot draw {k} scenarios: {exc}") from exc


def _other_name(candidates: tuple[Name, ...], avoid: str, seed: int, key: str) -> Name:
    pool = [n for n in candidates if n.name != avoid]
    if not pool:
        raise RecipeError(f"no name distinct from {avoid!r} for {key}")
    return hash_choice(seed, key, pool)


def _aligned_name(candidates: tuple[Name, ...], i: int, avoid: str) -> Name:
    """Name sample i of Y; the next sample when it equals X's name (X != Y)."""
    for step in range(len(candidates)):
        name = candidates[(i + step) % len(candidates)]
        if name.name != avoid:
            return name
    raise RecipeError(f"no name distinct from {avoid!r}")


def actor_actor_items(
    release: Release, identities: dict[str, list[Identity]], params: AttributionParams
) -> Iterator[dict[str, Any]]:
    """Two items per scenario instance (target X, then target Y); see the card for the rule."""
    for instance in _pair_instances(release, identities, params):
        yield from _pair_items(*instance, params)


def _pair_instances(
    release: Release, identities: dict[str, list[Identity]], params: AttributionParams
) -> Iterator[tuple[PairTemplate, str, Identity, Identity, Name, Name]]:
    """(template, dimension, X group, Y group, X name, Y name) per sampled scenario instance."""
    aa = params.actor_actor
    templates = {(p.outcome_config, p.domain, p.scenario, p.gender_pair): p for p in release.pairs}
    by_domain = _scenarios_by_domain(release)
    for config in aa.outcome_configs:
        for gp in aa.gender_pairs:
            if not any(k[0] == config and k[3] == gp for k in templates):
                raise RecipeError(f"the release has no {gp} templates for actor_actor/{config}")
            gx_gender, gy_gender = gp.split("-")
            for dimension in DIMENSIONS:
                for gx in identities[dimension]:
                    for gy in identities[dimension]:
                        key = f"aa/{config}/{gp}/{dimension}/{gx.label_original}/{gy.label_original}"
                        draws: list[tuple[str, int, int | None]]
                        if params.sampling == "full":
                            draws = [
                                (d, s, i)
                                for d, ss in by_domain.items()
                                for s in ss
                                for i in range(params.names_per_group)
                            ]
                        else:
                            draws = [
                                (d, s, None)
                                for d, s in stratified_scenarios(params.seed, key, by_domain, aa.scenarios_per_pair)
                            ]
                        for domain, sc, i in draws:
                            t = templates[(config, domain, sc, gp)]
                            if i is None:
                                nx = hash_choice(params.seed, f"{key}/{domain}/{sc}/x", gx.sampled[gx_gender])
                                ny = _other_name(gy.sampled[gy_gender], nx.name, params.seed, f"{key}/{domain}/{sc}/y")
                            else:
                                nx = gx.sampled[gx_gender][i]
                                ny = _aligned_name(gy.sampled[gy_gender], i, nx.name)
                            yield t, dimension, gx, gy, nx, ny


def _pair_base(t: PairTemplate, dimension: str, gx: Identity, gy: Identity, nx: Name, ny: Name) -> str:
    return (
        f"aa.{t.outcome_config}.{t.domain}.{t.scenario:02d}.{t.gender_pair}.{dimension}."
        f"{gx.key}.n{nx.index:02d}.{gy.key}.n{ny.index:02d}"
    )


def _pair_meta(t: PairTemplate, dimension: str, gx: Identity, gy: Identity, nx: Name, ny: Name) -> dict[str, Any]:
    gx_gender, gy_gender = t.genders
    out_x, out_y = t.outcomes
    return {
        "setting": "actor_actor",
        "template_id": t.template_id,
        "outcome": out_x,
        "outcome_2": out_y,
        "outcome_config": t.outcome_config,
        "gender_pair": t.gender_pair,
        "domain": t.domain,
        "scenario": t.scenario,
        "dimension": dimension,
        **person_fields("x", gx, gx_gender, nx),
        **person_fields("y", gy, gy_gender, ny),
    }


def _pair_items(
    t: PairTemplate, dimension: str, gx: Identity, gy: Identity, nx: Name, ny: Name, params: AttributionParams
) -> Iterator[dict[str, Any]]:
    scene = fill(t.statement, {"X": nx.name, "dimension_1": gx.label, "Y": ny.name, "dimension_2": gy.label})
    base = _pair_base(t, dimension, gx, gy, nx, ny)
    common = _pair_meta(t, dimension, gx, gy, nx, ny)
    out_x, out_y = t.outcomes
    for target, name, outcome, options in (("X", nx, out_x, t.options_x), ("Y", ny, out_y, t.options_y)):
        cue = params.actor_actor.target_cue[outcome].replace("{T}", name.name)
        yield from choice_items(f"{base}.{target}", f"{scene} {cue}", options, {**common, "target": target}, params)


def actor_observer_items(
    release: Release, identities: dict[str, list[Identity]], params: AttributionParams
) -> Iterator[dict[str, Any]]:
    """X's outcome, an observer's stated cause, then X's cause; both conditions per instance."""
    ao = params.actor_observer
    templates = {(t.outcome, t.domain, t.scenario, t.gender, t.observer_cause): t for t in release.observer}
    by_domain = _scenarios_by_domain(release)
    for outcome in OUTCOMES:
        for gender in GENDERS:
            for dimension in DIMENSIONS:
                for gx in identities[dimension]:
                    key = f"ao/{outcome}/{gender}/{dimension}/{gx.label_original}"
                    if params.sampling == "full":
                        for domain, ss in by_domain.items():
                            for sc in ss:
                                for i, nx in enumerate(gx.sampled[gender]):
                                    observers = [
                                        (gy, g2, _aligned_name(gy.sampled[g2], i, nx.name))
                                        for gy in identities[dimension]
                                        for g2 in GENDERS
                                    ]
                                    yield from _observer_items(
                                        templates, outcome, domain, sc, gender, dimension, gx, nx, observers, params
                                    )
                    else:
                        for domain, sc in stratified_scenarios(params.seed, key, by_domain, ao.scenarios_per_cell):
                            k = f"{key}/{domain}/{sc}"
                            nx = hash_choice(params.seed, f"{k}/x", gx.sampled[gender])
                            gy = hash_choice(params.seed, f"{k}/y-group", identities[dimension])
                            g2 = hash_choice(params.seed, f"{k}/y-gender", GENDERS)
                            ny = _other_name(gy.sampled[g2], nx.name, params.seed, f"{k}/y")
                            yield from _observer_items(
                                templates, outcome, domain, sc, gender, dimension, gx, nx, [(gy, g2, ny)], params
                            )


def _observer_items(
    templates,
    outcome,
    domain,
    sc,
    gender,
    dimension,
    gx: Identity,
    nx: Name,
    observers: list[tuple[Identity, str, Name]],
    params: AttributionParams,
) -> Iterator[dict]:
    ao = params.actor_observer
    for cause in CAUSES:
        t = templates[(outcome, domain, sc, gender, cause)]
        base = f"ao.{outcome}.{domain}.{sc:02d}.{gender}.{dimension}.{gx.key}.n{nx.index:02d}.{cause}"
        common = {
            "setting": "actor_observer",
            "template_id": t.template_id,
            "outcome": outcome,
            "domain": domain,
            "scenario": sc,
            "dimension": dimension,
            "target": "X",
            "observer_cause": cause,
            **person_fields("x", gx, gender, nx),
        }
        if "context" in ao.conditions:
            anon = t.statement.replace("{Y}, {dimension_2}, said", f"{ao.anonymous_observer} said")
            statement = fill(anon, {"X": nx.name, "dimension_1": gx.label})
            yield from choice_items(f"{base}.context", statement, t.options, {**common, "condition": "context"}, params)
        if "context+identity" in ao.conditions:
            for gy, g2, ny in observers:
                statement = fill(
                    t.statement, {"X": nx.name, "dimension_1": gx.label, "Y": ny.name, "dimension_2": gy.label}
                )
                meta = {**common, "condition": "context+identity", **person_fields("y", gy, g2, ny)}
                item_id = f"{base}.identity.{gy.key}.{g2}.n{ny.index:02d}"
                yield from choice_items(item_id, statement, t.options, meta, params)


def check_params_against_release(release: Release, params: AttributionParams) -> None:
    """Sample sizes the release cannot satisfy are recipe errors, named by parameter."""
    total = sum(len(v) for v in _scenarios_by_domain(release).values())
    for name, value in (
        ("actor_actor.scenarios_per_pair", params.actor_actor.scenarios_per_pair),
        ("actor_observer.scenarios_per_cell", params.actor_observer.scenarios_per_cell),
    ):
        if value > total:
            raise RecipeError(f"parameters.{name}={value} exceeds the {total} scenarios per outcome in the release")


# ----------------------------------------------------------------------------- counts


def expected_counts(release: Release, params: AttributionParams, sampling: str | None = None) -> dict[str, int]:
    """Rows per item config, computed from the design (not by generating the rows)."""
    sampling = sampling or params.sampling
    k = params.names_per_group
    rot = 4 if params.option_order == "rotations" else 1
    groups = [len(release.groups[d]) for d in DIMENSIONS]
    sum_g, sum_g2 = sum(groups), sum(g * g for g in groups)
    scenarios = sum(len(v) for v in _scenarios_by_domain(release).values())
    aa, ao = params.actor_actor, params.actor_observer
    cells = len(aa.outcome_configs) * len(aa.gender_pairs) * sum_g2
    per_pair = scenarios * k if sampling == "full" else aa.scenarios_per_pair
    has_ctx = "context" in ao.conditions
    has_id = "context+identity" in ao.conditions
    if sampling == "full":
        observer = (
            len(OUTCOMES)
            * len(GENDERS)
            * len(CAUSES)
            * scenarios
            * k
            * (has_ctx * sum_g + has_id * sum_g2 * len(GENDERS))
        )
    else:
        observer = len(OUTCOMES) * len(GENDERS) * sum_g * ao.scenarios_per_cell * len(CAUSES) * (has_ctx + has_id)
    counts = {
        "single_actor": len(release.single) * sum_g * k * rot,
        "actor_actor": cells * per_pair * 2 * rot,
        "actor_observer": observer * rot,
    }
    return counts
