"""Figures of the built-in probes, from their tidy metric tables (each probe's analysis module picks its own).

Pure: every function takes frames and returns `(name, Figure)` pairs (or one Figure); nothing
is shown or written here (`analysis.report` saves them). Figures are `matplotlib.figure.Figure`
objects built without pyplot, so no global state leaks between figures or threads.

What a reader should see:

- heatmaps (empathy M, attribution d) use a diverging colour map centred on 0 with symmetric
  limits, so colour intensity means the same in every panel; cells that are not significant
  are drawn grey (not hidden), with the rule in a footnote;
- one figure per model and matrix, named so several models' figures sort side by side;
- the empathy paper's heatmaps (`empathy_paper_m_*`): M and the mask as the authors' notebook
  computes them (`analysis.empathy_paper`), beside the project's own (`empathy_m_*`);
- t-SNE of the nationality perceiver rows of M, coloured by the cultural-map group;
- Trust Game interaction plots: one line per trustee gender across races, ±1 standard error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.colors import ListedColormap, TwoSlopeNorm
from matplotlib.figure import Figure

from .columns import RUN_COLUMNS
from .empathy import UNSPECIFIED, group_keys, to_matrix
from .frames import keyed_groups
from .headlines import run_label

CAUSE_COLOURS = {"effort": "#1f5fa8", "ability": "#6fa8dc", "difficulty": "#e69138", "luck": "#f6c26b"}
GREY = "#d9d9d9"


def slug(*parts: Any) -> str:
    """A file-name-safe name: lowercase letters, digits, `_`, `.`, `-`."""
    text = "_".join(str(p) for p in parts if p not in (None, ""))
    return re.sub(r"[^a-z0-9_.-]+", "_", text.lower()).strip("_") or "figure"


#: last path components that name a format, not a model (`.../smollm2-135m-instruct/hf`)
GENERIC_DIRS = frozenset({"hf", "model", "models", "weights", "safetensors", "transformers"})


def model_name(model: Any) -> str:
    """The short name of a model id or path: its last component that is not a format folder."""
    parts = [p for p in str(model).rstrip("/").split("/") if p]
    while len(parts) > 1 and parts[-1].lower() in GENERIC_DIRS:
        parts.pop()
    return parts[-1] if parts else str(model)


def _runs(frame: pd.DataFrame, keys: Sequence[str]) -> Iterator[tuple[dict[str, Any], pd.DataFrame]]:
    """The figure's groups: by the `keys` the table has, sorted (a stable order of files)."""
    return keyed_groups(frame, [k for k in keys if k in frame.columns], sort=True)


def _runs_named(frame: pd.DataFrame, name: str) -> int:
    """How many runs (model, revision, scoring) in `frame` have the short model name `name`."""
    columns = [c for c in RUN_COLUMNS if c in frame.columns]
    if "model" not in columns:
        return 1
    runs = frame[columns].drop_duplicates()
    return int(sum(model_name(m) == name for m in runs["model"]))


def _figure_label(key: dict[str, Any], frame: pd.DataFrame) -> tuple[str, str]:
    """(title fragment, file-name fragment) naming the run in `frame` that `key` selects.

    The model's short name, or, when several runs share it (one model at two scorings, dtypes or
    revisions; `org-a/m` and `org-b/m`), the tables' run label `<name>·<key digest>`
    (`headlines.run_label`: `runners.results.ResultKey.label`), so no two runs' figures share a
    title or a file name.
    """
    name = model_name(key.get("model", ""))
    if _runs_named(frame, name) <= 1:
        return name, slug(name)
    label = run_label(*(str(key.get(c)) for c in RUN_COLUMNS))
    return label, slug(label.replace("·", "_"))


def matrix_heatmap(
    matrix: pd.DataFrame,
    *,
    significant: pd.DataFrame | None = None,
    title: str,
    cbar_label: str,
    center: float = 0.0,
    annotate: bool | None = None,
    mask_label: str = "grey: not significant (Bonferroni, α = 0.05)",
    limit: float | None = None,
) -> Figure:
    """Rows x columns of `matrix` as a heatmap; NaN and non-significant cells grey.

    `limit` fixes the colour scale to center ± limit (so panels of a bounded score compare);
    by default it spans the largest distance from the centre in this matrix.
    """
    values = matrix.to_numpy(dtype=float)
    hidden = ~np.isfinite(values)
    if significant is not None:
        hidden |= ~significant.reindex(index=matrix.index, columns=matrix.columns).fillna(False).to_numpy(bool)
    finite = values[np.isfinite(values)]
    span = float(np.max(np.abs(finite - center))) if finite.size else 1.0
    span = limit if limit is not None else (span if span > 0 else 1.0)
    n_rows, n_cols = values.shape
    fig = Figure(figsize=(max(4.5, 1.2 + 0.42 * n_cols), max(3.5, 1.4 + 0.36 * n_rows)), layout="constrained")
    ax = fig.add_subplot()
    ax.imshow(np.where(hidden, 1.0, np.nan), cmap=ListedColormap([GREY]), vmin=0, vmax=1, aspect="auto")
    image = ax.imshow(
        np.ma.masked_array(values, hidden),
        cmap="RdBu_r",
        norm=TwoSlopeNorm(vcenter=center, vmin=center - span, vmax=center + span),
        aspect="auto",
    )
    ax.set_xticks(range(n_cols), [str(c) for c in matrix.columns], rotation=55, ha="right", fontsize=8)
    ax.set_yticks(range(n_rows), [str(r) for r in matrix.index], fontsize=8)
    # the mask rule goes under the axis label, where the layout engine keeps it clear of the ticks
    xlabel = str(matrix.columns.name or "")
    ax.set_xlabel(xlabel + (f"\n({mask_label})" if hidden.any() else ""), fontsize=9)
    ax.set_ylabel(str(matrix.index.name or ""), fontsize=9)
    if annotate if annotate is not None else max(n_rows, n_cols) <= 8:
        for i in range(n_rows):
            for j in range(n_cols):
                if np.isfinite(values[i, j]):
                    strong = not hidden[i, j] and abs(values[i, j] - center) > 0.6 * span
                    colour = "white" if strong else ("#666666" if hidden[i, j] else "black")
                    ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=7, color=colour)
    fig.colorbar(image, ax=ax, label=cbar_label, shrink=0.8)
    ax.set_title(title, fontsize=10)
    return fig


# ----------------------------------------------------------------------------- empathy


def _significant_cells(tests: pd.DataFrame | None, key: dict[str, Any], cells: pd.DataFrame) -> pd.DataFrame | None:
    """Perceiver x experiencer booleans: a cell is shown when a test against either in-group reference is
    significant after Bonferroni; diagonal cells are the references themselves and are always shown."""
    if tests is None or tests.empty:
        return None
    t = tests
    for k, v in key.items():
        if k in t.columns:
            t = t[t[k] == v] if v == v else t[t[k].isna()]
    if t.empty:
        return None
    shown = t.groupby(["perceiver", "experiencer"])["significant"].any().unstack()
    names = to_matrix(cells).index
    shown = shown.reindex(index=names, columns=names).fillna(False).astype(bool)
    for name in names:
        shown.loc[name, name] = True
    return shown


def empathy_heatmaps(cells: pd.DataFrame, tests: pd.DataFrame | None, *, value: str = "m") -> list[tuple[str, Figure]]:
    """One heatmap of M (z-scored perceiver x experiencer intensity) per model, category and setting."""
    out = []
    for key, g in _runs(cells, group_keys(cells)):
        label, file_label = _figure_label(key, cells)
        matrix = to_matrix(g, value)
        matrix.index.name, matrix.columns.name = "perceiver", "experiencer"
        title = f"{label}: {key.get('category')} {key.get('setting')}\nM (z-scored intensity)"
        fig = matrix_heatmap(
            matrix, significant=_significant_cells(tests, key, g), title=title, cbar_label="M (z-score)"
        )
        out.append((slug(key.get("category"), key.get("setting"), file_label), fig))
    return out


def empathy_paper_heatmaps(cells: pd.DataFrame) -> list[tuple[str, Figure]]:
    """M by the authors' notebook (`analysis.empathy_paper.paper_mask`), one heatmap per model,
    category and setting: z-scored with `a person` after dropping every event refused anywhere
    in the matrix, and grey where the notebook's `get_mask_cells` hides the cell (both paired
    t-tests against the in-group cells need p < 0.05 / (n+1)²). The paper's own colour map and
    limits are not copied: the project's diverging scale keeps these beside `empathy_m_*`."""
    out = []
    for key, g in _runs(cells, group_keys(cells)):
        label, file_label = _figure_label(key, cells)
        matrix = to_matrix(g, "m")
        shown = to_matrix(g, "shown").astype(bool)
        matrix.index.name, matrix.columns.name = "perceiver", "experiencer"
        threshold = float(g["threshold"].iat[0])
        title = f"{label}: {key.get('category')} {key.get('setting')}\nM by the paper's notebook rules"
        fig = matrix_heatmap(
            matrix,
            significant=shown,
            title=title,
            cbar_label="M (z-score)",
            mask_label=f"grey: hidden as the paper hides it (a paired t-test p ≥ {threshold:.2g})",
        )
        out.append((slug(key.get("category"), key.get("setting"), file_label), fig))
    return out


def tsne_nationality(cells: pd.DataFrame, *, seed: int = 0) -> list[tuple[str, Figure]]:
    """t-SNE of each nationality matrix's perceiver rows of M, coloured by cultural-map group."""
    from sklearn.manifold import TSNE

    out = []
    nationality = cells[cells["category"] == "nationality"] if "category" in cells.columns else cells.iloc[:0]
    for key, g in _runs(nationality, group_keys(nationality)):
        specified = g[g["relation"] != UNSPECIFIED]  # cells of the unspecified `a person` left out
        matrix = to_matrix(specified)
        rows = matrix.dropna(how="any")
        if len(rows) < 4:
            continue
        groups = specified.drop_duplicates("perceiver").set_index("perceiver")["perceiver_group"]
        # exact gradients: at ~20 points Barnes-Hut buys nothing and can stall for tens of seconds
        points = TSNE(
            n_components=2, perplexity=min(5.0, len(rows) - 1.0), random_state=seed, init="pca", method="exact"
        ).fit_transform(rows.to_numpy(dtype=float))
        label, file_label = _figure_label(key, cells)
        fig = Figure(figsize=(7, 5.5), layout="constrained")
        ax = fig.add_subplot()
        for colour, (group, members) in enumerate(groups.loc[rows.index].groupby(groups.loc[rows.index])):
            at = [rows.index.get_loc(m) for m in members.index]
            ax.scatter(points[at, 0], points[at, 1], label=group, color=f"C{colour}", s=40)
        for k, name in enumerate(rows.index):
            ax.annotate(
                str(name).removeprefix("a person from "),
                points[k],
                fontsize=7,
                xytext=(3, 3),
                textcoords="offset points",
            )
        dropped = len(matrix) - len(rows)
        note = f" ({dropped} rows with missing cells left out)" if dropped else ""
        ax.set_title(f"{label}: nationality {key.get('setting')}, perceiver rows of M (t-SNE){note}", fontsize=10)
        ax.set_xlabel("t-SNE 1")
        ax.set_ylabel("t-SNE 2")
        ax.legend(fontsize=7, title="cultural-map group", title_fontsize=8, loc="best")
        out.append((slug("nationality", key.get("setting"), file_label), fig))
    return out


# ----------------------------------------------------------------------------- attribution


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
    for key, g in _runs(table, [*RUN_COLUMNS, "dimension"]):
        g = g.assign(column=g["gender"].astype(str) + " / " + g["outcome"].astype(str))
        label, file_label = _figure_label(key, table)
        title = f"{label}: {key.get('dimension')}, single actor\nmean d = (effort + ability) - (difficulty + luck)"
        out.append(
            (slug(key.get("dimension"), file_label), _d_heatmap(g, "identity", "column", "gender / outcome", title))
        )
    return out


def attribution_domain_heatmap(domain_table: pd.DataFrame) -> list[tuple[str, Figure]]:
    """Mean d per domain x outcome, one figure per model; p >= 0.05 grey."""
    table = _included(domain_table)
    out = []
    for key, g in _runs(table, list(RUN_COLUMNS)):
        label, file_label = _figure_label(key, table)
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
        shown = [_figure_label(parts, table)[0], *(parts[k] for k in bars_by)]
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


# ----------------------------------------------------------------------------- trust game


def trust_interaction_plots(cell_means: pd.DataFrame) -> list[tuple[str, Figure]]:
    """Mean expected investment per trustee race, one line per trustee gender, ±1 SE; one figure per unit."""
    table = cell_means
    unit = [*RUN_COLUMNS, "pair_source", "variant", "investor_group"]
    out = []
    for key, g in _runs(table, unit):
        if not np.isfinite(g["mean"].to_numpy(dtype=float)).any():
            continue
        races = sorted(g["trustee_race"].astype(str).unique())
        fig = Figure(figsize=(7, 4.2), layout="constrained")
        ax = fig.add_subplot()
        for colour, (gender, h) in enumerate(g.groupby("trustee_gender", sort=True)):
            h = h.set_index(h["trustee_race"].astype(str)).reindex(races)
            se = h["std"].to_numpy(dtype=float) / np.sqrt(np.maximum(h["n"].to_numpy(dtype=float), 1))
            ax.errorbar(
                range(len(races)), h["mean"], yerr=se, marker="o", capsize=3, label=str(gender), color=f"C{colour}"
            )
        ax.set_xticks(range(len(races)), races)
        ax.set_xlabel("trustee race")
        ax.set_ylabel(r"expected investment (\$0-\$10)")  # escaped: `$...$` is mathtext
        label, file_label = _figure_label(key, table)
        ax.set_title(
            f"{label}: investor {key.get('investor_group')} ({key.get('variant')}, {key.get('pair_source')})",
            fontsize=10,
        )
        ax.legend(title="trustee gender", fontsize=8)
        out.append((slug(key.get("investor_group"), key.get("variant"), file_label), fig))
    return out
