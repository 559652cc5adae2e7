"""Writing an analysis: tables as CSV and parquet, figures as PNG, one self-contained report.html.

I/O only; every number comes from `analysis.pipeline`. The folder is assembled in a temporary
sibling and swapped into place, so a failed or killed analysis never leaves a half-written
report where a finished one was. The HTML embeds its figures (base64 PNG) and styles, so the
one file can be mailed or attached to a paper's supplement; the CSV/parquet files are the
full-precision tables.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from jinja2 import Environment, FileSystemLoader, select_autoescape

from promptgen.core.errors import OutputError
from promptgen.core.files import make_staging_dir, removed_on_error, swap_into_place, writing
from promptgen.core.outputs import Input, Layout, Output, check_output, write_inventory
from promptgen.core.version import __version__

from . import pipeline
from .csv_cells import csv_text
from .headlines import RUN_LABEL, run_labels, with_run_label
from .pipeline import Analysis, AnalysisRequest
from .probes import section_headlines, section_of
from .probes import sections as section_order

TEMPLATES = Path(__file__).parent / "templates"
#: rows of a table shown in the HTML; the CSV next to it has them all
HTML_ROWS = 60
#: tables opened by default in the report: the headline results of each paper
HEADLINE = (
    "refusals",
    "attribution_single_actor",
    "attribution_actor_actor_delta",
    "attribution_actor_observer",
    "attribution_release_single_actor",
    "empathy_gap",
    "empathy_matrix_summary",
    "empathy_paper_gap",
    "empathy_paper_matrix",
    "trust_game_anova",
    "trust_game_posthoc",
    "trust_game_probing_accuracy",
)
#: what each table is, shown above it
DESCRIPTIONS = {
    "refusals": "Items, refused items and refusal rate per config and model run (refused items are left out of means).",
    "attribution_single_actor": "Mean d = (p_effort + p_ability) - (p_difficulty + p_luck) per dimension x identity x "
    "gender x outcome, one-sample t-test against 0 (t, df, p, 95% CI).",
    "attribution_single_actor_by_domain": "Mean d per domain and outcome, one-sample t-test against 0.",
    "attribution_actor_actor_delta": "Δd = d(single actor) - d(same actor beside another person), matched by identity, "
    "scenario and outcome.",
    "attribution_actor_actor_pair": "Δd_pair = d(X) - d(Y) within actor-actor scenarios.",
    "attribution_actor_observer": "Δd1 (observer without identity) and Δd2 (with identity) against single-actor d: "
    "standardised mean difference with pooled SD, two-sided equal-variance t-test.",
    "empathy_gap": "In-group minus out-group mean of M (δ), 95% interval of δ under the structured permutation null "
    "(rows and columns permuted independently) and its p-value.",
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
    "trust_game_anova": "Two-way ANOVA of the expected investment on trustee gender x race per investor group "
    "(statsmodels OLS + anova_lm, type III sums of squares, sum-to-zero contrasts). The paper keeps every game: "
    "its numbers are the rows with refused_items = included; `excluded` leaves refused games out.",
    "trust_game_posthoc": "Female vs male trustees per race: two-sample t-test (equal variances) and Cohen's d. "
    "The paper's rows: refused_items = included (it keeps every game).",
    "trust_game_probing_accuracy": "Share of probing questions answered correctly (construct validity).",
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
#: a note above a section's tables when it has tables of this prefix: which reproduce a paper's tables
SECTION_NOTES = {
    "empathy_paper_": "The empathy_paper_* tables and figures reproduce the paper's Tables 2, 3, 6 and 7 and its "
    "heatmaps by the rules of the authors' analysis notebook (analysis_after_processing.ipynb); the other empathy "
    "tables and figures follow the project's own choices (docs/DESIGN.md section 4).",
}
#: tables that follow the release's own analysis code (chahatraj/TalentorLuck at 57d6938), not the design
RELEASE_CODE = {
    "attribution_release_single_actor": "src/viz/sinact_barplot_aggregate.py",
    "attribution_release_single_actor_by_domain": "src/viz/sinact_barplot.py",
    "attribution_release_single_actor_delta": "src/viz/sinact_delta_aggregate.py",
    "attribution_release_actor_actor": "src/viz/actact_heatmap.py",
    "attribution_release_actor_observer": "src/viz/obseerver_influence.py, src/viz/actor_observer.py",
}


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if value != value:  # NaN
            return "NaN"
        return f"{value:.4g}"
    return str(value)


def table_html(table: pd.DataFrame) -> str:
    """The first HTML_ROWS rows as an HTML table, 4 significant digits, long cells wrapped."""
    shown = table.head(HTML_ROWS)
    return shown.to_html(
        index=False, border=0, classes="table", formatters=dict.fromkeys(shown.columns, _fmt), na_rep="NaN", escape=True
    )


def png_data_uri(png: bytes) -> str:
    """A PNG file's bytes as the `src` of an <img>: the report page embeds the very figure files it writes."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def render_html(analysis: Analysis, figure_uris: dict[str, str], generated: str) -> str:
    """The report page (pure: the figures come as data URIs).

    Each probe section opens with its headline numbers (`analysis.headlines`) and the short
    labels of its runs; in every table shown the run columns (model path, revision, scoring
    JSON) are one label column, and the labels are resolved once, in the provenance at the end.
    The CSV/parquet tables keep the full run columns.
    """

    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]))
    labels = run_labels(analysis.tables)
    sections: dict[str, dict[str, Any]] = {}

    def section(name: str) -> dict[str, Any]:
        return sections.setdefault(name, {"tables": [], "figures": [], "headline": None, "runs": set(), "note": ""})

    for name, table in analysis.tables.items():
        shown = with_run_label(table, labels)
        entry = {
            "name": name,
            "description": DESCRIPTIONS.get(name, ""),
            "release_code": RELEASE_CODE.get(name, ""),
            "rows": len(table),
            "html": table_html(shown),
            "open": name in HEADLINE,
            "truncated": len(table) > HTML_ROWS,
        }
        section(section_of(name))["tables"].append(entry)
        for prefix, note in SECTION_NOTES.items():
            if name.startswith(prefix):
                section(section_of(name))["note"] = note
        if RUN_LABEL in shown.columns:
            section(section_of(name))["runs"].update(shown[RUN_LABEL])
    for name, frame in section_headlines(analysis.tables).items():
        section(name)["headline"] = table_html(frame)
    for sec, name, _ in analysis.figures:
        section(sec)["figures"].append({"name": name, "uri": figure_uris[name]})
    for entry in sections.values():
        entry["runs"] = sorted(entry["runs"])
    order = section_order()  # the overview, then each probe in registry order (`analysis.probes`)
    runs = [
        {"label": label, "model": model, "model_revision": revision, "scoring": scoring}
        for (model, revision, scoring), label in labels.items()
    ]
    return env.get_template("report.html.j2").render(
        sections=[(s, sections[s]) for s in order if s in sections],
        provenance=analysis.provenance,
        options=analysis.options,
        problems=analysis.problems,
        warnings=getattr(analysis, "warnings", []),
        refused_all=getattr(analysis, "refused_all", []),
        notes=getattr(analysis, "notes", []),
        runs=runs,
        version=__version__,
        generated=generated,
    )


#: a report folder: what `write_report` writes, and nothing else (its marker: no file is added for it)
REPORT_OUTPUT = Output(
    "report",
    owns=Layout(
        required=("report.html",),
        files=("report.html", "tables/*.csv", "tables/*.parquet", "figures/*.png"),
        folders=("tables", "figures"),
    ),
)


def check_report_target(out_dir: str | Path, *, overwrite: bool, inputs: Sequence[Input] = ()) -> Path:
    """`promptgen.core.outputs.check_output` for a report folder: only an earlier report is ever replaced."""
    return check_output(out_dir, REPORT_OUTPUT, overwrite=overwrite, inputs=inputs)


def write_report(analysis: Analysis, out_dir: Path, *, overwrite: bool = False) -> Path:
    """Write tables/, figures/ and report.html into `out_dir` (atomically replaced as a whole)."""
    out_dir = check_report_target(out_dir, overwrite=overwrite)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = make_staging_dir(out_dir.parent, out_dir.name)
    except OSError as exc:  # a read-only parent: the first write fails here
        raise OutputError(f"cannot write the report into {out_dir.parent}: {exc.strerror or exc}") from exc
    with writing("the report", out_dir), removed_on_error(tmp):
        (tmp / "tables").mkdir()
        (tmp / "figures").mkdir()
        for name, table in analysis.tables.items():
            (tmp / "tables" / f"{name}.csv").write_text(csv_text(table), encoding="utf-8")
            table.to_parquet(tmp / "tables" / f"{name}.parquet", index=False)
        uris: dict[str, str] = {}
        for _, name, figure in analysis.figures:
            # drawn once: the page embeds the PNG file (drawing is most of a report's time)
            png = tmp / "figures" / f"{name}.png"
            figure.savefig(png, dpi=150, bbox_inches="tight")
            uris[name] = png_data_uri(png.read_bytes())
        generated = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        (tmp / "report.html").write_text(render_html(analysis, uris, generated), encoding="utf-8")
        write_inventory(tmp)  # what --overwrite may replace next time (`REPORT_OUTPUT`)
        swap_into_place(tmp, out_dir, overwrite=overwrite)
    return out_dir


def analyze(
    request: AnalysisRequest | str | Path,
    results: Sequence[str | Path] | None = None,
    out_dir: str | Path | None = None,
    **options: Any,
) -> tuple[Analysis, Path]:
    """`probes analyze`: recompute every metric (`pipeline.analyze`) and write the report folder `request.out`.

    Takes an `AnalysisRequest`, or its fields: `analyze(prompts, results, out_dir, options=...)`.
    The output folder is checked before the analysis runs, so a folder that may not be
    replaced costs no computation.
    """
    if not isinstance(request, AnalysisRequest):
        request = AnalysisRequest(request, results, out_dir, **options)  # type: ignore[arg-type]
    elif results is not None or out_dir is not None or options:
        raise TypeError("analyze() takes an AnalysisRequest or its fields, not both")
    if request.out is None:
        raise TypeError("analyze() writes a report: give its folder (AnalysisRequest.out)")
    inputs = [("--prompts", request.prompts), *(("--results", r) for r in request.results)]
    out = check_report_target(request.out, overwrite=request.overwrite, inputs=inputs)
    analysis = pipeline.analyze(request)
    return analysis, write_report(analysis, out, overwrite=request.overwrite)
