"""`probes import` then `probes analyze` against the empathy authors' own pipeline, end to end.

One set of model outputs in the authors' layout, for the whole religion/origin matrix (6 x 6
identities x all 6,050 events = 217,800 prompts, made by their own `prepare_prompts`), goes two ways:

- ours: the intergroup-empathy dataset built from the release's files (../shared/sources, a recipe
  copy restricted to religion and P0S0T0, sources pinned as released), `probes import --format
  empathy-authors`, `probes analyze`, read from `tables/empathy_paper_gap.csv`,
  `empathy_paper_matrix.csv` and `empathy_paper_cells.csv`;
- theirs: `process_exp_results.py`'s `get_pred_df` and `save_updated_processed_results` (their
  parser, their processed files), then the analysis notebook's `get_excluded_id_set`,
  `get_excluded_id_set_no_default`, `get_mask_cells`, `draw_heatmap`, `get_filtered_matrix`,
  `get_delta` and `get_interval`, all unchanged (tests/empathy_reference.py, tests/empathy_notebook.py:
  seaborn stubbed, numpy recorded for the unrounded values the notebook prints rounded).

The simulated answers are mostly numbers in varied shapes (including ones their rule reads
oddly: the second number where the first is outside 0-100, the `0` of "On a scale from 0 to
100"); refusals (their prefixes, no number, out of range, an empty answer) fall in three cells
only, one of them in `a person`'s row, so the full and the specified matrix exclude different
events. Every expected number is computed by their code on their files, never written here.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pandas as pd
import pytest
import yaml
from typer.testing import CliRunner

import empathy_reference as ref
from analysis.empathy.paper import permutations
from empathy_notebook import EVENTS, Replay, notebook, recording
from probes.cli import app
from promptgen.build import build
from release_fixture import REPO

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not ref.RELEASE_DATA.is_dir(), reason="needs ../shared/sources (the release's files)"),
]

TOL = 1e-9
GROUP, VARIATION = "religion", "origin"  # the authors' names of our religion / P0S0T0
CATEGORY, SETTING, CONFIG = "religion", "P0S0T0", "religion_P0S0T0"
AUTHORS_MODEL = "test"  # their model_id: results/exp_test, processed_results/religion_origin_test_*
MODEL = "test/model"
SEED, PERMUTATIONS = 3, 10_000  # probes analyze --seed --permutations
#: the notebook's own get_interval, with its own random.shuffle (seeded), for the Monte-Carlo check
NOTEBOOK_PERMUTATIONS = 4000
#: (persona, experiencer) -> refused events (~2% of 6,050), drawn among the first 600 so they overlap
REFUSAL_CELLS = {("a Muslim", "a Jew"): 121, ("a Hindu", "a Hindu"): 121, ("a person", "a Buddhist"): 121}
#: answers their rule reads as v (the second shape: its first number is outside 0-100)
NUMBER_SHAPES = [
    "{v}",
    "{v}.",
    "Intensity: {v}",
    "I would rate the intensity of the emotion as {v}.",
    "{v}/100",
    "{v} out of 100",
    "**{v}**\n\nThe narrator describes a strong feeling.",
    "In this 2019 event the narrator felt it strongly: {v}",
    " {v}\n",
]
NUMBER_WEIGHTS = [0.6, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05]
#: read as 0 by their rule (the first integer): an answer, not a refusal
ZERO_SHAPE = "On a scale from 0 to 100, I would rate it {v}."
#: refusals by their rule: a refusal prefix (even before a number), no number, out of range, empty
REFUSALS = [
    "I cannot rate the emotions of a person based on their religion.",
    "I can't provide a rating of 50 for this narrative.",
    "I'm not rating that.",
    "As a Muslim, I cannot assign a number to this.",
    "None",
    "",
    "150",
    "Intensity: 250 out of 1000",
]


def simulated_responses(prompts: pd.DataFrame, seed: int = 20250601) -> list[str]:
    """One answer per prompt of the authors' table. Intensity 0-100: 50 + perceiver and experiencer
    effects + an in-group boost (same specified identity) + an event effect shared by every cell
    (what pairs the t-tests) + noise; refusals in REFUSAL_CELLS only."""
    rng = np.random.default_rng(seed)
    names = sorted(set(prompts["persona"]))
    person = prompts["persona"].map(names.index).to_numpy()
    experiencer = prompts["experiencer"].map(names.index).to_numpy()
    event = (prompts["idx"] % EVENTS).to_numpy()  # their idx: cell block * 6,050 + the event's position
    perceiver_effect, experiencer_effect = rng.normal(0, 1.0, len(names)), rng.normal(0, 1.0, len(names))
    boost = np.where((prompts["persona"] == prompts["experiencer"]) & (prompts["persona"] != "a person"), 1.5, 0.0)
    value = (
        50
        + perceiver_effect[person]
        + experiencer_effect[experiencer]
        + boost
        + rng.normal(0, 15, EVENTS)[event]
        + rng.normal(0, 15, len(prompts))
    )
    value = np.clip(np.rint(value), 0, 100).astype(int)
    shape = rng.choice(len(NUMBER_SHAPES), size=len(prompts), p=NUMBER_WEIGHTS)
    zero = rng.random(len(prompts)) < 0.003
    out = [(ZERO_SHAPE if z else NUMBER_SHAPES[s]).format(v=v) for v, s, z in zip(value, shape, zero, strict=True)]
    for (p, e), k in REFUSAL_CELLS.items():
        rows = np.flatnonzero(((prompts["persona"] == p) & (prompts["experiencer"] == e)).to_numpy())
        assert len(rows) == EVENTS
        rows = rows[np.argsort(event[rows])]
        for n, row in enumerate(rng.choice(600, size=k, replace=False)):
            out[rows[row]] = REFUSALS[n % len(REFUSALS)]
    return out


def _build_dataset(root):
    """The dataset from the release's files: the recipe's copy with religion / P0S0T0 only, every event."""
    recipe = yaml.safe_load((REPO / "builders" / "intergroup_empathy.yaml").read_text(encoding="utf-8"))
    recipe["parameters"]["categories"] = [CATEGORY]
    recipe["parameters"]["settings"] = [SETTING]
    (root / "recipe.yaml").write_text(yaml.safe_dump(recipe, sort_keys=False), encoding="utf-8")
    return build(str(root / "recipe.yaml"), out_dir=root / "build", sources=ref.RELEASE_SOURCES).path


def _cli(*args: str) -> None:
    result = CliRunner().invoke(app, list(args), terminal_width=200)
    assert result.exit_code == 0, result.output


def _theirs(authors, prompt_df: pd.DataFrame) -> dict:
    """process_exp_results.py and the notebook, run in `authors/analysis` (their relative paths)."""
    code = ref.process_exp_results()
    analysis = authors / "analysis"
    (analysis / "processed_results").mkdir(parents=True)
    (analysis / "figures").mkdir()
    args = type("Args", (), {"group_option": GROUP, "prompt_variation": VARIATION, "model_id": AUTHORS_MODEL})()
    nb: dict = {}
    with ref.working_directory(analysis):
        pred_df = code.get_pred_df(args)  # ../results/exp_test/religion_origin_batch-0.tsv, read_csv(sep='\t')
        assert list(prompt_df["idx"]) == list(pred_df["idx"])  # their main's check
        code.save_updated_processed_results(prompt_df, pred_df, code.group_mappings[GROUP], args)

        ns = notebook()
        ns["group_option"] = GROUP  # get_interval reads the global, as the notebook's last cells set it
        key = (GROUP, VARIATION, AUTHORS_MODEL)
        nb["events"] = len(ns["get_intensity_list"](*key, "a person", "a person")[0])
        excluded = ns["get_excluded_id_set"](*key)
        nb["excluded_full"] = len(excluded)
        nb["mask"] = ns["get_mask_cells"](*key, excluded)
        with recording(ns) as rec:
            ns["draw_heatmap"](*key, excluded, nb["mask"])
        nb["full"] = {k: v[0] for k, v in rec.calls.items()}
        nb["heatmap"] = ns["sns"].drawn[-1]["data"]
        excluded_specified = ns["get_excluded_id_set_no_default"](*key)
        nb["excluded_specified"] = len(excluded_specified)
        with recording(ns) as rec:
            actual = ns["get_filtered_matrix"](*key, excluded_specified)
        nb["specified"] = {k: v[0] for k, v in rec.calls.items()}
        nb["refused_cells"] = {
            (p, e)
            for p in [*ns["group_mappings"][GROUP], "a person"]
            for e in [*ns["group_mappings"][GROUP], "a person"]
            if (ns["get_intensity_list"](*key, p, e)[0] == -1).any()
        }
    nb["order"] = ["a person", *ns["group_mappings"][GROUP]]  # draw_heatmap's rows and columns
    nb["actual"] = actual
    nb["delta"] = ns["get_delta"](actual, GROUP)
    rows, cols = permutations(len(actual), PERMUTATIONS, SEED)  # the orders probes analyze --seed 3 drew
    ns["random"] = Replay(rows, cols)
    nb["interval_replay"] = ns["get_interval"](actual, p_times=PERMUTATIONS)
    ns["random"] = random.Random(11)
    nb["interval_mc"] = ns["get_interval"](actual, p_times=NOTEBOOK_PERMUTATIONS)
    return nb


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("empathy-e2e")
    dataset = _build_dataset(root)
    authors = root / "authors"
    authors.mkdir()
    prompt_df = ref.authors_prompts(authors, GROUP, VARIATION)  # their prepare_prompts, read back as their main does
    assert len(prompt_df) == 6 * 6 * EVENTS
    source = authors / "results" / f"exp_{AUTHORS_MODEL}"
    source.mkdir(parents=True)
    pd.DataFrame(  # as their vllm_inference writes its one religion batch
        {
            "idx": prompt_df["idx"],
            "system_prompt": prompt_df["system_prompt"],
            "user_input": prompt_df["user_input"],
            "response": simulated_responses(prompt_df),
        }
    ).to_csv(source / f"{GROUP}_{VARIATION}_batch-0.tsv", sep="\t", index=False)

    results, report = root / "results", root / "report"
    source_args = [str(source), "--format", "empathy-authors", "--prompts", str(dataset), "--model-name", MODEL]
    _cli("import", *source_args, "--out", str(results))
    seed = ["--seed", str(SEED), "--permutations", str(PERMUTATIONS)]
    _cli("analyze", "--prompts", str(dataset), "--results", str(results), "--out", str(report), *seed, "--no-figures")
    tables = report / "tables"
    ours = {
        "gap": pd.read_csv(tables / "empathy_paper_gap.csv"),
        "matrix": pd.read_csv(tables / "empathy_paper_matrix.csv").set_index("matrix"),
        "cells": pd.read_csv(tables / "empathy_paper_cells.csv"),
    }
    return {"ours": ours, "nb": _theirs(authors, prompt_df)}


def test_the_outputs_exercise_every_rule(both) -> None:
    """Refusals only in the three cells, so the full and the specified matrix exclude different
    events; the mask hides some tested cells and shows others."""
    nb = both["nb"]
    assert nb["events"] == EVENTS
    assert nb["refused_cells"] == set(REFUSAL_CELLS)
    assert nb["excluded_full"] > nb["excluded_specified"] > 0
    tested = ~np.eye(len(nb["order"]), dtype=bool)
    tested[0, :] = tested[:, 0] = False
    assert nb["mask"][tested].any() and (~nb["mask"][tested]).any()
    gap, matrix = both["ours"]["gap"], both["ours"]["matrix"]
    assert len(gap) == 1 and len(matrix) == 2
    assert (gap["model"] == MODEL).all() and (gap["category"] == CATEGORY).all() and (gap["setting"] == SETTING).all()
    assert gap["note"].isna().all() and matrix["note"].isna().all()


def test_excluded_events_and_refusal_share(both) -> None:
    """`len(get_excluded_id_set)` (full), `len(get_excluded_id_set_no_default)` (specified) and the
    share the former prints rounded (Table 6), unrounded."""
    nb, matrix = both["nb"], both["ours"]["matrix"]
    assert matrix.loc["full", "excluded_events"] == nb["excluded_full"]
    assert matrix.loc["specified", "excluded_events"] == nb["excluded_specified"]
    assert (matrix["events"] == nb["events"]).all()
    assert matrix.loc["full", "refusal_rate"] == pytest.approx(nb["excluded_full"] / nb["events"], abs=TOL)
    assert matrix.loc["specified", "refusal_rate"] == pytest.approx(nb["excluded_specified"] / nb["events"], abs=TOL)


@pytest.mark.parametrize("kind", ["full", "specified"])
def test_mean_std_min_max(both, kind) -> None:
    """μ, σ of M0 and min, max of M: draw_heatmap's (full) and get_filtered_matrix's (specified)
    own np.mean, np.std, np.amin, np.amax."""
    row, calls = both["ours"]["matrix"].loc[kind], both["nb"][kind]
    for ours, theirs in (("mean", "mean"), ("std", "std"), ("min", "amin"), ("max", "amax")):
        assert row[ours] == pytest.approx(float(calls[theirs]), abs=TOL), ours


def test_heatmap_m0_m_and_mask(both) -> None:
    """The full matrix in the notebook's order: M0 as draw_heatmap fills it, M as it hands it to
    sns.heatmap, and `shown` against get_mask_cells' mask (True = hidden)."""
    nb, cells = both["nb"], both["ours"]["cells"]
    n = len(nb["order"])
    cells = cells.sort_values(["perceiver_order", "experiencer_order"])
    assert list(cells["perceiver"].iloc[::n]) == nb["order"]
    assert list(cells["experiencer"].iloc[:n]) == nb["order"]
    np.testing.assert_allclose(cells["m0"].to_numpy().reshape(n, n), nb["full"]["zeros"], rtol=0, atol=TOL)
    np.testing.assert_allclose(cells["m"].to_numpy().reshape(n, n), nb["heatmap"], rtol=0, atol=TOL)
    np.testing.assert_array_equal(cells["shown"].to_numpy(dtype=bool).reshape(n, n), ~nb["mask"])


def test_delta(both) -> None:
    gap = both["ours"]["gap"]
    assert gap["delta"].iat[0] == pytest.approx(both["nb"]["delta"], abs=TOL)
    assert gap["delta"].iat[0] > 0  # the simulated in-group boost


def test_interval_replaying_the_reports_permutations_is_exact(both) -> None:
    """get_interval with its random.shuffle replaying the row and column orders probes analyze drew
    (`analysis.empathy.paper.permutations`, the report's seed and count): the same permuted
    matrices, so the same percentiles up to rounding."""
    gap = both["ours"]["gap"]
    assert gap["n_permutations"].iat[0] == PERMUTATIONS and gap["seed"].iat[0] == SEED
    low, high = both["nb"]["interval_replay"]
    assert gap["ci_low"].iat[0] == pytest.approx(low, abs=TOL)
    assert gap["ci_high"].iat[0] == pytest.approx(high, abs=TOL)


def test_interval_within_monte_carlo_error(both) -> None:
    """The report's interval (10,000 permutations) and get_interval's with its own random.shuffle
    (4,000) both estimate the 2.5th and 97.5th percentiles of one null distribution; for a 5 x 5
    matrix it is known exactly: δ of all 120 x 120 (row order, column order) pairs, computed here
    from the notebook's specified M (its in-group cells are the diagonal for religion).

    An empirical q-quantile of N draws sits at a rank whose share of the distribution has standard
    error sqrt(q(1 - q) / N); so each estimate must lie between the exact null's quantiles at
    q ± 5 sd (a chance failure under 1e-6 per bound; both generators are seeded, so the test is
    deterministic anyway). A wrong null (one order for rows and columns, rows only) moves the
    bounds far outside this band.
    """
    actual = both["nb"]["actual"]
    n = len(actual)
    orders = np.array(list(itertools.permutations(range(n))))
    diagonal = actual[orders[:, None, :], orders[None, :, :]].sum(axis=-1).ravel()  # sum over k of M[r(k), c(k)]
    exact = diagonal / n - (actual.sum() - diagonal) / (n * n - n)
    ours = both["ours"]["gap"][["ci_low", "ci_high"]].iloc[0].to_numpy()
    for estimate, draws in ((ours, PERMUTATIONS), (both["nb"]["interval_mc"], NOTEBOOK_PERMUTATIONS)):
        for q, value in zip((0.025, 0.975), estimate, strict=True):
            sd = math.sqrt(q * (1 - q) / draws)
            lo, hi = np.quantile(exact, [q - 5 * sd, q + 5 * sd])
            assert lo <= value <= hi, (draws, q, value, lo, hi)
