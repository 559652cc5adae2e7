"""Name-based Trust Game (docs/DESIGN.md section 5): scored games -> ANOVA, post hoc tests, probing accuracy.

Pure functions from frames to tidy frames::

    prediction_frame(joined)     one row per game: group keys, trustee gender and race, prediction
    anova(frame)                 per investor group: F, df and p of gender, race and their interaction
    gender_posthoc(frame)        per investor group and trustee race: female vs male t-test, Cohen's d
    cell_means(frame)            per investor group, trustee gender and race: mean, SD, n (interaction plots)
    probing_accuracy(joined)     per model (variant, question): share of probing questions answered right

An analysis unit is one (model, model_revision, scoring, pair_source, variant,
investor_group), where the frame has those columns: the paper analyses each investor group
separately, a model's prompt variants are different prompts, and two scorings of one model
are two runs. The t-tests, Cohen's d and Bonferroni come from `analysis.stats`.

Sum of squares: type III with sum-to-zero (effect) contrasts. The paper's design is balanced
(272 games in each of the 10 cells), where types I, II and III agree and give its df (1, 2710),
(4, 2710), (4, 2710). Type III keeps the paper's hypotheses when refusals are dropped and the
cells become unequal: each main effect compares equally weighted cell means (the means the
interaction plots show), and it does not assume the interaction away (type II would, and the
interaction is one of the reported effects). Sum-to-zero contrasts are what make type III
main effects mean that; with the default treatment contrasts they would test the effect at
the reference level only.

Statistics that cannot be computed are NaN with the reason in `note` (empty when fine).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..columns import RUN_COLUMNS, NumberScore
from ..frames import keyed_groups
from ..refusals import refusal_mask
from ..stats import bonferroni, two_sample_t

#: keys that split the games into analysis units, where the frame has them: the run (model,
#: revision, scoring settings: two scorings of one model are two analyses), then the design
UNIT_KEYS: tuple[str, ...] = (*RUN_COLUMNS, "pair_source", "variant", "investor_group")
FACTORS: tuple[str, str] = ("trustee_gender", "trustee_race")
EFFECTS: dict[str, str] = {
    "C(trustee_gender, Sum)": "trustee_gender",
    "C(trustee_race, Sum)": "trustee_race",
    "C(trustee_gender, Sum):C(trustee_race, Sum)": "trustee_gender:trustee_race",
    "Residual": "Residual",
}
SS_TYPE = 3
Answer = NumberScore


def unit_keys(frame: pd.DataFrame, keys: Sequence[str] = UNIT_KEYS) -> list[str]:
    return [k for k in keys if k in frame.columns]


def prediction_frame(
    joined: pd.DataFrame,
    *,
    score: NumberScore = "expected_value",
    min_valid_mass: float | None = None,
    keep_refused: bool = False,
) -> pd.DataFrame:
    """Game rows joined with their results -> one row per game with its `prediction`.

    The prediction is the expected value of the distribution over 0..10 (docs/DESIGN.md section 5),
    or `parsed_value` for generated answers. An item is refused when the runner said so,
    when the score is missing, or when `valid_mass < min_valid_mass`; its prediction is NaN
    (dropped from every test) unless `keep_refused`, so statistics can be shown with and
    without refusals (docs/DESIGN.md section 6).
    """
    need = [*FACTORS, score]
    missing = [c for c in need if c not in joined.columns]
    if missing:
        raise ValueError(f"prediction_frame: the frame lacks columns {missing}")
    value = pd.to_numeric(joined[score], errors="coerce").astype(float)
    refused = refusal_mask(joined, value, min_valid_mass=min_valid_mass)
    extra = [c for c in ("id", "investor_race", "investor_gender") if c in joined.columns]
    out = joined[[*unit_keys(joined), *extra, *FACTORS]].copy()
    out["prediction"] = value if keep_refused else value.mask(refused)
    out["refused"] = refused.to_numpy()
    return out.reset_index(drop=True)


# ----------------------------------------------------------------------------- ANOVA


def _anova_rows(key: dict, note: str, n: int) -> list[dict]:
    nan = float("nan")
    return [
        {**key, "effect": e, "sum_sq": nan, "df": nan, "df_resid": nan, "F": nan, "p_value": nan}
        | {"ss_type": SS_TYPE, "n": n, "note": note}
        for e in EFFECTS.values()
    ]


def _anova_problem(g: pd.DataFrame) -> str:
    """Why a two-way ANOVA of this unit cannot be computed, or '' when it can."""
    if g.empty:
        return "no answered games"
    levels = [g[f].nunique() for f in FACTORS]
    if min(levels) < 2:
        return f"a factor has fewer than 2 levels (gender {levels[0]}, race {levels[1]})"
    cells = g.groupby(list(FACTORS)).size()
    if len(cells) < levels[0] * levels[1]:
        return f"{levels[0] * levels[1] - len(cells)} empty gender x race cell(s)"
    if len(g) <= len(cells):
        return "no residual degrees of freedom (one game per cell)"
    within = g.groupby(list(FACTORS))["prediction"].transform(lambda s: s - s.mean())
    if float((within**2).sum()) <= 1e-12 * max(1.0, float((g["prediction"] ** 2).sum())):
        return "predictions are constant within every cell (residual sum of squares 0)"
    return ""


def anova(frame: pd.DataFrame) -> pd.DataFrame:
    """Per analysis unit: two-way ANOVA of the prediction on trustee gender x race.

    statsmodels OLS `prediction ~ C(trustee_gender, Sum) * C(trustee_race, Sum)` and
    `anova_lm(typ=3)` (see the module docstring for why type III). One row per effect
    (gender, race, interaction, residual) with sum_sq, df, df_resid, F, p_value, ss_type.
    """
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    keys = unit_keys(frame)
    rows: list[dict] = []
    for key, g in keyed_groups(frame, keys):
        g = g[np.isfinite(g["prediction"].to_numpy(dtype=float))]
        problem = _anova_problem(g)
        if problem:
            rows += _anova_rows(key, problem, len(g))
            continue
        data = pd.DataFrame({f: g[f].astype(str).to_numpy() for f in FACTORS})
        data["prediction"] = g["prediction"].to_numpy(dtype=float)
        fit = smf.ols("prediction ~ C(trustee_gender, Sum) * C(trustee_race, Sum)", data=data).fit()
        table = anova_lm(fit, typ=SS_TYPE)
        df_resid = float(table.loc["Residual", "df"])
        for term, effect in EFFECTS.items():
            r = table.loc[term]
            last = effect == "Residual"
            rows.append(
                {
                    **key,
                    "effect": effect,
                    "sum_sq": float(r["sum_sq"]),
                    "df": float(r["df"]),
                    "df_resid": df_resid,
                    "F": float("nan") if last else float(r["F"]),
                    "p_value": float("nan") if last else float(r["PR(>F)"]),
                    "ss_type": SS_TYPE,
                    "n": len(g),
                    "note": "",
                }
            )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- post hoc


def _two_sample(female: np.ndarray, male: np.ndarray) -> dict:
    """Female vs male: Student's t (equal variances) and Cohen's d = (female - male) / pooled SD."""
    r = two_sample_t(female, male)
    return {
        "n_female": r.n1,
        "n_male": r.n2,
        "mean_female": r.mean1,
        "mean_male": r.mean2,
        "diff": r.diff,
        "t": r.t,
        "df": r.df,
        "p_value": r.p,
        "cohens_d": r.smd,
        "note": r.note,
    }


def gender_posthoc(frame: pd.DataFrame) -> pd.DataFrame:
    """Per analysis unit and trustee race: two-sample t-test (equal variances) of female vs
    male trustees' predictions, with Cohen's d (female minus male; docs/DESIGN.md section 5).

    `p_bonferroni` multiplies p by the number of races of the unit with a finite p, for a
    reader who wants the five comparisons as one family; the paper reports the plain p.
    """
    keys = unit_keys(frame)
    rows = []
    for key, g in keyed_groups(frame, keys):
        unit = []
        for race, r in g.groupby("trustee_race", sort=False):
            pred = r["prediction"].to_numpy(dtype=float)
            gender = r["trustee_gender"].to_numpy()
            female = pred[(gender == "female") & np.isfinite(pred)]
            male = pred[(gender == "male") & np.isfinite(pred)]
            unit.append({**key, "trustee_race": race, **_two_sample(female, male)})
        p = np.array([u["p_value"] for u in unit], dtype=float)
        for u, adjusted in zip(unit, bonferroni(p), strict=True):
            u["n_tests"] = int(np.isfinite(p).sum())
            u["p_bonferroni"] = float(adjusted)
        rows += unit
    columns = [*keys, "trustee_race", "n_female", "n_male", "mean_female", "mean_male", "diff"]
    columns += ["t", "df", "p_value", "cohens_d", "n_tests", "p_bonferroni", "note"]
    return pd.DataFrame(rows, columns=columns)


def cell_means(frame: pd.DataFrame) -> pd.DataFrame:
    """Per unit, trustee gender and race: mean, SD and n of the prediction (the interaction
    plots' points), and how many games were refused."""
    keys = unit_keys(frame)
    out = (
        frame.groupby([*keys, *FACTORS], sort=False, dropna=False)
        .agg(
            mean=("prediction", "mean"),
            std=("prediction", "std"),
            n=("prediction", "count"),
            n_refused=("refused", "sum"),
        )
        .reset_index()
    )
    out["n_refused"] = out["n_refused"].astype(int)
    out["note"] = np.where(out["n"] == 0, "no answered games", "")
    return out


# ----------------------------------------------------------------------------- probing


def probing_accuracy(
    joined: pd.DataFrame,
    *,
    answer: Answer = "argmax_value",
    by: Sequence[str] = (*RUN_COLUMNS, "variant", "question"),
) -> pd.DataFrame:
    """Share of probing questions answered correctly (docs/DESIGN.md section 5, construct validity).

    The correct answer is the probing row's `correct_answer` (3 amt; 2 + 3 amt; 10 - amt).
    The model's answer is `argmax_value` of its number distribution (its most likely
    number), `parsed_value` for generated answers, or the rounded `expected_value`. A
    refused item counts as wrong in `accuracy` (refusal is an outcome, not a gap) and is
    left out of `accuracy_answered`. `mean_p_correct` is the mean probability the
    distribution gave the correct number, where the results have `number_probs`.
    """
    need = ["correct_answer", answer]
    missing = [c for c in need if c not in joined.columns]
    if missing:
        raise ValueError(f"probing_accuracy: the frame lacks columns {missing}")
    value = pd.to_numeric(joined[answer], errors="coerce").astype(float)
    if answer == "expected_value":
        value = value.round()
    refused = value.isna()
    if "refused" in joined.columns:
        refused |= joined["refused"].fillna(False).astype(bool)
    correct = (value == joined["correct_answer"].astype(float)) & ~refused
    data = pd.DataFrame({"correct": correct.to_numpy(), "refused": refused.to_numpy()}, index=joined.index)
    data["p_correct"] = _p_correct(joined)
    keys = [k for k in by if k in joined.columns]
    for k in keys:
        data[k] = joined[k]
    rows = []
    for key, g in keyed_groups(data, keys):
        n, n_refused, n_correct = len(g), int(g["refused"].sum()), int(g["correct"].sum())
        answered = n - n_refused
        p = g["p_correct"].to_numpy(dtype=float)
        rows.append(
            {
                **key,
                "answer": answer,
                "n_items": n,
                "n_refused": n_refused,
                "n_correct": n_correct,
                "accuracy": n_correct / n,
                "accuracy_answered": n_correct / answered if answered else float("nan"),
                "mean_p_correct": float(p.mean()) if np.isfinite(p).all() and len(p) else float("nan"),
                "note": "all items refused" if answered == 0 else "",
            }
        )
    return pd.DataFrame(rows)


def _p_correct(joined: pd.DataFrame) -> np.ndarray:
    """P(correct answer) from `number_probs` (over number_min..number_max); NaN without them,
    0 for a correct answer outside the scored range."""
    out = np.full(len(joined), np.nan)
    if "number_probs" not in joined.columns:
        return out
    low = joined["number_min"] if "number_min" in joined.columns else pd.Series(0, index=joined.index)
    for i, (probs, lo, correct) in enumerate(zip(joined["number_probs"], low, joined["correct_answer"], strict=True)):
        if probs is None or (isinstance(probs, float) and np.isnan(probs)):
            continue
        k = int(correct) - int(lo)
        out[i] = float(probs[k]) if 0 <= k < len(probs) else 0.0
    return out
