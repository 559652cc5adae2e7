"""Talent or Luck? in the report: the designed configs' tables, the release's own metrics, figures, headline.

Its `TABLES` are what the probe's analysis (`spec.ANALYSIS`) computes; the contract is `analysis.probe_analysis`.
The metrics themselves are `analysis.attribution.tables` and `analysis.attribution.observer` (the
design's d, Δd, SMD, shares; every table of the designed configs: `attribution_tables`),
`analysis.attribution.release` and `analysis.attribution.release_deltas` (the release's code on its
exact `*_release` items). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd
from markupsafe import Markup

from promptgen.core.errors import ProbeError

from ..headlines import RUN_LABEL, Run
from ..precision import PRECISION_HEADINGS, run_samples
from ..probe_analysis import AnalysisOptions, AnalysisStep, Figures, ProbeTables, has_rows, headline_rows
from . import figures as fig
from . import release as attr_release
from . import release_deltas as attr_release_deltas
from .observer import actor_observer_table
from .options import AttributionOptions
from .precision import delta_with_precision, with_precision
from .tables import (
    DELTA_GROUPS,
    DOMAIN_GROUPS,
    SINGLE_GROUPS,
    actor_actor_delta_frames,
    actor_actor_pair_table,
    attribution_shares,
    compute_items,
    delta_table,
    single_actor_table,
)

#: the `probe` value of this probe's rows
ROWS = "attribution"
#: the headline's groups: mean d per dimension and outcome, over identities and genders
HEADLINE_GROUPS = ("dimension", "outcome")


def designed_configs(by_config: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The attribution configs of the design: every one but the `*_release` ones (their columns differ)."""
    return {c: f for c, f in by_config.items() if not attr_release.is_release_config(c)}


def attribution_tables(
    single: pd.DataFrame, pairs: pd.DataFrame | None = None, observer: pd.DataFrame | None = None, *, seed: int = 0
) -> dict[str, pd.DataFrame]:
    """Every attribution table from the joined configs (`analysis.load.join` output); missing configs are skipped.

    The single-actor means carry their sampling precision over templates (`analysis.attribution.precision`,
    bootstrap seeded with `seed`).
    """
    s = compute_items(single)
    samples = run_samples(single)
    out = {
        "single_actor": with_precision(single_actor_table(s), s, samples, SINGLE_GROUPS, seed),
        "single_actor_by_dimension": with_precision(
            single_actor_table(s, HEADLINE_GROUPS), s, samples, HEADLINE_GROUPS, seed
        ),
        "single_actor_by_domain": single_actor_table(s, DOMAIN_GROUPS),
        "shares_single_actor": attribution_shares(s),
    }
    if pairs is not None:
        p = compute_items(pairs)
        frames = actor_actor_delta_frames(s, p)
        delta = delta_with_precision(delta_table(frames), frames, run_samples(pairs), DELTA_GROUPS, seed)
        out["actor_actor_delta"] = delta
        out["actor_actor_pair"] = actor_actor_pair_table(p)
        out["shares_actor_actor"] = attribution_shares(p)
    if observer is not None:
        o = compute_items(observer)
        out["actor_observer"] = actor_observer_table(s, o)
        out["shares_actor_observer"] = attribution_shares(o, ("setting", "condition", "outcome"))
    return out


def attribution_analysis(by_config: dict[str, pd.DataFrame], seed: int = 0) -> dict[str, pd.DataFrame]:
    """Single-actor d, Δd, Δd_pair, Δd1/Δd2 with SMD, shares (`analysis.attribution.tables`) of the designed configs."""
    by_config = designed_configs(by_config)
    single = by_config.get("single_actor")
    if single is None:
        raise ProbeError("attribution: the single-actor results are needed (every comparison is against them)")
    tables = attribution_tables(single, by_config.get("actor_actor"), by_config.get("actor_observer"), seed=seed)
    return {f"attribution_{name}": table for name, table in tables.items()}


def attribution_release_analysis(
    by_config: dict[str, pd.DataFrame], options: AnalysisOptions
) -> dict[str, pd.DataFrame]:
    """The release's own metrics of the `*_release` configs, and the paper's Δd / SMD on them
    (`analysis.attribution.release`, `analysis.attribution.release_deltas`)."""
    release = {c: f for c, f in by_config.items() if attr_release.is_release_config(c)}
    rows = attr_release.rows_by_config(release, rounding=options.probe(AttributionOptions).release_rounding)
    tables = {**attr_release.tables_of_rows(rows), **attr_release_deltas.paper_tables(rows)}
    return {f"attribution_{name}": table for name, table in tables.items()}


def steps(rows: Mapping[str, dict[str, pd.DataFrame]], options: AnalysisOptions) -> list[AnalysisStep]:
    """The design's tables when a designed config was scored, the release's when a `*_release` one was."""
    by_config = rows.get(ROWS, {})
    out = []
    if designed_configs(by_config):
        out.append(AnalysisStep("attribution", by_config, lambda: attribution_analysis(by_config, options.seed)))
    if any(map(attr_release.is_release_config, by_config)):
        out.append(
            AnalysisStep("attribution_release", by_config, lambda: attribution_release_analysis(by_config, options))
        )
    return out


def figures(tables: dict[str, pd.DataFrame], options: AnalysisOptions) -> Figures:
    """d heatmaps per dimension, the per-domain heatmap, and the shares of each cause."""
    out: Figures = []
    if has_rows(tables, "attribution_single_actor"):
        out += [(f"attribution_d_{n}", f) for n, f in fig.attribution_heatmaps(tables["attribution_single_actor"])]
    if has_rows(tables, "attribution_single_actor_by_domain"):
        domain = fig.attribution_domain_heatmap(tables["attribution_single_actor_by_domain"])
        out += [(f"attribution_domain_{n}", f) for n, f in domain]
    shares = [t for name, t in tables.items() if name.startswith("attribution_shares_") and not t.empty]
    if shares:
        out.append(("attribution_shares", fig.attribution_shares_bar(pd.concat(shares, ignore_index=True))))
    return out


def headline(tables: Mapping[str, pd.DataFrame], labels: Mapping[Run, str]) -> pd.DataFrame | None:
    """Mean d per run, dimension and outcome over single-actor items (a weighted mean of the cells)."""
    table = headline_rows(tables, "attribution_single_actor", labels)
    if table is None:
        return None
    table = table[table["n"].fillna(0) > 0]
    if table.empty:
        return None
    weighted = table.assign(sum_d=table["mean"] * table["n"])
    cells = weighted.groupby([RUN_LABEL, "dimension", "outcome"], sort=True)[["sum_d", "n"]].sum()
    cells["mean d"] = cells["sum_d"] / cells["n"]
    wide = cells["mean d"].unstack("outcome")
    wide.columns = [f"mean d ({outcome})" for outcome in wide.columns]
    wide["items"] = cells["n"].groupby(level=[0, 1]).sum().astype(int)
    wide = wide.reset_index()
    precise = headline_rows(tables, "attribution_single_actor_by_dimension", labels)
    if precise is not None and "precision" in precise.columns:
        text = precise.pivot_table(
            index=[RUN_LABEL, "dimension"], columns="outcome", values="precision", aggfunc="first"
        )
        text.columns = [f"{PRECISION_HEADINGS['precision']} ({outcome})" for outcome in text.columns]
        wide = wide.merge(text.reset_index(), on=[RUN_LABEL, "dimension"], how="left")
    return wide


#: tables opened by default in the report: the paper's headline results
HEADLINE_TABLES = (
    "attribution_single_actor",
    "attribution_actor_actor_delta",
    "attribution_actor_observer",
    "attribution_release_single_actor",
)
#: what each table is, shown above it
DESCRIPTIONS = {
    "attribution_single_actor": "Mean d = (p_effort + p_ability) - (p_difficulty + p_luck) per dimension x identity x "
    "gender x outcome, one-sample t-test against 0 (t, df, p, 95% CI); beside it the mean's sampling precision: a 95% "
    "BCa bootstrap interval over the scored templates (ci_low, ci_high are the t-test's; the bootstrap's are "
    "sample_ci_low, sample_ci_high; 2,000 resamples, finite-population corrected), its standard error, the minimum "
    "detectable effect (2.8 SE) and the sample (templates scored of the config's; none for a full run).",
    "attribution_single_actor_by_dimension": "Mean d per dimension and outcome (over identities and genders), "
    "one-sample t-test against 0, and its sampling precision over the scored templates (as in "
    "attribution_single_actor).",
    "attribution_single_actor_by_domain": "Mean d per domain and outcome, one-sample t-test against 0.",
    "attribution_actor_actor_delta": "Δd = d(single actor) - d(same actor beside another person), matched by identity, "
    "scenario and outcome, one-sample t-test against 0; beside it Δd's sampling precision over the paired items' "
    "templates (as in attribution_single_actor; the matched single-actor d held fixed).",
    "attribution_actor_actor_pair": "Δd_pair = d(X) - d(Y) within actor-actor scenarios.",
    "attribution_actor_observer": "Δd1 (observer without identity) and Δd2 (with identity) against single-actor d: "
    "standardised mean difference with pooled SD, two-sided equal-variance t-test.",
    "attribution_release_single_actor": "Release metric opt1 + opt2 - opt3 - opt4 (effort + ability - difficulty - "
    "luck, by the release's option keys) per outcome x identity (as the release labels it) x gender, one-sample "
    "t-test against 0, on the single_actor_release items; every row counts.",
    "attribution_release_single_actor_by_domain": "The same per domain.",
    "attribution_release_single_actor_delta": "Δ = metric(success) - metric(failure), the k-th success row of an "
    "identity and gender paired with its k-th failure row in the release's order; one-sample t-test of Δ.",
    "attribution_release_actor_actor": "Per person renormalised probabilities, mean Δ = metric_X - metric_Y per "
    "outcome configuration x gender pair on the X x Y identity grid (same-identity pairs left out); Wilcoxon "
    "signed-rank test of metric_X vs metric_Y for cells of at least 5 rows.",
    "attribution_release_actor_observer": "Mean metric per outcome x observer cause x gender x domain on the actor x "
    "observer identity grid (gender/domain `all`: pooled); one-sample Wilcoxon (zsplit) for cells of at least 5 rows.",
    "attribution_release_actor_actor_delta": "The paper's Δd on the release's items: d(single_actor_release, same "
    "dimension, identity, gender, outcome, domain, scenario) - d(the person in an actor_actor_release row, per "
    "person renormalised), one-sample t-test against 0.",
    "attribution_release_actor_observer_smd": "The paper's Δd2 on the release's items: matched single_actor_release "
    "d against actor_observer_release d (named observer), standardised mean difference with pooled SD and the "
    "equal-variance t-test. Δd1 (anonymous observer) exists only for the designed actor_observer config.",
}
#: tables that follow the release's own analysis code (chahatraj/TalentorLuck at 57d6938), not the design
RELEASE_CODE = {
    "attribution_release_single_actor": "src/viz/sinact_barplot_aggregate.py",
    "attribution_release_single_actor_by_domain": "src/viz/sinact_barplot.py",
    "attribution_release_single_actor_delta": "src/viz/sinact_delta_aggregate.py",
    "attribution_release_actor_actor": "src/viz/actact_heatmap.py",
    "attribution_release_actor_observer": "src/viz/obseerver_influence.py, src/viz/actor_observer.py",
}


def table_note(name: str, options: AnalysisOptions) -> Markup | None:
    """For a table that follows the release's code: which file, and how its probabilities are rounded."""
    code = RELEASE_CODE.get(name)
    if code is None:
        return None
    rounding = (
        Markup("rounded to 2 decimals as the release's scorers wrote them")
        if options.probe(AttributionOptions).release_rounding
        else Markup(
            "at full precision (the release rounded them to 2 decimals; <code>--release-rounding</code> does too)"
        )
    )
    return Markup(
        "<strong>Follows the release's code</strong> (<code>{}</code> of chahatraj/TalentorLuck at 57d6938), not "
        "the design: its metric on the release's exact items (<code>*_release</code> configs), probabilities {}."
    ).format(code, rounding)


TABLES = ProbeTables(
    steps=steps,
    figures=figures,
    headline=headline,
    descriptions=DESCRIPTIONS,
    headline_tables=HEADLINE_TABLES,
    table_note=table_note,
)
