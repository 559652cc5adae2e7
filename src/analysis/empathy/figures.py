"""The intergroup empathy gap's figures: M heatmaps (the project's and the paper's notebook's) and t-SNE. Pure.

- heatmaps of M (z-scored perceiver x experiencer intensity) on a diverging scale centred on 0,
  cells whose tests are not significant grey (`analysis.plots.matrix_heatmap`);
- the empathy paper's heatmaps (`empathy_paper_m_*`): M and the mask as the authors' notebook
  computes them (`analysis.empathy.paper`), beside the project's own (`empathy_m_*`);
- t-SNE of the nationality perceiver rows of M, coloured by the cultural-map group.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from ..plots import figure_label, figure_runs, matrix_heatmap, slug
from .tables import UNSPECIFIED, group_keys, to_matrix


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
    for key, g in figure_runs(cells, group_keys(cells)):
        label, file_label = figure_label(key, cells)
        matrix = to_matrix(g, value)
        matrix.index.name, matrix.columns.name = "perceiver", "experiencer"
        title = f"{label}: {key.get('category')} {key.get('setting')}\nM (z-scored intensity)"
        fig = matrix_heatmap(
            matrix, significant=_significant_cells(tests, key, g), title=title, cbar_label="M (z-score)"
        )
        out.append((slug(key.get("category"), key.get("setting"), file_label), fig))
    return out


def empathy_paper_heatmaps(cells: pd.DataFrame) -> list[tuple[str, Figure]]:
    """M by the authors' notebook (`analysis.empathy.paper.paper_mask`), one heatmap per model,
    category and setting: z-scored with `a person` after dropping every event refused anywhere
    in the matrix, and grey where the notebook's `get_mask_cells` hides the cell (both paired
    t-tests against the in-group cells need p < 0.05 / (n+1)²). The paper's own colour map and
    limits are not copied: the project's diverging scale keeps these beside `empathy_m_*`."""
    out = []
    for key, g in figure_runs(cells, group_keys(cells)):
        label, file_label = figure_label(key, cells)
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
    for key, g in figure_runs(nationality, group_keys(nationality)):
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
        label, file_label = figure_label(key, cells)
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
