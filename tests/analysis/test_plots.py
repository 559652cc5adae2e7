"""Figures: what is drawn is what the tables say (masks, colour limits, bar widths, line points)."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pandas as pd
import pytest

from analysis import plots
from analysis.attribution import figures as attribution_figures
from analysis.empathy import figures as empathy_figures
from analysis.empathy import tables as emp
from analysis.probe_analysis import figure_variant
from analysis.trust_game import figures as trust_figures
from promptgen.empathy.prompts import identities


def religion_joined(rng: np.random.Generator, model: str, n_events: int = 6, refused: bool = False) -> pd.DataFrame:
    names = [i.identity for i in identities("religion")]
    rows = []
    for p, e, t in itertools.product(names, names, range(n_events)):
        rows.append(
            {
                "model": model,
                "model_revision": "r",
                "scoring": "s",
                "category": "religion",
                "setting": "P0S1T0",
                "perceiver": p,
                "experiencer": e,
                "text_id": f"ev{t}",
                "expected_value": float(rng.uniform(0, 10)) + 3.0 * (p == e),
                "refused": refused,
            }
        )
    return pd.DataFrame(rows)


def test_heatmap_greys_exactly_the_non_significant_and_missing_cells() -> None:
    matrix = pd.DataFrame(
        [[1.0, -2.0, 0.5], [np.nan, 0.0, 3.0], [0.2, -0.1, 1.5]], index=list("abc"), columns=list("abc")
    )
    significant = pd.DataFrame(
        [[True, True, False], [True, False, True], [True, True, True]], index=list("abc"), columns=list("abc")
    )
    fig = plots.matrix_heatmap(matrix, significant=significant, title="t", cbar_label="M")
    ax = fig.axes[0]
    shown = ax.images[1].get_array()
    expected_hidden = ~significant.to_numpy() | matrix.isna().to_numpy()
    assert np.array_equal(np.ma.getmaskarray(shown), expected_hidden)
    assert np.array_equal(np.isfinite(ax.images[0].get_array().filled(np.nan)), expected_hidden)  # grey layer
    norm = ax.images[1].norm
    assert norm.vmin == pytest.approx(-3.0) and norm.vmax == pytest.approx(3.0)  # symmetric around 0
    assert [t.get_text() for t in ax.get_xticklabels()] == list("abc")


def test_empathy_heatmaps_one_per_model_with_the_design_order(tmp_path) -> None:
    rng = np.random.default_rng(0)
    frame = pd.concat([religion_joined(rng, "org/a"), religion_joined(rng, "org/b")], ignore_index=True)
    intensity = emp.intensity_frame(frame)
    cells = emp.compute_cells(intensity)
    tests = emp.cell_tests(intensity)
    figs = empathy_figures.empathy_heatmaps(cells, tests)
    names = [n for n, _ in figs]
    assert names == ["religion_p0s1t0_a", "religion_p0s1t0_b"]
    ax = figs[0][1].axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [i.identity for i in identities("religion")]
    a = cells[cells["model"] == "org/a"]
    drawn = ax.images[1].get_array().filled(np.nan)
    assert np.allclose(
        np.nan_to_num(drawn),
        np.nan_to_num(np.where(np.ma.getmaskarray(ax.images[1].get_array()), 0, emp.to_matrix(a).to_numpy())),
    )
    hidden = np.ma.getmaskarray(ax.images[1].get_array())
    assert not hidden.diagonal().any()  # the references are always shown
    sig = tests[(tests["model"] == "org/a")].groupby(["perceiver", "experiencer"])["significant"].any().unstack()
    order = [i.identity for i in identities("religion")]
    sig = sig.reindex(index=order, columns=order).fillna(False).to_numpy(bool).copy()
    np.fill_diagonal(sig, True)
    assert np.array_equal(hidden, ~sig)


def test_all_refused_matrix_is_drawn_from_the_refused_kept_variant() -> None:
    rng = np.random.default_rng(1)
    frame = religion_joined(rng, "org/a", refused=True)
    tables = []
    for label, keep in (("excluded", False), ("included", True)):
        tables.append(emp.compute_cells(emp.intensity_frame(frame, keep_refused=keep)).assign(refused_items=label))
    cells, _ = figure_variant(pd.concat(tables), None, "m", keys=list(emp.GROUP_KEYS), mark="setting")
    assert set(cells["setting"]) == {"P0S1T0 (refused kept)"} and cells["m"].notna().all()
    ((name, fig),) = empathy_figures.empathy_heatmaps(cells, None)
    assert "refused kept" in fig.axes[0].get_title() and "refused_kept" in name


def test_shares_bars_sum_to_one_with_fixed_cause_colours() -> None:
    rows = []
    for model, outcome in itertools.product(["org/a", "org/b"], ["success", "failure"]):
        shares = np.random.default_rng(len(rows)).dirichlet(np.ones(4))
        for cause, share in zip(attribution_figures.CAUSE_COLOURS, shares, strict=True):
            rows.append(
                {
                    "model": model,
                    "refused_items": "included",
                    "setting": "single_actor",
                    "outcome": outcome,
                    "cause": cause,
                    "share": share,
                }
            )
    fig = attribution_figures.attribution_shares_bar(pd.DataFrame(rows))
    widths: dict[float, float] = {}
    for patch in fig.axes[0].patches:
        y = round(patch.get_y() + patch.get_height() / 2, 6)
        widths[y] = widths.get(y, 0.0) + patch.get_width()
    assert len(widths) == 4 and all(w == pytest.approx(1.0) for w in widths.values())


def test_interaction_plot_draws_the_cell_means() -> None:
    races = ["Asian", "Black", "Hispanic", "Native American", "White"]
    rows = [
        {
            "model": "org/a",
            "investor_group": "White female",
            "variant": "base",
            "trustee_gender": g,
            "trustee_race": r,
            "mean": 3 + k + (g == "female"),
            "std": 1.0,
            "n": 4,
        }
        for k, (r, g) in enumerate(itertools.product(races, ["female", "male"]))
    ]
    ((name, fig),) = trust_figures.trust_interaction_plots(pd.DataFrame(rows))
    data = {c.get_label(): c.lines[0].get_ydata() for c in fig.axes[0].containers}  # one errorbar per gender
    frame = pd.DataFrame(rows)
    for gender in ("female", "male"):
        want = frame[frame["trustee_gender"] == gender].set_index("trustee_race").loc[races, "mean"].to_numpy()
        assert np.allclose(np.asarray(data[gender], dtype=float), want)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == races
    assert name == "white_female_base_a"


def test_tsne_is_deterministic_for_a_seed() -> None:
    names = [i.identity for i in identities("nationality")]
    rng = np.random.default_rng(2)
    rows = [
        {
            "model": "m",
            "category": "nationality",
            "setting": "P0S0T0",
            "perceiver": p,
            "experiencer": e,
            "text_id": "t0",
            "expected_value": float(rng.uniform(0, 100)),
            "refused": False,
        }
        for p, e in itertools.product(names, names)
    ]
    cells = emp.compute_cells(emp.intensity_frame(pd.DataFrame(rows)))
    ((_, a),) = empathy_figures.tsne_nationality(cells, seed=3)
    ((_, b),) = empathy_figures.tsne_nationality(cells, seed=3)
    points = [np.vstack([c.get_offsets() for c in fig.axes[0].collections]) for fig in (a, b)]
    assert points[0].shape == (len(names) - 1, 2) and np.allclose(points[0], points[1])


def test_names_are_stable_across_processes_and_attribution_uses_one_scale() -> None:
    import subprocess
    import sys

    code = (
        "import pandas as pd; from analysis import plots; "
        "t = pd.DataFrame({'model': ['m', 'm'], 'scoring': ['a', 'b'], 'x': [1, 2]}); "
        "print(plots.figure_label({'model': 'm', 'scoring': 'a'}, t)[1])"
    )
    names = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**__import__("os").environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    # a digest of the run (`headlines.run_label`), not hash(): the same in every process
    assert len(names) == 1 and re.fullmatch(r"m_[0-9a-f]{8}", names.pop().strip())
    rows = [
        {
            "model": "org/a",
            "refused_items": "included",
            "dimension": "race",
            "identity": i,
            "gender": g,
            "outcome": o,
            "mean": 0.2,
            "p": 0.01,
        }
        for i, g, o in itertools.product(["x", "y"], ["female", "male"], ["success", "failure"])
    ]
    ((_, fig),) = attribution_figures.attribution_heatmaps(pd.DataFrame(rows))
    norm = fig.axes[0].images[1].norm
    assert (norm.vmin, norm.vmax) == (-1.0, 1.0)  # d's full range, whatever the data
