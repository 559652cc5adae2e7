"""The report's headline numbers and run labels (`analysis.headlines`) and where the report puts them.

Headline values are checked against an independent computation from item-level numbers; the
page is checked for order: each probe section opens with its headline table and run labels,
and the full provenance (model path, revision, scoring JSON) appears only at the end.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from analysis.attribution.probe import headline as attribution_headline
from analysis.empathy.probe import headline as empathy_headline
from analysis.headlines import run_label, run_labels
from analysis.pipeline import Analysis, AnalysisOptions
from analysis.probes import section_headlines
from analysis.report import render_html
from analysis.trust_game.probe import headline as trust_game_headline
from runners.results import ResultKey

RUN_A = ("/home/me/checkpoints/run-7/model-a/", "f00dfeed" * 5, '{"choice_mode":"sentence"}')
RUN_B = ("org/model-b", "main", '{"choice_mode":"letter"}')


def _run(run):
    return dict(zip(("model", "model_revision", "scoring"), run, strict=True))


def test_run_label_is_the_model_name_and_the_key_folder_hash():
    label = run_label(*RUN_A)
    slug = ResultKey(*RUN_A).slug  # the key folder's name: <name>-<digest[:16]>
    assert label == f"model-a·{slug.rsplit('-', 1)[1][:8]}" == ResultKey(*RUN_A).label
    assert run_label(*RUN_B).startswith("model-b·") and run_label(*RUN_B) != run_label("org/model-b", "v2", RUN_B[2])


def attribution_table(rng: np.random.Generator) -> tuple[pd.DataFrame, dict]:
    """Cells of per-item d values (as analysis.attribution.tables reports them) and the item-level means."""
    rows, items = [], {}
    for run in (RUN_A, RUN_B):
        for dimension in ("race", "religion"):
            for identity in ("x", "y", "z"):
                for outcome in ("success", "failure"):
                    d = rng.normal(0.2 if outcome == "success" else -0.1, 0.3, rng.integers(2, 9))
                    items.setdefault((run_label(*run), dimension, outcome), []).extend(d)
                    cell = {**_run(run), "dimension": dimension, "identity": identity, "outcome": outcome}
                    rows.append({**cell, "refused_items": "excluded", "n": len(d), "mean": d.mean()})
                    rows.append({**cell, "refused_items": "included", "n": len(d) + 1, "mean": 99.0})
            cell = {**_run(run), "dimension": dimension, "identity": "w", "outcome": "success"}
            rows.append({**cell, "refused_items": "excluded", "n": 0, "mean": np.nan})  # every item refused
    return pd.DataFrame(rows), items


def test_attribution_headline_is_the_item_mean_of_d(tmp_path):
    table, items = attribution_table(np.random.default_rng(0))
    tables = {"attribution_single_actor": table}
    head = attribution_headline(tables, run_labels(tables))
    assert list(head.columns) == ["run", "dimension", "mean d (failure)", "mean d (success)", "items"]
    for row in head.itertuples(index=False):
        for outcome, value in (("failure", row[2]), ("success", row[3])):
            assert value == pytest.approx(np.mean(items[(row.run, row.dimension, outcome)]), abs=1e-12)
        assert row.items == sum(len(items[(row.run, row.dimension, o)]) for o in ("success", "failure"))


def test_empathy_and_trust_game_headlines():
    gap = pd.DataFrame(
        [
            {**_run(run), "refused_items": variant, "category": "race", "setting": "P0S0T0", "delta": delta,
             "null_low": -0.3, "null_high": 0.3, "p_value": p, "n_permutations": 100}
            for run, delta, p in ((RUN_A, 0.41, 0.002), (RUN_B, -0.05, 0.61))
            for variant in ("excluded", "included")
        ]
    )  # fmt: skip
    head = empathy_headline({"empathy_gap": gap}, run_labels({"empathy_gap": gap}))
    assert list(head.columns) == ["run", "category", "setting", "δ", "p", "null 2.5%", "null 97.5%"]
    assert dict(zip(head["run"], head["δ"], strict=True)) == {run_label(*RUN_A): 0.41, run_label(*RUN_B): -0.05}

    anova = pd.DataFrame(
        [
            {**_run(RUN_A), "refused_items": "excluded", "pair_source": "pairs_paper/Phi-2", "variant": "base",
             "investor_group": group, "effect": effect, "F": f, "p_value": p, "df": 1.0}
            for group in ("White male", "Asian female")
            for effect, f, p in (("trustee_gender", 2.5, 0.11), ("trustee_race", 7.0, 1e-5),
                                 ("trustee_gender:trustee_race", 0.4, 0.8), ("Residual", np.nan, np.nan))
        ]
    )  # fmt: skip
    head = trust_game_headline({"trust_game_anova": anova}, run_labels({"trust_game_anova": anova}))
    effects = ["F gender", "p gender", "F race", "p race", "F gender × race", "p gender × race"]
    assert list(head.columns)[4:] == [*effects, "sampling precision (95% CI)"]
    # a sample takes the Trust Game whole, and its headline says so (docs/DESIGN.md section 9)
    assert (head["sampling precision (95% CI)"] == "all games (a sample takes the Trust Game whole)").all()
    assert len(head) == 2 and (head["F race"] == 7.0).all() and (head["p gender × race"] == 0.8).all()


def test_each_section_opens_with_its_headline_and_provenance_comes_last():
    table, _ = attribution_table(np.random.default_rng(1))
    tables = {
        "refusals": pd.DataFrame([{**_run(RUN_A), "probe": "attribution", "n_items": 10, "refusal_rate": 0.0}]),
        "attribution_single_actor": table,
    }
    provenance = {"prompts": {"path": "prompts", "fingerprint": "ab" * 32}, "results": []}
    analysis = Analysis(tables, [], provenance, AnalysisOptions(), [], ["results scored on other prompts"])
    html = render_html(analysis, {}, "now")
    sections = re.split(r"<h2[^>]*>", html)
    attribution = next(s for s in sections if s.startswith("Attribution"))
    assert attribution.index('class="headline"') < attribution.index("<details")
    assert attribution.index("Runs: ") < attribution.index('class="headline"')
    assert "mean d (success)" in attribution and run_label(*RUN_A) in attribution
    # the probes' headlines first: the tables no probe claims (refusals) follow their sections
    assert html.index('<h2 id="attribution">') < html.index('<h2 id="refusals">') < html.index('id="provenance"')
    assert '<a href="tables/attribution_single_actor.csv">' in attribution
    provenance_at = html.index('id="provenance"')
    for full in (RUN_A[0], RUN_A[1], "choice_mode"):  # path, revision and scoring JSON only in the provenance
        assert html.index(full.replace('"', "&#34;") if '"' in full else full) > provenance_at, full
    assert "results scored on other prompts" in html
    assert set(section_headlines(tables)) == {"Attribution"}
