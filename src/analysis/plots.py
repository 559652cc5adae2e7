"""What every probe's figures share: names, run labels and the significance heatmap (each probe's `figures` draws).

Pure: every function takes frames and returns `(name, Figure)` pairs (or one Figure); nothing
is shown or written here (`analysis.report` saves them). Figures are `matplotlib.figure.Figure`
objects built without pyplot, so no global state leaks between figures or threads.

What a reader should see:

- heatmaps (empathy M, attribution d) use a diverging colour map centred on 0 with symmetric
  limits, so colour intensity means the same in every panel; cells that are not significant
  are drawn grey (not hidden), with the rule in a footnote;
- one figure per model and matrix, named so several models' figures sort side by side;
- the probes' own figures are their packages' (`analysis.<probe>.figures`).
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
from .frames import keyed_groups
from .headlines import run_label

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


def figure_runs(frame: pd.DataFrame, keys: Sequence[str]) -> Iterator[tuple[dict[str, Any], pd.DataFrame]]:
    """The figure's groups: by the `keys` the table has, sorted (a stable order of files)."""
    return keyed_groups(frame, [k for k in keys if k in frame.columns], sort=True)


def _runs_named(frame: pd.DataFrame, name: str) -> int:
    """How many runs (model, revision, scoring) in `frame` have the short model name `name`."""
    columns = [c for c in RUN_COLUMNS if c in frame.columns]
    if "model" not in columns:
        return 1
    runs = frame[columns].drop_duplicates()
    return int(sum(model_name(m) == name for m in runs["model"]))


def figure_label(key: dict[str, Any], frame: pd.DataFrame) -> tuple[str, str]:
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
