"""Talent or Luck?'s figures: mean d heatmaps and the shares of the most likely cause. Pure."""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from ..columns import RUN_COLUMNS
from ..plots import figure_label, figure_runs, matrix_heatmap, slug

CAUSE_COLOURS = {"effort": "#1f5fa8", "ability": "#6fa8dc", "difficulty": "#e69138", "luck": "#f6c26b"}


def _included(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["refused_items"] == "included"] if "refused_items" in table.columns else table


def _d_heatmap(g: pd.DataFrame, index: str, columns: str, column_name: str, title: str, **kw: Any) -> Figure:
    """Mean d of a single-actor table as index x columns, cells with p >= 0.05 grey, on d's fixed -1..1 scale."""
    matrix = g.pivot_table(index=index, columns=columns, values="mean", aggfunc="first", dropna=False)
    p = g.pivot_table(index=index, columns=columns, values="p", aggfunc="first", dropna=False)
    matrix.index.name, matrix.columns.name = index, column_name
    return matrix_heatmap(
        matrix,
        significant=p < 0.05,
        title=title,
        cbar_label="mean d",
        mask_label="grey: p ≥ 0.05 (one-sample t-test against 0, uncorrected)",
        limit=1.0,  # d lies in [-1, 1]: one scale for every model, dimension and domain
        **kw,
    )


def attribution_heatmaps(single_table: pd.DataFrame) -> list[tuple[str, Figure]]:
    """Mean d per identity x (gender, outcome), one figure per model and dimension; p >= 0.05 grey."""
    table = _included(single_table)
    out = []
    for key, g in figure_runs(table, [*RUN_COLUMNS, "dimension"]):
        g = g.assign(column=g["gender"].astype(str) + " / " + g["outcome"].astype(str))
        label, file_label = figure_label(key, table)
        title = f"{label}: {key.get('dimension')}, single actor\nmean d = (effort + ability) - (difficulty + luck)"
        out.append(
            (slug(key.get("dimension"), file_label), _d_heatmap(g, "identity", "column", "gender / outcome", title))
        )
    return out


def attribution_domain_heatmap(domain_table: pd.DataFrame) -> list[tuple[str, Figure]]:
    """Mean d per domain x outcome, one figure per model; p >= 0.05 grey."""
    table = _included(domain_table)
    out = []
    for key, g in figure_runs(table, list(RUN_COLUMNS)):
        label, file_label = figure_label(key, table)
        title = f"{label}: single actor by domain\nmean d"
        out.append((slug(file_label), _d_heatmap(g, "domain", "outcome", "outcome", title, annotate=True)))
    return out


def attribution_shares_bar(shares: pd.DataFrame) -> Figure:
    """Share of items whose most likely cause is effort, ability, difficulty or luck, per model x setting x outcome."""
    table = _included(shares)
    runs = [k for k in RUN_COLUMNS if k in table.columns]
    bars_by = [k for k in ("setting", "condition", "outcome") if k in table.columns]
    bars = table.groupby([*runs, *bars_by], sort=True, dropna=False)
    fig = Figure(figsize=(8, max(2.5, 0.45 * bars.ngroups + 1.2)), layout="constrained")
    ax = fig.add_subplot()
    labels = []
    for row, (key, g) in enumerate(bars):
        key = key if isinstance(key, tuple) else (key,)
        parts = dict(zip([*runs, *bars_by], key, strict=True))
        shown = [figure_label(parts, table)[0], *(parts[k] for k in bars_by)]
        labels.append(" / ".join(str(v) for v in shown if v == v and v not in (None, "")))
        left = 0.0
        shares_by_cause = g.set_index("cause")["share"]
        for cause, colour in CAUSE_COLOURS.items():
            share = float(shares_by_cause.get(cause, 0.0))
            share = share if share == share else 0.0
            ax.barh(row, share, left=left, color=colour, label=cause if row == 0 else None, edgecolor="white")
            if share >= 0.08:
                ax.text(left + share / 2, row, f"{share:.0%}", ha="center", va="center", fontsize=7)
            left += share
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of items whose most likely cause is ...")
    ax.set_title("Attribution types (internal: effort, ability; external: difficulty, luck)", fontsize=10)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), title="most likely cause", title_fontsize=8)
    return fig
