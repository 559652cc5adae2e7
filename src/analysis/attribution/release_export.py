"""`probes export --format talent-or-luck-csv`: joined prompt + result rows -> the Talent-or-Luck release's CSV files.

The attribution probe's own export format (`promptgen.attribution.spec`, `export_formats`; the
protocol is `analysis.export_format.ExportFormat`, and `analysis.export_files` writes what it
returns). The CSV files the Talent-or-Luck release's scorers wrote
(chahatraj/TalentorLuck `src/closed_ended/*_mcq.py`, commit 57d6938), one per setting,
outcome (configuration), dimension and model, so its analysis scripts (`src/viz/*.py`) run
on a model scored here. Only the `*_release` configs can be written this way: they are the
release's items with its option orders, and carry what the files hold (the release's set
ids, order, seed, labels and option keys). Paths and columns are the release's:
`closed_ended/<setting>/<dimension>/<model>/closed_ended_<mode>_<model>_<dimension>_all_1_runs.csv`
(the folder is the release's `outputs/`; its scripts read `../../outputs/...` from `src/viz`).
Probabilities are written at full precision unless `decimals` is given (the release rounded
them to 2); the chosen option is the most probable one before rounding, as the release's.
The release knows no refusals: a row the runner flagged `refused` is written like any other
(its probabilities are the model's all the same); the JSONL keeps the flag.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from promptgen.core.errors import ProbeError
from runners.results import ResultKey, short_model_name

from ..columns import RUN_COLUMNS
from ..csv_cells import csv_text
from ..export_format import ExportFiles, ExportRows, check_decimals
from .probe import ROWS  # the `probe` value of the release's items
from .release import (
    METRIC_PERSONS,
    OBSERVER,
    PAIR,
    RELEASE_CONFIGS,
    SINGLE,
    is_release_config,
    option_matrices,
    person_probabilities,
)

TALENT_OR_LUCK_CSV = "talent-or-luck-csv"
#: the top folder of the release layout (the release's `outputs/closed_ended/...`)
RELEASE_TOP = "closed_ended"
#: the release's scorers write one run (`--runs 1`): its number and the file name's run count
RUN_NUMBER = 1
#: rows the release's actor-actor scorer formats per `option_probs` key order (its BATCH_SIZE)
PAIR_BATCH = 10_000
#: release config -> the release's setting folder and the column naming its mode (outcome or configuration)
SETTINGS = {
    SINGLE: ("single_actor", "outcome"),
    PAIR: ("actor_actor", "outcome_config"),
    OBSERVER: ("actor_observer", "outcome"),
}
#: the statement inside the release's scorer prompt (what its expanded entries call `initial_prompt`)
_STATEMENT = re.compile(r"### Statement:\n(?P<statement>.*?)\n\nOptions", re.S)

#: release CSV columns before the option-key columns, per setting (`*_mcq.py`'s result rows)
SINGLE_COLUMNS = (
    "initial_prompt",
    "chosen_letter",
    "chosen_key",
    "chosen_sentence",
    "shuffled_options",
    "option_probs",
    "run",
    "seed",
    "gender",
    "{dimension}",
    "name",
    "set_id",
    "domain",
)
PAIR_COLUMNS = (
    "initial_prompt",
    "X_choice_letter",
    "Y_choice_letter",
    "X_choice_key",
    "Y_choice_key",
    "X_choice_text",
    "Y_choice_text",
    "run",
    "seed",
    "gender_pair",
    "domain",
    "length",
    "name1",
    "name2",
    "dimension1",
    "dimension2",
    "set_id",
    "shuffled_X_options",
    "shuffled_Y_options",
    "option_probs",
)
OBSERVER_COLUMNS = (
    "initial_prompt",
    "choice_letter",
    "choice_key",
    "choice_text",
    "run",
    "seed",
    "gender",
    "domain",
    "name1",
    "name2",
    "dimension1",
    "dimension2",
    "y_opt_key",
    "shuffled_options",
    "option_probs",
)
#: prompt columns each release layout reads (besides the item contract's)
_TWO = ("name_x", "name_y", "identity_x_release", "identity_y_release")
NEEDS = {
    SINGLE: ("outcome", "dimension", "gender", "identity_release", "name", "set_id", "domain"),
    PAIR: ("outcome_config", "dimension", "gender_pair", "domain", "length", "set_id", *_TWO),
    OBSERVER: ("outcome", "dimension", "gender", "domain", "y_opt_key", *_TWO),
}
COMMON_NEEDS: tuple[str, ...] = ("id", "choices", "choice_labels", "choice_types", "choice_probs", "option_keys")
COMMON_NEEDS += ("release_index", "release_seed")


def model_names(runs: Iterable[tuple[str, str, str]]) -> dict[tuple[str, str, str], str]:
    """Each run's name in the release's file names: the model's short name, slugged (`aya-expanse-8b`).

    Two runs of one model name (another revision or scoring) would write the same files; both
    then take their result key's folder name (`ResultKey.slug`: the name and a digest prefix).
    """
    named = sorted({(str(model), str(revision), str(scoring)) for model, revision, scoring in runs})
    short = {r: re.sub(r"[^A-Za-z0-9._-]+", "_", short_model_name(r[0])).strip("._") or "model" for r in named}
    taken = pd.Series(list(short.values())).value_counts()
    return {r: (ResultKey(*r).slug if taken[name] > 1 else name) for r, name in short.items()}


def statements(frame: pd.DataFrame) -> list[str]:
    """Each row's statement (the release's `initial_prompt`: names filled in, no instruction or options).

    The `statement` column where the prompts have one; else the text between `### Statement:` and
    the options in the scorer prompt, which the `*_release` configs render as the release did.
    """
    if "statement" in frame.columns and frame["statement"].notna().all():
        return frame["statement"].astype(str).tolist()
    if "prompt" not in frame.columns:
        raise ProbeError("the prompts have neither a `statement` nor a `prompt` column to read the statement from")
    out = []
    for item, prompt in zip(frame["id"], frame["prompt"], strict=True):
        found = _STATEMENT.findall(str(prompt))
        if len(found) != 1:
            raise ProbeError(f"item {item!r}: cannot read the statement from its prompt (not one `### Statement:`)")
        out.append(found[0])
    return out


def _value(p: float, decimals: int | None) -> float:
    """A probability as written: a plain float (a dict repr shows no numpy type), rounded when asked."""
    return float(np.round(p, decimals)) if decimals is not None else float(p)


def _probs_text(keys: list[str], values: dict[str, float], decimals: int | None) -> str:
    """`key=value, ...` as the two-person scorers flattened `option_probs` (they wrote `:.2f`)."""
    return ", ".join(f"{k}={values[k]:.{decimals}f}" if decimals is not None else f"{k}={values[k]!r}" for k in keys)


def run_seeds(rows: pd.DataFrame) -> np.ndarray:
    """The scorer run's seed of each row, the CSV's `seed` column.

    `release_seed` is the seed of the row's option shuffle, which the scorer draws as
    `random.seed(seed + idx)` for entry `idx` of its list (`release_index`).
    """
    return (rows["release_seed"].astype("int64") - rows["release_index"].astype("int64")).to_numpy()


def _ordered(rows: pd.DataFrame) -> pd.DataFrame:
    return rows.sort_values("release_index", kind="stable").reset_index(drop=True)


def _one_person(rows: pd.DataFrame, config: str) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, list, list]:
    """(rows in the scorer's order, option keys, probabilities as its scorer wrote them, labels, choices)."""
    rows = _ordered(rows)
    keys, probs = option_matrices(rows)
    person, renormalise = METRIC_PERSONS[config]["metric"]
    p = person_probabilities(keys, probs, person, renormalise=renormalise)
    return rows, keys, p, [list(x) for x in rows["choice_labels"]], [list(x) for x in rows["choices"]]


def _release_frame(
    out: dict[str, list[Any]],
    rows: pd.DataFrame,
    copied: Sequence[tuple[str, str]],
    by_key: list[dict[str, float]],
    key_order: list[str],
) -> pd.DataFrame:
    """The computed columns `out`, the run and its seed, the prompt columns `copied` ((CSV column, prompt
    column) pairs) and one column per option key, in `key_order`, as the release's CSVs hold them."""
    frame = pd.DataFrame(out)
    frame["run"] = RUN_NUMBER
    frame["seed"] = run_seeds(rows)
    for column, source in copied:
        frame[column] = rows[source].to_numpy()
    for k in key_order:
        frame[k] = [v.get(k, math.nan) for v in by_key]
    return frame


#: (CSV column, prompt column) of the two persons in the two-person CSVs
_PERSONS_COPIED = (
    ("name1", "name_x"),
    ("name2", "name_y"),
    ("dimension1", "identity_x_release"),
    ("dimension2", "identity_y_release"),
)


def single_actor_csv(rows: pd.DataFrame, dimension: str, decimals: int | None = None) -> pd.DataFrame:
    """One release CSV of `singleactor_mcq.py`: one outcome, dimension and model, in the scorer's order.

    The option-key columns come in the first row's presented order, as the scorer's
    `pd.DataFrame(list of dicts)` made them.
    """
    rows, keys, p, labels, choices = _one_person(rows, SINGLE)
    out: dict[str, list[Any]] = {c: [] for c in SINGLE_COLUMNS[:6]}
    by_key: list[dict[str, float]] = []
    for i, statement in enumerate(statements(rows)):
        row_keys, row_labels = list(keys[i]), labels[i]
        known = bool(np.isfinite(p[i]).all())
        best = int(np.argmax(p[i])) if known else None
        values = {k: _value(v, decimals) for k, v in zip(row_keys, p[i], strict=True)} if known else {}
        by_key.append(values)
        out["initial_prompt"].append(statement)
        out["chosen_letter"].append(row_labels[best] if best is not None else None)
        out["chosen_key"].append(row_keys[best] if best is not None else None)
        out["chosen_sentence"].append(choices[i][best] if best is not None else None)
        out["shuffled_options"].append(str(dict(zip(row_labels, row_keys, strict=True))))
        out["option_probs"].append(
            str({lab: values[k] for lab, k in zip(row_labels, row_keys, strict=True)}) if known else None
        )
    copied: tuple[tuple[str, str], ...] = (("gender", "gender"), (dimension, "identity_release"), ("name", "name"))
    copied += (("set_id", "set_id"), ("domain", "domain"))
    key_order = list(keys[0]) if len(rows) else []
    frame = _release_frame(out, rows, copied, by_key, key_order)
    return frame[[c.replace("{dimension}", dimension) for c in SINGLE_COLUMNS] + key_order]


def _person(keys: np.ndarray, person: str) -> np.ndarray:
    """(n, 4) column indices of one person's options in each row, in presented order."""
    return np.array([[j for j, k in enumerate(row) if k.startswith(f"opt{person}")] for row in keys], dtype=int)


def actor_actor_csv(rows: pd.DataFrame, dimension: str, decimals: int | None = None) -> pd.DataFrame:
    """One release CSV of `actoractor_mcq.py` (one outcome configuration, dimension and model)."""
    rows = _ordered(rows)
    keys, probs = option_matrices(rows)
    people = {"X": METRIC_PERSONS[PAIR]["metric_x"], "Y": METRIC_PERSONS[PAIR]["metric_y"]}
    p = {who: person_probabilities(keys, probs, person, renormalise=renorm) for who, (person, renorm) in people.items()}
    where = {who: _person(keys, who) for who in people}
    labels = np.array([list(x) for x in rows["choice_labels"]], dtype=object)
    choices = np.array([list(x) for x in rows["choices"]], dtype=object)
    computed: tuple[str, ...] = ("initial_prompt", "option_probs")
    computed += tuple(f"{who}_choice_{what}" for who in people for what in ("letter", "key", "text"))
    out: dict[str, list[Any]] = {c: [] for c in (*computed, "shuffled_X_options", "shuffled_Y_options")}
    by_key: list[dict[str, float]] = []
    statement = statements(rows)
    text_order: list[str] = []
    for i in range(len(rows)):
        values: dict[str, float] = {}
        for who in people:
            cols = where[who][i]
            mine = p[who][i, cols]
            known = bool(np.isfinite(mine).all())
            best = cols[int(np.argmax(mine))] if known else None
            values.update({keys[i, j]: _value(v, decimals) for j, v in zip(cols, mine, strict=True)} if known else {})
            out[f"{who}_choice_letter"].append(labels[i, best] if best is not None else None)
            out[f"{who}_choice_key"].append(keys[i, best] if best is not None else None)
            out[f"{who}_choice_text"].append(choices[i, best] if best is not None else None)
            out[f"shuffled_{who}_options"].append(", ".join(f"{labels[i, j]}:{keys[i, j]}" for j in cols))
        if i % PAIR_BATCH == 0:  # each saved batch flattens option_probs in its first row's key order
            text_order = [keys[i, j] for who in people for j in where[who][i]]
        out["option_probs"].append(_probs_text(text_order, values, decimals) if len(values) == 8 else None)
        out["initial_prompt"].append(statement[i])
        by_key.append(values)
    copied = (("gender_pair", "gender_pair"), ("domain", "domain"), ("length", "length"), ("set_id", "set_id"))
    key_order = sorted({k for row in keys for k in row})
    frame = _release_frame(out, rows, (*copied, *_PERSONS_COPIED), by_key, key_order)
    return frame[[*PAIR_COLUMNS, *key_order]]


def actor_observer_csv(rows: pd.DataFrame, dimension: str, decimals: int | None = None) -> pd.DataFrame:
    """One release CSV of `actorobserver_mcq.py` (one outcome, dimension and model)."""
    rows, keys, p, labels, choices = _one_person(rows, OBSERVER)
    text_order = list(keys[0]) if len(rows) else []
    computed = ("initial_prompt", "choice_letter", "choice_key", "choice_text", "shuffled_options", "option_probs")
    out: dict[str, list[Any]] = {c: [] for c in computed}
    by_key: list[dict[str, float]] = []
    for i, statement in enumerate(statements(rows)):
        known = bool(np.isfinite(p[i]).all())
        best = int(np.argmax(p[i])) if known else None
        values = {k: _value(v, decimals) for k, v in zip(keys[i], p[i], strict=True)} if known else {}
        by_key.append(values)
        out["initial_prompt"].append(statement)
        out["choice_letter"].append(labels[i][best] if best is not None else None)
        out["choice_key"].append(keys[i][best] if best is not None else None)
        out["choice_text"].append(choices[i][best] if best is not None else None)
        out["shuffled_options"].append(", ".join(f"{lab}:{k}" for lab, k in zip(labels[i], keys[i], strict=True)))
        out["option_probs"].append(_probs_text(text_order, values, decimals) if known else None)
    copied = (("gender", "gender"), ("domain", "domain"), *_PERSONS_COPIED, ("y_opt_key", "y_opt_key"))
    key_order = sorted({k for row in keys for k in row})
    frame = _release_frame(out, rows, copied, by_key, key_order)
    return frame[[*OBSERVER_COLUMNS, *key_order]]


WRITERS = {SINGLE: single_actor_csv, PAIR: actor_actor_csv, OBSERVER: actor_observer_csv}


def release_csv_path(config: str, mode: str, model: str, dimension: str) -> str:
    """Where the release's scorer writes this file, relative to its `outputs/` folder."""
    folder = f"{RELEASE_TOP}/{SETTINGS[config][0]}/{dimension}/{model}"
    return f"{folder}/closed_ended_{mode}_{model}_{dimension}_all_{RUN_NUMBER}_runs.csv"


def release_csv_files(joined: dict[str, pd.DataFrame], decimals: int | None = None) -> dict[str, pd.DataFrame]:
    """{path under `outputs/`: frame} for every run, mode and dimension of the `*_release` configs in `joined`.

    `joined` maps config -> `analysis.load.join` rows (prompt columns kept). A config that is
    not a release config, a row without the release's columns, or generated answers (no
    probabilities to write) are errors naming the config.
    """
    check_decimals(decimals)
    others = sorted(set(joined) - set(WRITERS))
    if others:
        raise ProbeError(
            f"config(s) {', '.join(others)} cannot be written in the release's layout: only the *_release configs "
            f"({', '.join(WRITERS)}) hold the release's items"
        )
    runs = {tuple(r) for f in joined.values() for r in f[list(RUN_COLUMNS)].itertuples(index=False)}
    names = model_names(runs)
    files: dict[str, pd.DataFrame] = {}
    for config, frame in sorted(joined.items()):
        mode = SETTINGS[config][1]
        missing = [c for c in (*COMMON_NEEDS, *NEEDS[config], *RUN_COLUMNS) if c not in frame.columns]
        if missing:
            raise ProbeError(f"config {config!r}: the release layout needs column(s) {', '.join(missing)}")
        scored = frame["choice_probs"].notna()
        if not scored.all():
            item = frame.loc[~scored, "id"].iloc[0]
            raise ProbeError(
                f"config {config!r}: item {item!r} has no choice_probs ({int((~scored).sum())} such rows; generated "
                "answers?): the release's files hold every option's probability"
            )
        for key, rows in frame.groupby([*RUN_COLUMNS, mode, "dimension"], sort=True):
            *run, value, dimension = map(str, key)
            path = release_csv_path(config, value, names[tuple(run)], dimension)  # type: ignore[index]
            files[path] = WRITERS[config](rows, dimension, decimals)
    return files


# ----------------------------------------------------------------------------- the format


class TalentOrLuckCsv:
    """`--format talent-or-luck-csv` (module docstring): the `*_release` configs of attribution results."""

    name = TALENT_OR_LUCK_CSV
    rounds = True
    files = (f"{RELEASE_TOP}/**/*.csv",)
    folders = (RELEASE_TOP, f"{RELEASE_TOP}/**")

    def export(self, rows: ExportRows) -> ExportFiles:
        """The release's files of the `*_release` configs; other configs are left out (an error when named)."""
        by_probe, results = rows.by_probe, rows.results
        foreign = {config: probe for probe, configs in by_probe.items() if probe != ROWS for config in configs}
        if foreign:
            config, probe = sorted(foreign.items())[0]
            raise ProbeError(
                f"results {results}: config {config!r} holds {probe} items, not Talent-or-Luck ones; "
                f"--format {TALENT_OR_LUCK_CSV} writes the Talent-or-Luck release's files only"
            )
        attribution = by_probe.get(ROWS, {})
        release = {c: f for c, f in attribution.items() if is_release_config(c)}
        others = sorted(set(attribution) - set(release))
        if rows.configs_given and others:
            raise ProbeError(
                f"--config {others[0]} cannot be written in the release's layout: only the release's own items "
                f"({', '.join(RELEASE_CONFIGS)}) can"
            )
        if not release:
            raise ProbeError(
                f"results {results} hold no *_release config (found {', '.join(others) or 'none'}); "
                f"--format {TALENT_OR_LUCK_CSV} needs a model scored on {', '.join(RELEASE_CONFIGS)} "
                "(probes run DATASET --config single_actor_release ...)"
            )
        frames = release_csv_files(release, rows.decimals)
        return ExportFiles(
            texts={path: csv_text(frame) for path, frame in frames.items()},
            rows={path: len(frame) for path, frame in frames.items()},
            configs=sorted(release),
            skipped=[f"{c}: not one of the release's configs" for c in others],
        )


FORMAT = TalentOrLuckCsv()
