"""The intergroup empathy gap in the report: the project's tables, the paper's by its notebook, figures, headline.

Its `TABLES` are what the probe's analysis (`spec.ANALYSIS`) computes; the contract is `analysis.probe_analysis`.
The metrics are `analysis.empathy.tables` (M0, M, δ, the permutation test, per-cell tests: the
project's choices, docs/DESIGN.md section 4) and `analysis.empathy.paper` (the authors' analysis
notebook's rules). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from .. import probe_analysis as probe
from ..headlines import RUN_LABEL, Run
from ..precision import PRECISION_HEADINGS, precision_columns, run_samples
from . import figures as fig
from . import paper as emp_paper
from . import precision as emp_precision
from . import tables as emp
from .options import EmpathyOptions

#: the `probe` value of this probe's rows
ROWS = "empathy"


def empathy_analysis(by_config: dict[str, pd.DataFrame], options: probe.AnalysisOptions) -> dict[str, pd.DataFrame]:
    """M0, M, δ with the permutation test, per-cell tests, summaries, refusals (`analysis.empathy.tables`, the
    project's choices), and the paper's tables by the authors' notebook (`analysis.empathy.paper`:
    `empathy_paper_*`), all from the intensity `probe.number_score` picks for each run."""
    permutations = options.probe(EmpathyOptions).n_permutations
    frames = [f for f in by_config.values() if (f["task"] == "number").all()]
    if not frames:
        return {}
    joined = pd.concat(frames, ignore_index=True)
    samples = run_samples(joined)

    def build(keep: bool) -> dict[str, pd.DataFrame]:
        def intensity(g: pd.DataFrame) -> pd.DataFrame:
            return emp.intensity_frame(g, score=probe.number_score(g, options.score), keep_refused=keep)

        frame = probe.per_run(joined, intensity)
        cells = emp.compute_cells(frame)
        gap = emp.compute_gap(cells, n_permutations=permutations, seed=options.seed)
        found = emp_precision.gap_precision(frame, samples, seed=options.seed)
        return {
            "empathy_cells": cells,
            "empathy_gap": precision_columns(gap, found, emp.group_keys(gap), "δ"),
            "empathy_cell_tests": emp.cell_tests(frame, alpha=options.alpha),
            "empathy_matrix_summary": emp.matrix_summary(cells),
            "empathy_identity_summary": emp.identity_summary(cells),
        }

    tables = probe.variant_tables(build)
    exclude = probe.per_run(joined, lambda g: emp.intensity_frame(g, score=probe.number_score(g, options.score)))
    # the paper's own numbers, by its notebook's rules (`analysis.empathy.paper`): its exclusion of a
    # refused event from every cell replaces the variants above, so these are computed once
    paper = {
        "empathy_paper_gap": emp_paper.paper_gap(exclude, n_permutations=permutations, seed=options.seed),
        "empathy_paper_matrix": emp_paper.paper_matrix(exclude),
        "empathy_paper_cells": emp_paper.paper_mask(exclude),
    }
    return {**tables, "empathy_refusals": emp.refusal_rates(exclude), **paper}


def steps(rows: Mapping[str, dict[str, pd.DataFrame]], options: probe.AnalysisOptions) -> list[probe.AnalysisStep]:
    """One step: every table, from the number configs (the free-text `rewrite_t2` config is not a measurement)."""
    by_config = rows.get(ROWS)
    if not by_config:
        return []
    return [probe.AnalysisStep("empathy", by_config, lambda: empathy_analysis(by_config, options))]


def figures(tables: dict[str, pd.DataFrame], options: probe.AnalysisOptions) -> probe.Figures:
    """M heatmaps with the significant cells marked, the t-SNE of nationalities, the paper's heatmaps."""
    out: probe.Figures = []
    if probe.has_rows(tables, "empathy_cells"):
        cells, tests = probe.figure_variant(
            tables["empathy_cells"], tables.get("empathy_cell_tests"), "m", keys=list(emp.GROUP_KEYS), mark="setting"
        )
        out += [(f"empathy_m_{n}", f) for n, f in fig.empathy_heatmaps(cells, tests)]
        out += [(f"empathy_tsne_{n}", f) for n, f in fig.tsne_nationality(cells, seed=options.seed)]
    if probe.has_rows(tables, "empathy_paper_cells"):
        out += [(f"empathy_paper_m_{n}", f) for n, f in fig.empathy_paper_heatmaps(tables["empathy_paper_cells"])]
    return out


def headline(tables: Mapping[str, pd.DataFrame], labels: Mapping[Run, str]) -> pd.DataFrame | None:
    """δ with its sampling interval over events (`precision`, DESIGN 9), p and the null distribution's interval
    per run, category and setting."""
    table = probe.headline_rows(tables, "empathy_gap", labels)
    if table is None:
        return None
    sampling = [c for c in PRECISION_HEADINGS if c in table.columns]
    columns = [RUN_LABEL, "category", "setting", "delta", *sampling, "p_value", "null_low", "null_high"]
    out = table[columns].rename(
        columns={
            "delta": "δ",
            **PRECISION_HEADINGS,
            "p_value": "p",
            "null_low": "null 2.5%",
            "null_high": "null 97.5%",
        }
    )
    return out.sort_values([RUN_LABEL, "category", "setting"]).reset_index(drop=True)


#: tables opened by default in the report: the paper's headline results
HEADLINE_TABLES = ("empathy_gap", "empathy_matrix_summary", "empathy_paper_gap", "empathy_paper_matrix")
#: what each table is, shown above it
DESCRIPTIONS = {
    "empathy_gap": "In-group minus out-group mean of M (δ), 95% interval of δ under the structured permutation null "
    "(rows and columns permuted independently) and its p-value; beside them δ's sampling precision: a 95% "
    "BCa bootstrap interval over the scored events (sample_ci_low, sample_ci_high; 2,000 resamples, "
    "finite-population corrected), its standard error, the minimum detectable effect (2.8 SE) and the sample "
    "(events scored of the config's; none for a full run).",
    "empathy_cell_tests": "Per cell, paired t-test over events against the perceiver's and the experiencer's in-group "
    "cell, Bonferroni-corrected.",
    "empathy_matrix_summary": "μ ± σ, min and max of M0 (the raw intensity scale) and where M is lowest/highest.",
    "empathy_paper_gap": "The paper's Tables 2 and 3 by its notebook's rules: δ on the specified identities "
    "(events refused in any of their cells dropped from all), M0 rounded to 2 decimals and z-scored, and the 2.5th "
    "and 97.5th percentiles of δ over independent row and column permutations.",
    "empathy_paper_matrix": "The paper's Tables 6 and 7 by its notebook's rules, per matrix with `a person` (full) and "
    "without (specified): μ and σ of the rounded M0, min and max of M, the events refused in any cell (dropped "
    "from every cell) and their share of the events (Table 6: the full matrix).",
    "empathy_paper_cells": "The full matrix's cells as the paper's heatmaps show them: M, the two paired t-tests "
    "against the in-group cells and `shown` (both p < 0.05 / (n+1)², the notebook's mask).",
}
#: a note above the section's tables when it has tables of this prefix: which reproduce the paper's tables
SECTION_NOTES = {
    "empathy_paper_": "The empathy_paper_* tables and figures reproduce the paper's Tables 2, 3, 6 and 7 and its "
    "heatmaps by the rules of the authors' analysis notebook (analysis_after_processing.ipynb); the other empathy "
    "tables and figures follow the project's own choices (docs/DESIGN.md section 4).",
}

TABLES = probe.ProbeTables(
    steps=steps,
    figures=figures,
    headline=headline,
    descriptions=DESCRIPTIONS,
    headline_tables=HEADLINE_TABLES,
    section_notes=SECTION_NOTES,
)
