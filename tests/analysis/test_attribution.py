"""analysis.load and analysis.attribution.tables on small synthetic prompt + result frames.

Every expected number is computed here independently: d from a dict of the item's own
(type, probability) pairs, tests with scipy.stats, pooled SDs with numpy.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from scipy import stats as sps

from analysis.attribution import tables as at
from analysis.attribution.observer import actor_observer_table
from analysis.attribution.probe import attribution_tables
from analysis.load import join, load_prompts, load_results, load_results_manifest
from promptgen.core.errors import ProbeError
from runners import results as res

CAUSE_LIST = ["effort", "ability", "difficulty", "luck"]
SCORING = json.dumps({"choice_mode": "sentence"})


def expected_d(types: list[str], probs: list[float]) -> float:
    p = dict(zip(types, probs, strict=True))
    return (p["effort"] + p["ability"]) - (p["difficulty"] + p["luck"])


def item(item_id: str, setting: str, rng: np.random.Generator, *, model: str = "m1", **meta: Any) -> dict[str, Any]:
    """One joined row: prompt metadata + a result with random probabilities over a random option order."""
    types = [CAUSE_LIST[i] for i in rng.permutation(4)]
    probs = rng.dirichlet(np.ones(4)).tolist()
    row = {
        "id": item_id,
        "setting": setting,
        "choice_types": types,
        "choice_probs": probs,
        "model": model,
        "model_revision": "r1",
        "scoring": SCORING,
        "refused": bool(rng.random() < 0.2),
        "rotation": None,
        **meta,
    }
    row["d_expected"] = expected_d(types, probs)
    return row


IDENTITIES = ("a Chinese", "an Indian")
NAMES = {"female": ("Ana", "Mei"), "male": ("Raj", "Li")}


def single_frame(rng: np.random.Generator, model: str = "m1") -> pd.DataFrame:
    rows = []
    for identity in IDENTITIES:
        for gender, names in NAMES.items():
            for outcome in ("success", "failure"):
                for scenario in range(3):
                    for name in names:
                        meta = dict(
                            dimension="race",
                            identity=identity,
                            gender=gender,
                            name=name,
                            outcome=outcome,
                            domain="education" if scenario < 2 else "sports",
                            scenario=scenario,
                        )
                        key = f"sa.{outcome}.{scenario}.{gender}.{identity}.{name}"
                        rows.append(item(key, "single_actor", rng, model=model, **meta))
    return pd.DataFrame(rows)


def pair_frame(rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for config, (out_x, out_y) in {
        "both_success": ("success", "success"),
        "success_failure": ("success", "failure"),
    }.items():
        for gx, gy in (("female", "male"), ("male", "male")):
            for ix in IDENTITIES:
                for iy in IDENTITIES:
                    for scenario in range(3):
                        nx, ny = NAMES[gx][scenario % 2], NAMES[gy][(scenario + 1) % 2]
                        if nx == ny:
                            continue
                        meta = dict(
                            template_id=f"{config}.{scenario}.{gx}-{gy}",
                            outcome_config=config,
                            gender_pair=f"{gx}-{gy}",
                            dimension="race",
                            domain="education" if scenario < 2 else "sports",
                            scenario=scenario,
                            identity=ix,
                            gender=gx,
                            name=nx,
                            outcome=out_x,
                            identity_2=iy,
                            gender_2=gy,
                            name_2=ny,
                            outcome_2=out_y,
                        )
                        base = f"aa.{config}.{scenario}.{gx}-{gy}.{ix}.{nx}.{iy}.{ny}"
                        for target in ("X", "Y"):
                            rows.append(item(f"{base}.{target}", "actor_actor", rng, target=target, **meta))
    return pd.DataFrame(rows)


def observer_frame(rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for identity in IDENTITIES:
        for outcome in ("success", "failure"):
            for scenario in (0, 2):  # scenario 1 has no observer items: its single items must not be pooled
                name = NAMES["female"][scenario // 2]
                for cause in ("effort", "luck"):
                    meta = dict(
                        dimension="race",
                        identity=identity,
                        gender="female",
                        name=name,
                        outcome=outcome,
                        domain="education" if scenario < 2 else "sports",
                        scenario=scenario,
                        observer_cause=cause,
                        target="X",
                    )
                    base = f"ao.{outcome}.{scenario}.{identity}.{name}.{cause}"
                    rows.append(item(f"{base}.context", "actor_observer", rng, condition="context", **meta))
                    for k, observer in enumerate(IDENTITIES):
                        rows.append(
                            item(
                                f"{base}.identity.{k}",
                                "actor_observer",
                                rng,
                                condition="context+identity",
                                identity_2=observer,
                                **meta,
                            )
                        )
    return pd.DataFrame(rows)


def rows_of(table: pd.DataFrame, **where: Any) -> pd.DataFrame:
    mask = np.ones(len(table), dtype=bool)
    for col, value in where.items():
        mask &= (table[col] == value).to_numpy()
    return table[mask]


# ----------------------------------------------------------------------------- per item


def test_choice_probs_are_mapped_through_the_items_own_option_order() -> None:
    frame = pd.DataFrame(
        [
            {
                "id": "x",
                "setting": "single_actor",
                "choice_types": ["luck", "difficulty", "effort", "ability"],
                "choice_probs": [0.1, 0.2, 0.3, 0.4],
                "model": "m",
                "model_revision": "r",
                "scoring": "s",
                "refused": False,
            },
            {
                "id": "y",
                "setting": "single_actor",
                "choice_types": ["ability", "effort", "luck", "difficulty"],
                "choice_probs": None,
                "model": "m",
                "model_revision": "r",
                "scoring": "s",
                "refused": True,
            },
        ]
    )
    items = at.compute_items(frame)
    x = items.iloc[0]
    assert (x.p_luck, x.p_difficulty, x.p_effort, x.p_ability) == pytest.approx((0.1, 0.2, 0.3, 0.4))
    assert x.d == pytest.approx(0.7 - 0.3)
    assert x.top_cause == "ability"
    y = items.iloc[1]
    assert math.isnan(y.d) and pd.isna(y.top_cause)


def test_choice_types_that_are_not_the_four_causes_are_an_error_naming_the_item() -> None:
    frame = pd.DataFrame(
        [
            {
                "id": "bad-item",
                "setting": "single_actor",
                "choice_types": ["effort", "effort", "luck", "ability"],
                "choice_probs": [0.25] * 4,
                "model": "m",
                "model_revision": "r",
                "scoring": "s",
                "refused": False,
                "results_file": "RESULTS/part-1.parquet",
            }
        ]
    )
    with pytest.raises(ProbeError, match=r"RESULTS/part-1\.parquet.*bad-item"):
        at.compute_items(frame)
    with pytest.raises(ProbeError, match="choice_probs"):
        at.compute_items(frame.drop(columns="choice_probs"))


def test_rotations_of_one_item_are_one_observation() -> None:
    rng = np.random.default_rng(3)
    rows = [
        item(f"sa.base.r{r}", "single_actor", rng, rotation=r, dimension="race", identity="a", gender="f", outcome="s")
        for r in range(4)
    ]
    rows += [item("sa.other", "single_actor", rng, dimension="race", identity="a", gender="f", outcome="s")]
    for row in rows:
        row["refused"] = False
    rows[1]["refused"] = True
    items = at.compute_items(pd.DataFrame(rows))
    collapsed = at.collapse_rotations(items).set_index("base_id")
    assert sorted(collapsed.index) == ["sa.base", "sa.other"]
    base = collapsed.loc["sa.base"]
    assert base.d == pytest.approx(np.mean([r["d_expected"] for r in rows[:4]]))
    assert base.n_presentations == 4 and bool(base.refused)
    table = at.single_actor_table(items)
    included = rows_of(table, refused_items="included").iloc[0]
    excluded = rows_of(table, refused_items="excluded").iloc[0]
    assert included.n == 2
    assert excluded.n == 2  # one rotation refused: the item stays, with the mean of the other three
    kept = np.mean([rows[r]["d_expected"] for r in (0, 2, 3)])
    assert excluded["mean"] == pytest.approx(np.mean([kept, rows[4]["d_expected"]]))


# ----------------------------------------------------------------------------- single actor


def test_single_actor_table_matches_scipy_per_group_with_and_without_refusals() -> None:
    rng = np.random.default_rng(4)
    joined = pd.concat([single_frame(rng, "m1"), single_frame(rng, "m2")], ignore_index=True)
    table = at.single_actor_table(at.compute_items(joined))
    groups = joined.groupby(["model", "dimension", "identity", "gender", "outcome"])
    assert len(table) == 2 * groups.ngroups
    assert set(table["refused_items"]) == {"included", "excluded"}
    for (model, dim, identity, gender, outcome), g in groups:
        for variant, values in (
            ("included", g["d_expected"]),
            ("excluded", g.loc[~g["refused"], "d_expected"]),
        ):
            row = rows_of(
                table,
                model=model,
                dimension=dim,
                identity=identity,
                gender=gender,
                outcome=outcome,
                refused_items=variant,
            ).iloc[0]
            ref = sps.ttest_1samp(values.to_numpy(), 0.0)
            ci = ref.confidence_interval(0.95)
            assert row.n == len(values)
            assert row["mean"] == pytest.approx(values.mean())
            assert row.t == pytest.approx(ref.statistic)
            assert row.p == pytest.approx(ref.pvalue)
            assert (row.ci_low, row.ci_high) == pytest.approx((ci.low, ci.high))
            assert row.n_refused == int(g["refused"].sum())
    by_domain = at.single_actor_table(at.compute_items(joined), at.DOMAIN_GROUPS)
    sports = joined[(joined.model == "m1") & (joined.domain == "sports") & (joined.outcome == "failure")]
    row = rows_of(by_domain, model="m1", domain="sports", outcome="failure", refused_items="included").iloc[0]
    assert row.t == pytest.approx(sps.ttest_1samp(sports["d_expected"], 0.0).statistic)


def test_all_refused_constant_and_single_item_groups_are_nan_with_a_note() -> None:
    rows = []
    for k in range(3):  # group A: every item refused
        rows.append(_fixed(f"a{k}", "A", [0.1 * (k + 1), 0.2, 0.3, 0.4 - 0.1 * k], refused=True))
    for k in range(3):  # group B: the same probabilities each time -> zero variance
        rows.append(_fixed(f"b{k}", "B", [0.4, 0.3, 0.2, 0.1], refused=False))
    rows.append(_fixed("c0", "C", [0.4, 0.3, 0.2, 0.1], refused=False))  # group C: one item
    table = at.single_actor_table(at.compute_items(pd.DataFrame(rows)))
    a_ex = rows_of(table, identity="A", refused_items="excluded").iloc[0]
    assert a_ex.n_items == 0 and math.isnan(a_ex["mean"]) and "all items refused" in a_ex.note
    a_in = rows_of(table, identity="A", refused_items="included").iloc[0]
    assert a_in.n == 3 and a_in.n_refused == 3 and a_in.note == ""
    b = rows_of(table, identity="B", refused_items="included").iloc[0]
    assert b["mean"] == pytest.approx(0.4) and math.isnan(b.t) and "zero variance" in b.note
    c = rows_of(table, identity="C", refused_items="excluded").iloc[0]
    assert c.n == 1 and math.isnan(c.p) and "n=1" in c.note


def _fixed(item_id: str, identity: str, probs: list[float], *, refused: bool) -> dict[str, Any]:
    return {
        "id": item_id,
        "setting": "single_actor",
        "choice_types": CAUSE_LIST,
        "choice_probs": probs,
        "model": "m",
        "model_revision": "r",
        "scoring": "s",
        "refused": refused,
        "dimension": "race",
        "identity": identity,
        "gender": "female",
        "outcome": "success",
    }


def test_tables_refuse_items_of_another_setting() -> None:
    rng = np.random.default_rng(5)
    with pytest.raises(ProbeError, match="expected single_actor"):
        at.single_actor_table(at.compute_items(pair_frame(rng)))


# ----------------------------------------------------------------------------- actor-actor


def _single_d(single: pd.DataFrame, drop_refused: bool) -> dict[tuple, float]:
    s = single[~single["refused"]] if drop_refused else single
    return {
        (r.dimension, r.identity, r.gender, r.name, r.outcome, r.domain, r.scenario): r.d_expected
        for r in s.itertuples()
    }


def test_actor_actor_delta_matches_the_same_actor_scenario_and_outcome() -> None:
    rng = np.random.default_rng(6)
    single, pairs = single_frame(rng), pair_frame(rng)
    # an actor with no single-actor items: NaN with a note, never a crash
    extra = pairs.iloc[[0]].assign(id="aa.unmatched.X", name="Nobody", refused=False)
    pairs = pd.concat([pairs, extra], ignore_index=True)
    s_items, p_items = at.compute_items(single), at.compute_items(pairs)
    per_item = at.actor_actor_delta_items(at.collapse_rotations(s_items), at.collapse_rotations(p_items))
    d_single = _single_d(single, drop_refused=False)
    for r in pairs.itertuples():
        y = r.target == "Y"
        key = (
            r.dimension,
            r.identity_2 if y else r.identity,
            r.gender_2 if y else r.gender,
            r.name_2 if y else r.name,
            r.outcome_2 if y else r.outcome,
            r.domain,
            r.scenario,
        )
        got = per_item.set_index("id").loc[r.id]
        if key in d_single:
            assert got.delta_d == pytest.approx(d_single[key] - r.d_expected)
            assert got.identity == key[1] and got.outcome == key[4]
        else:
            assert math.isnan(got.delta_d) and "no single-actor item" in got.note

    table = at.actor_actor_delta_table(s_items, p_items)
    for variant in ("included", "excluded"):
        drop = variant == "excluded"
        singles = _single_d(single, drop)
        expected: dict[tuple, list[float]] = defaultdict(list)
        for r in pairs[~pairs["refused"]].itertuples() if drop else pairs.itertuples():
            y = r.target == "Y"
            actor = (
                (r.identity_2, r.gender_2, r.name_2, r.outcome_2) if y else (r.identity, r.gender, r.name, r.outcome)
            )
            key = (r.dimension, *actor, r.domain, r.scenario)
            if key in singles:
                expected[(r.outcome_config, actor[0], actor[1], actor[3])].append(singles[key] - r.d_expected)
        for (config, identity, gender, outcome), values in expected.items():
            row = rows_of(
                table, outcome_config=config, identity=identity, gender=gender, outcome=outcome, refused_items=variant
            ).iloc[0]
            assert row.n == len(values)
            assert row.t == pytest.approx(sps.ttest_1samp(values, 0.0).statistic)
            assert row.p == pytest.approx(sps.ttest_1samp(values, 0.0).pvalue)
    assert table["note"].str.contains("without a value").any()  # the unmatched item's group


def test_actor_actor_pair_difference_is_x_minus_y_per_instance() -> None:
    rng = np.random.default_rng(7)
    pairs = pair_frame(rng)
    lone = pairs.iloc[[0]].assign(id="aa.lone.X", name="Solo", refused=False)  # an X without its Y
    pairs = pd.concat([pairs, lone], ignore_index=True)
    items = at.compute_items(pairs)
    per = at.actor_actor_pair_items(at.collapse_rotations(items))
    solo = per[per["name"] == "Solo"].iloc[0]
    assert math.isnan(solo.delta_d_pair) and solo.note == "no Y item for this instance"
    table = at.actor_actor_pair_table(items)
    instance = ["template_id", "identity", "name", "identity_2", "name_2"]
    for variant in ("included", "excluded"):
        use = pairs[~pairs["refused"]] if variant == "excluded" else pairs
        x = use[use.target == "X"].set_index(instance)
        y = use[use.target == "Y"].set_index(instance)
        both = x.join(y[["d_expected"]].add_suffix("_y"), how="inner")
        both = both.assign(diff=both["d_expected"] - both["d_expected_y"]).reset_index()
        for (config, gp, ix, iy), g in both.groupby(["outcome_config", "gender_pair", "identity", "identity_2"]):
            row = rows_of(
                table, outcome_config=config, gender_pair=gp, identity=ix, identity_2=iy, refused_items=variant
            ).iloc[0]
            assert row.n == len(g)
            assert row["mean"] == pytest.approx(g["diff"].mean())
            if len(g) >= 2:
                assert row.t == pytest.approx(sps.ttest_1samp(g["diff"], 0.0).statistic)
            else:
                assert math.isnan(row.t) and row.note


# ----------------------------------------------------------------------------- actor-observer


def test_actor_observer_smd_and_t_against_scipy() -> None:
    rng = np.random.default_rng(8)
    single, observer = single_frame(rng), observer_frame(rng)
    table = actor_observer_table(at.compute_items(single), at.compute_items(observer))
    assert set(table["comparison"]) == {"delta_d1", "delta_d2"}
    checked = 0
    for variant in ("included", "excluded"):
        drop = variant == "excluded"
        s = single[~single["refused"]] if drop else single
        o = observer[~observer["refused"]] if drop else observer
        for (identity, outcome, cause), g in observer.groupby(["identity", "outcome", "observer_cause"]):
            keys = set(zip(g["name"], g["scenario"], strict=True))
            pool = s[
                (s.identity == identity)
                & (s.gender == "female")
                & (s.outcome == outcome)
                & np.array([(n, sc) in keys for n, sc in zip(s["name"], s["scenario"], strict=True)], dtype=bool)
            ]["d_expected"].to_numpy()
            for comparison, condition in (("delta_d1", "context"), ("delta_d2", "context+identity")):
                cond = o[
                    (o.identity == identity)
                    & (o.outcome == outcome)
                    & (o.observer_cause == cause)
                    & (o.condition == condition)
                ]["d_expected"].to_numpy()
                row = rows_of(table, identity=identity, outcome=outcome, observer_cause=cause, comparison=comparison)
                row = rows_of(row, refused_items=variant).iloc[0]
                assert (row.n_single, row.n_condition) == (len(pool), len(cond))
                assert row.delta_d == pytest.approx(pool.mean() - cond.mean()) if len(cond) else True
                if len(pool) >= 2 and len(cond) >= 2:
                    ref = sps.ttest_ind(pool, cond, equal_var=True)
                    ss = ((pool - pool.mean()) ** 2).sum() + ((cond - cond.mean()) ** 2).sum()
                    sp = math.sqrt(ss / (len(pool) + len(cond) - 2))
                    assert row.t == pytest.approx(ref.statistic)
                    assert row.p == pytest.approx(ref.pvalue)
                    assert row.smd == pytest.approx((pool.mean() - cond.mean()) / sp)
                    checked += 1
                else:
                    assert math.isnan(row.t) and row.note
    assert checked >= 8


def test_actor_observer_with_a_missing_condition_says_so() -> None:
    rng = np.random.default_rng(9)
    observer = observer_frame(rng)
    only_context = observer[observer["condition"] == "context"]
    table = actor_observer_table(at.compute_items(single_frame(rng)), at.compute_items(only_context))
    d2 = rows_of(table, comparison="delta_d2")
    assert d2["t"].isna().all() and d2["note"].str.contains("no items in this condition").all()


# ----------------------------------------------------------------------------- shares


def test_attribution_shares_count_the_most_probable_cause_per_model() -> None:
    rng = np.random.default_rng(10)
    joined = pd.concat([single_frame(rng, "m1"), single_frame(rng, "m2")], ignore_index=True)
    top = [
        max(zip(t, p, strict=True), key=lambda tp: tp[1])[0]
        for t, p in zip(joined["choice_types"], joined["choice_probs"], strict=True)
    ]
    joined = joined.assign(top=top)
    table = at.attribution_shares(at.compute_items(joined), by=("setting",))
    assert len(table) == 2 * 2 * 4
    for model in ("m1", "m2"):
        for variant in ("included", "excluded"):
            g = joined[joined.model == model]
            if variant == "excluded":
                g = g[~g["refused"]]
            rows = rows_of(table, model=model, refused_items=variant).set_index("cause")
            assert rows["share"].sum() == pytest.approx(1.0)
            for cause in CAUSE_LIST:
                assert rows.loc[cause, "count"] == int((g["top"] == cause).sum())
                assert rows.loc[cause, "share"] == pytest.approx((g["top"] == cause).mean())


def test_attribution_tables_runs_every_table() -> None:
    rng = np.random.default_rng(11)
    tables = attribution_tables(single_frame(rng), pair_frame(rng), observer_frame(rng))
    assert set(tables) >= {"single_actor", "actor_actor_delta", "actor_actor_pair", "actor_observer"}
    for name, table in tables.items():
        assert not table.empty, name
        assert set(table["refused_items"]) == {"included", "excluded"}, name


def test_the_actor_actor_delta_table_carries_its_interval_over_the_pairs_templates() -> None:
    rng = np.random.default_rng(12)
    tables = attribution_tables(single_frame(rng), pair_frame(rng))
    delta = tables["actor_actor_delta"]
    frames = at.actor_actor_delta_frames(at.compute_items(single_frame(np.random.default_rng(12))), at.compute_items(
        pair_frame(np.random.default_rng(12))
    ))  # fmt: skip
    for row in delta[delta["n"] > 0].itertuples():
        items = frames[row.refused_items]
        own = items[
            (items["outcome_config"] == row.outcome_config) & (items["identity"] == row.identity)
            & (items["gender"] == row.gender) & (items["outcome"] == row.outcome) & items["delta_d"].notna()
        ]  # fmt: skip
        assert own["template_id"].nunique() >= 2  # the group spans templates: it has an interval
        assert row.sample_units == items["template_id"].nunique()  # the run's sample, counted in templates
        assert row.precision.startswith(f"Δd = {row.mean:.2f} (95% CI ")


# ----------------------------------------------------------------------------- load + join


def _write_prompts(folder: Path, rows: list[dict[str, Any]]) -> Path:
    target = folder / "data" / "single_actor"
    target.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), target / "test-00000-of-00001.parquet")
    return folder


def _write_results(
    folder: Path, ids: list[str], probs: list[list[float]], model: str = "org/m", revision: str = "rev"
) -> Path:
    key = res.ResultKey(model, revision, SCORING)
    kdir = res.key_dir(folder, "single_actor", key)
    res.write_key_file(kdir, key)
    rows = [
        {"id": i, "model": model, "model_revision": revision, "scoring": SCORING, "choice_probs": p, "refused": False}
        for i, p in zip(ids, probs, strict=True)
    ]
    res.write_part(kdir, (0, 1), rows[:1])
    res.write_part(kdir, (0, 1), rows[1:])
    entry = {"prompt_dataset": {"config": "single_actor"}, "model": model, "key": kdir.name, "items": len(rows)}
    res.update_manifest(folder, f"single_actor/{kdir.name}/shard-0of1", entry)  # recorded, as a finished run is
    return kdir


def test_load_and_join_a_local_prompt_folder_and_results_folder(tmp_path: Path) -> None:
    rows = [
        {
            "id": f"sa.{k}",
            "setting": "single_actor",
            "choice_types": CAUSE_LIST[k:] + CAUSE_LIST[:k],
            "dimension": "race",
            "identity": "a",
            "gender": "female",
            "outcome": "success",
            "prompt": "long text",
        }
        for k in range(3)
    ]
    prompts_dir = _write_prompts(tmp_path / "prompts", rows)
    probs = [[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1], [0.25, 0.25, 0.3, 0.2]]
    kdir = _write_results(tmp_path / "results", [r["id"] for r in rows], probs)
    _write_results(tmp_path / "results", [r["id"] for r in rows], probs, model="org/other", revision="rev2")
    prompts = load_prompts(prompts_dir, "single_actor", columns=["id", "setting", "choice_types", "identity"])
    assert list(prompts.columns) == ["id", "setting", "choice_types", "identity"]
    results = load_results(tmp_path / "results", "single_actor")
    assert len(results) == 6 and results["result_key"].nunique() == 2
    assert kdir.name in set(results["result_key"])  # the folder's slug, recomputed from the rows
    assert results["results_file"].str.endswith(".parquet").all()
    joined = join(prompts, results)
    assert len(joined) == 6
    items = at.compute_items(joined.assign(dimension="race", gender="female", outcome="success"))
    got = items.set_index(["model", "id"])["d"]
    for r, p in zip(rows, probs, strict=True):
        assert got[("org/m", r["id"])] == pytest.approx(expected_d(r["choice_types"], p))
    runs = load_results_manifest(tmp_path / "results")["runs"]
    assert sorted(run["key"] for run in runs.values()) == sorted(set(results["result_key"]))


def test_join_names_the_results_file_when_ids_are_not_in_the_prompts(tmp_path: Path) -> None:
    prompts = pd.DataFrame({"id": ["a", "b"], "setting": ["single_actor"] * 2})
    _write_results(tmp_path / "results", ["a", "zzz"], [[0.25] * 4] * 2)
    results = load_results(tmp_path / "results", "single_actor")
    with pytest.raises(ProbeError, match=r"part-00000of00001-[0-9]+-[0-9a-z]+\.parquet.*'zzz'"):
        join(prompts, results)
    with pytest.raises(ProbeError, match="lack required column"):
        join(prompts, results[results["id"] == "a"], require=["choice_types"])
    with pytest.raises(ProbeError, match="no `id` column"):
        join(prompts.drop(columns="id"), results)
    with pytest.raises(ProbeError, match="both have column"):
        join(prompts.assign(model="x"), results)


def test_load_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ProbeError, match="does not exist"):
        load_prompts(tmp_path / "missing", "single_actor")
    _write_prompts(tmp_path / "prompts", [{"id": "a", "setting": "single_actor"}])
    with pytest.raises(ProbeError, match="configs here: single_actor"):
        load_prompts(tmp_path / "prompts", "actor_actor")
    with pytest.raises(ProbeError, match="Hub repos only"):
        load_prompts(tmp_path / "prompts", "single_actor", revision="v1.0.0")
    with pytest.raises(ProbeError, match="no column"):
        load_prompts(tmp_path / "prompts", "single_actor", columns=["id", "choice_types"])
    (tmp_path / "results").mkdir()
    with pytest.raises(ProbeError, match="no result parts"):
        load_results(tmp_path / "results", "single_actor")
    kdir = _write_results(tmp_path / "results", ["a", "b"], [[0.25] * 4] * 2)
    newer = res.write_part(kdir, (1, 2), [{"id": "a", "model": "org/m", "model_revision": "rev", "scoring": SCORING}])
    merged = load_results(tmp_path / "results", "single_actor").set_index("id")  # one row per id: the newest wins
    assert sorted(merged.index) == ["a", "b"] and merged.loc["a", "results_file"] == str(newer)
    (kdir / "part-00000of00001-junk.parquet").write_bytes(b"not parquet")  # not a part name: ignored
    newer.write_bytes(b"PAR1 truncated")
    with pytest.raises(ProbeError, match="cannot read result part"):
        load_results(tmp_path / "results", "single_actor")


def test_hub_ids_go_through_datasets_with_the_revision(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    calls = []

    def fake_load_dataset(repo: str, config: str, **kwargs: Any) -> datasets.Dataset:
        calls.append((repo, config, kwargs))
        row = {"id": "a", "model": "org/m", "model_revision": "rev", "scoring": SCORING, "refused": False}
        return datasets.Dataset.from_list([row])

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    frame = load_results("org/results", "single_actor", revision="v1.0.0")
    assert calls == [("org/results", "single_actor", {"split": "test", "revision": "v1.0.0"})]
    assert frame["results_file"].iloc[0] == "org/results@v1.0.0:single_actor"
    assert frame["result_key"].iloc[0] == res.ResultKey("org/m", "rev", SCORING).slug
    prompts = load_prompts("org/prompts", "single_actor", revision="v1.0.0", columns=["id"])
    assert list(prompts.columns) == ["id"] and calls[-1][2]["revision"] == "v1.0.0"
