"""The numbers a reader opens the report for, per probe, one compact table each (pure).

The full tables lead with the run's provenance (model path, revision, scoring JSON), which
pushed δ, F, p and mean d off-screen to the right. Here each run is one short label
(`run_label`, i.e. `runners.results.ResultKey.label`: the model's folder or Hub name and the
first 8 characters of its result key, as the key folder is named) and each probe keeps only
its headline columns:

- Attribution: mean d per dimension and outcome over the single-actor items (Talent or Luck?);
- Empathy: δ (in-group minus out-group mean of M), its permutation p-value and null interval;
- Trust Game: F and p of both main effects and the interaction per investor group.

Refused items are left out, as in the papers (the `excluded` variant of each table).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from runners.results import ResultKey

from .columns import RUN_COLUMNS

RUN_LABEL = "run"
#: a run as its three run columns (model, model_revision, scoring)
Run = tuple[str, str, str]


def run_label(model: str, model_revision: str, scoring: str) -> str:
    """The label of the run with these run columns: its key's `ResultKey.label`, the one definition.

    `<model folder or Hub name>·<first 8 of the key digest>`: short, and unique per key.
    """
    return ResultKey(str(model), str(model_revision), str(scoring)).label


def run_labels(tables: Mapping[str, pd.DataFrame]) -> dict[Run, str]:
    """Every run found in the tables -> its label (sorted by label)."""
    runs: set[Run] = set()
    for table in tables.values():
        if all(c in table.columns for c in RUN_COLUMNS):
            runs.update(tuple(map(str, r)) for r in table[list(RUN_COLUMNS)].drop_duplicates().itertuples(index=False))
    return dict(sorted(((run, run_label(*run)) for run in runs), key=lambda item: item[1]))


def with_run_label(table: pd.DataFrame, labels: Mapping[Run, str]) -> pd.DataFrame:
    """`table` with its run columns replaced by one `run` label column in front (for display)."""
    if not all(c in table.columns for c in RUN_COLUMNS):
        return table
    runs = zip(*(table[c].astype(str) for c in RUN_COLUMNS), strict=True)
    label = [labels.get(run) or run_label(*run) for run in runs]
    rest = table.drop(columns=list(RUN_COLUMNS))
    return pd.concat([pd.DataFrame({RUN_LABEL: label}, index=table.index), rest], axis=1)


def _excluded(table: pd.DataFrame | None) -> pd.DataFrame | None:
    if table is None or table.empty:
        return None
    if "refused_items" in table.columns:
        table = table[table["refused_items"] == "excluded"].drop(columns="refused_items")
    return table if not table.empty else None


def attribution_headline(tables: Mapping[str, pd.DataFrame], labels: Mapping[Run, str]) -> pd.DataFrame | None:
    """Mean d per run, dimension and outcome over single-actor items (a weighted mean of the cells)."""
    table = _excluded(tables.get("attribution_single_actor"))
    if table is None:
        return None
    table = with_run_label(table, labels)
    table = table[table["n"].fillna(0) > 0]
    if table.empty:
        return None
    weighted = table.assign(sum_d=table["mean"] * table["n"])
    cells = weighted.groupby([RUN_LABEL, "dimension", "outcome"], sort=True)[["sum_d", "n"]].sum()
    cells["mean d"] = cells["sum_d"] / cells["n"]
    wide = cells["mean d"].unstack("outcome")
    wide.columns = [f"mean d ({outcome})" for outcome in wide.columns]
    wide["items"] = cells["n"].groupby(level=[0, 1]).sum().astype(int)
    return wide.reset_index()


def empathy_headline(tables: Mapping[str, pd.DataFrame], labels: Mapping[Run, str]) -> pd.DataFrame | None:
    """δ, p and the null distribution's interval per run, category and setting."""
    table = _excluded(tables.get("empathy_gap"))
    if table is None:
        return None
    table = with_run_label(table, labels)
    out = table[[RUN_LABEL, "category", "setting", "delta", "p_value", "null_low", "null_high"]].rename(
        columns={"delta": "δ", "p_value": "p", "null_low": "null 2.5%", "null_high": "null 97.5%"}
    )
    return out.sort_values([RUN_LABEL, "category", "setting"]).reset_index(drop=True)


#: ANOVA effect -> headline column prefix
EFFECTS = {"trustee_gender": "gender", "trustee_race": "race", "trustee_gender:trustee_race": "gender × race"}


def trust_game_headline(tables: Mapping[str, pd.DataFrame], labels: Mapping[Run, str]) -> pd.DataFrame | None:
    """F and p of gender, race and their interaction per run and investor group (and variant, pair source)."""
    table = _excluded(tables.get("trust_game_anova"))
    if table is None:
        return None
    table = with_run_label(table, labels)
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
    return pd.DataFrame(columns, index=wide.index).reset_index()
