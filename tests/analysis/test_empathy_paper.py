"""analysis.empathy.paper against the authors' own notebook (tests/empathy_notebook.py).

One simulated matrix per category is written as the authors' processed files and read by the
notebook's unchanged functions; the same items go to ours. Every expected number below is what
a named notebook function computes on those files, never a number written here:

- excluded events: `len(get_excluded_id_set(...))` (full matrix) and
  `len(get_excluded_id_set_no_default(...))` (specified); refusal share: that over
  `len(get_intensity_list(...)[0])` (6,050), the unrounded value of what the notebook prints;
- full matrix M0, μ, σ, min, max, M: inside `draw_heatmap`, the array its `np.zeros` made
  (filled with the rounded cell means), its `np.mean`, `np.std`, `np.amin`, `np.amax` of it,
  and the matrix it hands to `sns.heatmap` (recorded, unrounded; it prints them rounded);
- specified matrix μ, σ, min, max: the same calls inside `get_filtered_matrix`;
- δ: `get_delta(get_filtered_matrix(...), group_option)`;
- interval: `get_interval(...)`, once replaying our permutations in its `random.shuffle` (equal
  to 1e-9), once with its own `random.shuffle` (equal within Monte-Carlo error);
- mask: `get_mask_cells(...)` (True = hidden) against our `shown`.
"""

from __future__ import annotations

import math
import random
import re

import numpy as np
import pandas as pd
import pytest
from markupsafe import escape as html_escape

from analysis.empathy.paper import null_deltas, paper_gap, paper_mask, paper_matrix, permutations
from analysis.empathy.tables import category_identities
from empathy_notebook import (
    EVENTS,
    GROUP_OPTION,
    MODEL_ID,
    VARIATION,
    Replay,
    notebook,
    recording,
    simulate,
    write_processed_results,
)
from empathy_reference import working_directory

TOL = 1e-9
#: permutations of the notebook's own `get_interval` (its Python loops take ~1 ms per permutation)
NOTEBOOK_PERMUTATIONS = 2000
#: of the exact replay (any count checks the arithmetic)
REPLAY_PERMUTATIONS = 300

#: per category: refusals concentrated in a few cells, in `a person`'s row/column (full matrix
#: only) and among the specified identities, overlapping; one cell that repeats its perceiver's
#: diagonal cell (p NaN: hidden) and one that repeats the experiencer's
CASES = {
    "religion": {
        "refusals": {(0, 3): 40, (2, 5): 25, (3, 3): 10, (5, 0): 7},
        "copies": {(1, 2): (1, 1), (4, 2): (2, 2)},
    },
    "race": {
        "refusals": {(0, 7): 30, (3, 12): 20, (12, 12): 5, (18, 1): 12, (9, 0): 8},
        "copies": {(1, 6): (1, 1), (13, 2): (2, 2)},
    },
}


def _run(category: str, workdir) -> dict:
    """The simulated items, the notebook's results on them, and ours."""
    ids = category_identities(None, category)
    frame = simulate(ids, refusals=CASES[category]["refusals"], copies=CASES[category]["copies"], seed=7)
    write_processed_results(workdir, frame)
    (workdir / "figures").mkdir()
    ns = notebook()
    group_option, variation = GROUP_OPTION[category], VARIATION["P0S0T0"]
    args = (group_option, variation, MODEL_ID)
    ns["group_option"] = group_option  # `get_interval` reads the global, as the notebook's last cells set it
    nb: dict = {}
    with working_directory(workdir):
        nb["events"] = len(ns["get_intensity_list"](*args, "a person", "a person")[0])
        excluded = ns["get_excluded_id_set"](*args)
        nb["excluded_full"] = len(excluded)
        nb["mask"] = ns["get_mask_cells"](*args, excluded)
        with recording(ns) as rec:
            ns["draw_heatmap"](*args, excluded, nb["mask"])
        nb["full"] = {k: v[0] for k, v in rec.calls.items()}
        nb["heatmap"] = ns["sns"].drawn[-1]
        excluded_spec = ns["get_excluded_id_set_no_default"](*args)
        nb["excluded_specified"] = len(excluded_spec)
        with recording(ns) as rec:
            actual = ns["get_filtered_matrix"](*args, excluded_spec)
        nb["specified"] = {k: v[0] for k, v in rec.calls.items()}
    nb["actual"] = actual
    nb["delta"] = ns["get_delta"](actual, group_option)
    rows, cols = permutations(len(actual), REPLAY_PERMUTATIONS, 3)
    ns["random"] = Replay(rows, cols)
    nb["interval_replay"] = ns["get_interval"](actual, p_times=REPLAY_PERMUTATIONS)
    ns["random"] = random.Random(11)
    nb["interval_mc"] = ns["get_interval"](actual, p_times=NOTEBOOK_PERMUTATIONS)

    ours = {
        "gap": paper_gap(frame, seed=0),
        "gap_replay": paper_gap(frame, n_permutations=REPLAY_PERMUTATIONS, seed=3),
        "matrix": paper_matrix(frame).set_index("matrix"),
        "mask": paper_mask(frame),
    }
    return {"frame": frame, "ids": ids, "nb": nb, "ours": ours, "ns": ns}


@pytest.fixture(scope="module", params=["religion", "race"])
def case(request, tmp_path_factory) -> dict:
    out = _run(request.param, tmp_path_factory.mktemp(request.param))
    out["category"] = request.param
    return out


def test_the_simulation_exercises_every_rule(case) -> None:
    """Refusals differ between the full and the specified matrix, and the mask hides some
    tested cells and shows others (else the comparisons below would prove little)."""
    nb = case["nb"]
    assert nb["events"] == EVENTS
    assert nb["excluded_full"] > nb["excluded_specified"] > 0
    n = len(case["ids"])
    tested = ~np.eye(n, dtype=bool)
    tested[0, :] = tested[:, 0] = False
    hidden = nb["mask"][tested]
    assert hidden.any() and (~hidden).any()


def test_refusals_are_excluded_as_the_notebook_excludes_them(case) -> None:
    nb, matrix = case["nb"], case["ours"]["matrix"]
    assert matrix.loc["full", "excluded_events"] == nb["excluded_full"]
    assert matrix.loc["specified", "excluded_events"] == nb["excluded_specified"]
    assert matrix.loc["full", "events"] == nb["events"]
    # Table 6: the share get_excluded_id_set prints (rounded there), unrounded
    assert matrix.loc["full", "refusal_rate"] == pytest.approx(nb["excluded_full"] / nb["events"], abs=TOL)


@pytest.mark.parametrize("kind", ["full", "specified"])
def test_mean_std_min_max(case, kind) -> None:
    """μ, σ of the rounded M0 and min, max of M: draw_heatmap's (full) and get_filtered_matrix's
    (specified) own np.mean, np.std, np.amin, np.amax."""
    row, calls = case["ours"]["matrix"].loc[kind], case["nb"][kind]
    for ours, theirs in (("mean", "mean"), ("std", "std"), ("min", "amin"), ("max", "amax")):
        assert row[ours] == pytest.approx(float(calls[theirs]), abs=TOL), ours
    assert row["note"] == ""


def test_full_matrix_m0_m_and_mask(case) -> None:
    """Cells in the notebook's order (`a person` first): M0 as draw_heatmap fills it (rounded
    cell means, equal to the last bit), M as it hands it to sns.heatmap, and the mask of
    get_mask_cells (True = hidden) against our `shown`."""
    nb, cells = case["nb"], case["ours"]["mask"]
    n = len(case["ids"])
    order = cells.sort_values(["perceiver_order", "experiencer_order"])
    assert list(order["perceiver"].iloc[::n]) == [
        "a person",
        *case["ns"]["group_mappings"][GROUP_OPTION[case["category"]]],
    ]
    m0 = order["m0"].to_numpy().reshape(n, n)
    np.testing.assert_array_equal(m0, nb["full"]["zeros"])
    np.testing.assert_allclose(order["m"].to_numpy().reshape(n, n), nb["heatmap"]["data"], rtol=0, atol=TOL)
    assert nb["heatmap"]["vmin"] == pytest.approx(case["ours"]["matrix"].loc["full", "min"], abs=TOL)
    np.testing.assert_array_equal(order["shown"].to_numpy().reshape(n, n), ~nb["mask"])
    np.testing.assert_array_equal(nb["heatmap"]["mask"], nb["mask"])


def test_delta(case) -> None:
    gap = case["ours"]["gap"]
    assert len(gap) == 1 and gap["note"].iat[0] == ""
    assert gap["delta"].iat[0] == pytest.approx(case["nb"]["delta"], abs=TOL)
    assert gap["delta"].iat[0] > 0  # the simulated in-group boost


def test_interval_replaying_our_permutations_is_exact(case) -> None:
    """get_interval with its random.shuffle replaying our row and column orders: the same
    permuted matrices, so the same percentiles up to rounding."""
    gap = case["ours"]["gap_replay"]
    low, high = case["nb"]["interval_replay"]
    assert gap["ci_low"].iat[0] == pytest.approx(low, abs=TOL)
    assert gap["ci_high"].iat[0] == pytest.approx(high, abs=TOL)


def test_interval_within_monte_carlo_error(case) -> None:
    """get_interval with its own random.shuffle (2,000 permutations) against ours (10,000).

    Both estimate the 2.5th and 97.5th percentiles of one null distribution. An empirical q-quantile
    of N draws sits at a rank whose share of the distribution has standard error sqrt(q(1 - q) / N);
    two independent estimates differ in rank share by sd = sqrt(q(1 - q) (1/N1 + 1/N2)). So the
    notebook's bound must lie between our null's quantiles at q ± 5 sd (a chance failure under
    1e-6; both generators are seeded, so the test is deterministic anyway). A wrong null (e.g.
    one permutation for rows and columns, or rows only) moves the bounds far outside this band.
    """
    actual = case["nb"]["actual"]
    ours = case["ours"]["gap"]
    # the same null as paper_gap's: our specified z-scored M (equal to the notebook's, test_delta)
    from analysis.empathy.tables import SAME, relation_matrix

    ids = case["ids"][~case["ids"]["unspecified"]].reset_index(drop=True)
    null = null_deltas(actual, relation_matrix(ids, case["category"]) == SAME, n_permutations=10_000, seed=0)
    assert ours["ci_low"].iat[0] == pytest.approx(np.percentile(null, 2.5), abs=TOL)
    assert ours["ci_high"].iat[0] == pytest.approx(np.percentile(null, 97.5), abs=TOL)
    for q, theirs in zip((0.025, 0.975), case["nb"]["interval_mc"], strict=True):
        sd = math.sqrt(q * (1 - q) * (1 / NOTEBOOK_PERMUTATIONS + 1 / len(null)))
        lo, hi = np.quantile(null, [max(q - 5 * sd, 0.0), min(q + 5 * sd, 1.0)])
        assert lo <= theirs <= hi, (q, theirs, lo, hi)


def test_keys_and_run_columns_are_kept(case) -> None:
    frame = case["frame"].assign(model_revision="r1", scoring="{}")
    gap = paper_gap(frame, n_permutations=50)
    assert list(gap.columns[:5]) == ["model", "model_revision", "scoring", "category", "setting"]
    matrix = paper_matrix(frame)
    assert list(matrix["matrix"]) == ["full", "specified"]


def test_edge_cases_give_nan_with_a_note() -> None:
    """Where the notebook would divide by zero: a constant matrix, every event refused."""
    ids = category_identities(None, "religion")
    names = ids["identity"].tolist()
    rows = [
        {"model": "m", "category": "religion", "setting": "P0S0T0", "perceiver": p, "experiencer": e}
        | {"text_id": t, "intensity": 5.0, "refused": False}
        for p in names
        for e in names
        for t in range(3)
    ]
    frame = pd.DataFrame(rows)
    gap = paper_gap(frame, n_permutations=20)
    assert math.isnan(gap["delta"].iat[0]) and "constant" in gap["note"].iat[0]
    refused = frame.assign(intensity=np.nan, refused=True)
    matrix = paper_matrix(refused).set_index("matrix")
    assert matrix.loc["full", "refusal_rate"] == 1.0 and math.isnan(matrix.loc["full", "mean"])
    assert matrix.loc["full", "note"] != ""
    mask = paper_mask(refused)
    assert len(mask) == len(names) ** 2 and mask["m"].isna().all()


def test_the_pipeline_writes_the_paper_tables_and_heatmaps() -> None:
    """`empathy_analysis` adds the paper's tables from the parsed numbers of a generating run,
    `draw` their masked heatmap, and the report says which tables are the paper's."""
    from analysis.empathy.probe import SECTION_NOTES, empathy_analysis
    from analysis.pipeline import Analysis, AnalysisOptions, draw
    from analysis.report import render_html

    ids = category_identities(None, "religion")
    names = ids["identity"].tolist()
    rng = np.random.default_rng(1)
    rows = [
        {"model": "org/m", "model_revision": "r", "scoring": "{}", "task": "number", "id": f"{p}|{e}|{t}"}
        | {"category": "religion", "setting": "P0S0T0", "perceiver": p, "experiencer": e, "text_id": f"e{t}"}
        | {"parsed_value": float(rng.integers(0, 11)) if (p, e, t) != (names[1], names[2], 0) else None}
        | {"refused": False}
        for p in names
        for e in names
        for t in range(12)
    ]
    joined = pd.DataFrame(rows)
    options = AnalysisOptions.from_flags(n_permutations=50)
    tables = empathy_analysis({"religion_P0S0T0": joined}, options)
    frame = pd.DataFrame(rows).rename(columns={"parsed_value": "intensity"}).drop(columns=["task", "id"])
    frame["refused"] = frame["intensity"].isna()
    pd.testing.assert_frame_equal(tables["empathy_paper_gap"], paper_gap(frame, n_permutations=50))
    pd.testing.assert_frame_equal(tables["empathy_paper_matrix"], paper_matrix(frame))
    matrix = tables["empathy_paper_matrix"].set_index("matrix")
    assert matrix.loc["full", "excluded_events"] == 1 and matrix.loc["full", "refusal_rate"] == 1 / 12
    assert "empathy_gap" in tables and "empathy_cells" in tables  # the project's own tables stay
    drawn = draw(tables, options)
    assert "empathy_paper_m_religion_p0s0t0_m" in [name for _, name, _ in drawn]
    provenance = {"prompts": {"path": "prompts", "fingerprint": "ab" * 32}, "results": []}
    html = render_html(Analysis(tables, [], provenance, options, []), {name: "" for _, name, _ in drawn}, "now")
    section = next(s for s in re.split(r"<h2[^>]*>", html) if s.startswith("Empathy"))
    assert str(html_escape(SECTION_NOTES["empathy_paper_"])) in section  # as jinja escapes it
