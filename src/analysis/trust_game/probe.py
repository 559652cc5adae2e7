"""The name-based Trust Game in the report: the ANOVA, post hoc tests, cell means, probing accuracy, figures.

Its `TABLES` are what the probe's analysis (`spec.ANALYSIS`) computes; the contract is `analysis.probe_analysis`.
The metrics are `analysis.trust_game.tables`. Its `race_probe` rows (the curation input) are not read
here: the report gives their refusals only. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from .. import probe_analysis as probe
from ..headlines import RUN_LABEL, Run
from ..precision import PRECISION_HEADINGS
from . import figures as fig
from . import tables as tg

#: the `probe` values of this probe's rows: the games, and the probing questions that check the construct
GAMES, PROBING = "trust_game", "probing"


def trust_game_analysis(
    games: dict[str, pd.DataFrame], probing: dict[str, pd.DataFrame], options: probe.AnalysisOptions
) -> dict[str, pd.DataFrame]:
    """Type III ANOVA, post hoc gender t-tests with Cohen's d, cell means, probing accuracy."""
    out: dict[str, pd.DataFrame] = {}
    if games:
        joined = pd.concat(list(games.values()), ignore_index=True)

        def build(keep: bool) -> dict[str, pd.DataFrame]:
            def prediction(g: pd.DataFrame) -> pd.DataFrame:
                return tg.prediction_frame(g, score=probe.number_score(g, options.score), keep_refused=keep)

            frame = probe.per_run(joined, prediction)
            return {
                "trust_game_anova": tg.anova(frame),
                "trust_game_posthoc": tg.gender_posthoc(frame),
                "trust_game_cell_means": tg.cell_means(frame),
            }

        out.update(probe.variant_tables(build))
    if probing:
        joined = pd.concat(list(probing.values()), ignore_index=True)

        def accuracy(g: pd.DataFrame) -> pd.DataFrame:
            answer: tg.Answer = (
                "argmax_value" if probe.number_score(g, options.score) != "parsed_value" else "parsed_value"
            )
            return tg.probing_accuracy(g, answer=answer)

        out["trust_game_probing_accuracy"] = probe.per_run(joined, accuracy)
    return out


def steps(rows: Mapping[str, dict[str, pd.DataFrame]], options: probe.AnalysisOptions) -> list[probe.AnalysisStep]:
    """One step, from the games and the probing questions, whichever were scored."""
    games, probing = rows.get(GAMES, {}), rows.get(PROBING, {})
    if not games and not probing:
        return []
    return [probe.AnalysisStep("trust_game", games, lambda: trust_game_analysis(games, probing, options))]


def figures(tables: dict[str, pd.DataFrame], options: probe.AnalysisOptions) -> probe.Figures:
    """Interaction plots of the cell means (trustee gender x race) per investor group."""
    if not probe.has_rows(tables, "trust_game_cell_means"):
        return []
    means, _ = probe.figure_variant(
        tables["trust_game_cell_means"], None, "mean", keys=list(tg.UNIT_KEYS), mark="variant"
    )
    return [(f"trust_game_interaction_{n}", f) for n, f in fig.trust_interaction_plots(means)]


#: ANOVA effect -> headline column prefix
EFFECTS = {"trustee_gender": "gender", "trustee_race": "race", "trustee_gender:trustee_race": "gender × race"}


def headline(tables: Mapping[str, pd.DataFrame], labels: Mapping[Run, str]) -> pd.DataFrame | None:
    """F and p of gender, race and their interaction per run and investor group (and variant, pair source), and
    that every game was scored (`TAKEN_WHOLE`)."""
    table = probe.headline_rows(tables, "trust_game_anova", labels)
    if table is None:
        return None
    table = table[table["effect"].isin(list(EFFECTS))]
    if table.empty:
        return None
    keys = [c for c in (RUN_LABEL, "pair_source", "variant", "investor_group") if c in table.columns]
    wide = table.pivot_table(index=keys, columns="effect", values=["F", "p_value"], aggfunc="first", sort=True)
    columns = {}
    for effect, name in EFFECTS.items():
        for stat, label in (("F", "F"), ("p_value", "p")):
            if (stat, effect) in wide.columns:
                columns[f"{label} {name}"] = wide[(stat, effect)]
    out = pd.DataFrame(columns, index=wide.index).reset_index()
    out[PRECISION_HEADINGS["precision"]] = TAKEN_WHOLE
    return out


#: the headline's sampling precision: a sample takes the Trust Game's small sets whole (its spec declares no
#: sample unit; docs/DESIGN.md section 9), so its F and d have no sampling error from a sample
TAKEN_WHOLE = "all games (a sample takes the Trust Game whole)"


#: tables opened by default in the report: the paper's headline results
HEADLINE_TABLES = ("trust_game_anova", "trust_game_posthoc", "trust_game_probing_accuracy")
#: what each table is, shown above it
DESCRIPTIONS = {
    "trust_game_anova": "Two-way ANOVA of the expected investment on trustee gender x race per investor group "
    "(statsmodels OLS + anova_lm, type III sums of squares, sum-to-zero contrasts). The paper keeps every game: "
    "its numbers are the rows with refused_items = included; `excluded` leaves refused games out.",
    "trust_game_posthoc": "Female vs male trustees per race: two-sample t-test (equal variances) and Cohen's d. "
    "The paper's rows: refused_items = included (it keeps every game).",
    "trust_game_probing_accuracy": "Share of probing questions answered correctly (construct validity).",
}

TABLES = probe.ProbeTables(
    steps=steps, figures=figures, headline=headline, descriptions=DESCRIPTIONS, headline_tables=HEADLINE_TABLES
)
