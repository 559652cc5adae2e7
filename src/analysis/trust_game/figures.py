"""The name-based Trust Game's figures: interaction plots of the expected investment. Pure."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..columns import RUN_COLUMNS
from ..plots import figure_label, figure_runs, slug


def trust_interaction_plots(cell_means: pd.DataFrame) -> list[tuple[str, Figure]]:
    """Mean expected investment per trustee race, one line per trustee gender, ±1 SE; one figure per unit."""
    table = cell_means
    unit = [*RUN_COLUMNS, "pair_source", "variant", "investor_group"]
    out = []
    for key, g in figure_runs(table, unit):
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
        label, file_label = figure_label(key, table)
        ax.set_title(
            f"{label}: investor {key.get('investor_group')} ({key.get('variant')}, {key.get('pair_source')})",
            fontsize=10,
        )
        ax.legend(title="trustee gender", fontsize=8)
        out.append((slug(key.get("investor_group"), key.get("variant"), file_label), fig))
    return out
