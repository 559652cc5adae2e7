"""`--format talent-or-luck-csv`: the Talent-or-Luck release's scorer CSV files -> result rows.

The inverse of `probes export --format talent-or-luck-csv` (`analysis.attribution.release_export`): the files the
release's scorers (chahatraj/TalentorLuck `src/closed_ended/*_mcq.py`, commit 57d6938) write,
`closed_ended/<setting>/<dimension>/<model>/closed_ended_<mode>_<model>_<dimension>_all_<n>_runs.csv`
under its `outputs/` folder, one per setting, outcome (or outcome configuration), dimension and
model, become the rows of the `*_release` configs they answer.

Row k of a file is entry k of the release's list for its outcome and dimension, the prompt row
whose `release_index` is k (the scorers write their list in order; a file cut short after k rows
holds entries 0..k-1). Each row is checked against that item before anything is written: the
statement (`initial_prompt`), the presented option order (`shuffled_options`, or X's and Y's),
the names and identity labels, `set_id`, `domain`, the scorer's run `seed` (`release_seed -
release_index`), and one `run`. The derived columns (the chosen letter, key and text,
`option_probs`) are not read.

The probabilities are the option-key columns (`opt1_higheffort`, ...), read with Python's float
parsing, so a file written at full precision gives back the exact floats. What they hold:

- single actor: cappr's probabilities over the four options, as they came: `choice_probs`;
- actor-observer: the same, renormalised by the scorer (a distribution already);
- actor-actor: X's four and Y's four, each renormalised by the scorer; the split of the joint
  distribution between X and Y is not in the file, so `choice_probs` gives each person half
  the mass (the release's metrics renormalise per person, so they are unchanged).

Written at full precision they sum to 1 and are kept as they are. A rounded file (the release
wrote 2 decimals) sums to 1 only as closely as its rounding explains: each person's values
must sum to 1 within half a unit in the finest place the row prints, per value, plus float
noise (`runners.results.rules.printed_sum_slack`), and are then renormalised per person, since
the analysis reads distributions. Any other row (1/1/1/1, 0.5/0/0/0) is no distribution the
scorer wrote and is refused, naming the file, row and sum, never divided by its sum. The
release knows no refusals: no row is `refused`. Cells a spreadsheet would run were written by
`probes export` with a leading `'` (`analysis.csv_cells`); it is taken off again.
"""

from __future__ import annotations

import contextlib
import csv
import io
import re
from collections import Counter
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.attribution.release import OBSERVER, PAIR, SINGLE, key_table
from analysis.attribution.release_export import RELEASE_TOP, SETTINGS, TALENT_OR_LUCK_CSV, statements
from analysis.csv_cells import FORMULA_STARTS
from probes.importer.common import ParsedFile, SourceFile, empty_row, first, layout_files, need_columns, row_error
from promptgen.core.contract import arrow_table
from promptgen.core.errors import ProbeError
from runners.prompts import PromptConfig
from runners.results.rules import FLOAT_NOISE, PROBABILITY_TOLERANCE, last_place, printed_sum_slack
from runners.scoring.settings import ScoringSettings, scoring_settings

NAME = TALENT_OR_LUCK_CSV
LAYOUT = (
    "the release's outputs/ folder: closed_ended/<setting>/<dimension>/<model>/"
    "closed_ended_<mode>_<model>_<dimension>_all_<n>_runs.csv (as `probes export --format talent-or-luck-csv` "
    "writes it)"
)
#: the release's setting folder -> our config
CONFIG_OF = {folder: config for config, (folder, _) in SETTINGS.items()}
_PATH = re.compile(rf"^{RELEASE_TOP}/(?P<setting>[^/]+)/(?P<dimension>[^/]+)/(?P<model>[^/]+)/(?P<file>[^/]+)$")
#: per config: (CSV column, prompt column) pairs that must agree ("{dimension}" is the file's dimension)
COPIED: dict[str, tuple[tuple[str, str], ...]] = {
    SINGLE: (
        ("gender", "gender"),
        ("{dimension}", "identity_release"),
        ("name", "name"),
        ("set_id", "set_id"),
        ("domain", "domain"),
    ),
    PAIR: (
        ("gender_pair", "gender_pair"),
        ("domain", "domain"),
        ("length", "length"),
        ("set_id", "set_id"),
        ("name1", "name_x"),
        ("name2", "name_y"),
        ("dimension1", "identity_x_release"),
        ("dimension2", "identity_y_release"),
    ),
    OBSERVER: (
        ("gender", "gender"),
        ("domain", "domain"),
        ("name1", "name_x"),
        ("name2", "name_y"),
        ("dimension1", "identity_x_release"),
        ("dimension2", "identity_y_release"),
        ("y_opt_key", "y_opt_key"),
    ),
}
#: per config: the columns holding the presented option order (`shuffled_options`, or per person)
ORDER_COLUMNS = {SINGLE: ("shuffled_options",), PAIR: ("shuffled_X_options", "shuffled_Y_options")}
ORDER_COLUMNS[OBSERVER] = ("shuffled_options",)
#: a probability may stray this far outside [0, 1] (float rounding; `runners.results.rules.PROBABILITY_TOLERANCE`)
TOLERANCE = PROBABILITY_TOLERANCE


def _plain(text: str) -> str:
    """A cell as it was before `probes export` made it inert: a `'` before a formula start is taken off."""
    return text[1:] if text.startswith("'") and text[1:].startswith(FORMULA_STARTS) else text


class TalentOrLuckCsv:
    """The release's closed-ended scorer CSV files (module docstring)."""

    name = NAME
    backend = f"import:{NAME}"
    layout = LAYOUT

    def scoring(self) -> tuple[ScoringSettings, bool]:
        """The release's scorer: cappr's mean option log-probability after the plain prompt, tokenised apart."""
        return scoring_settings("sentence", length_normalize=True, tokenization="separate"), False

    def configs(self) -> Collection[str]:
        return tuple(SETTINGS)

    def discover(self, folder: Path, source_model: str | None) -> list[SourceFile]:
        top = folder / RELEASE_TOP
        if not top.is_dir():
            raise ProbeError(f"{folder} has no {RELEASE_TOP}/ folder: --format {NAME} reads {LAYOUT}")
        found: list[SourceFile] = []
        models: set[str] = set()
        for path in layout_files(folder, ".csv", recursive=True, fmt=NAME, under=RELEASE_TOP):
            rel = path.relative_to(folder).as_posix()
            m = _PATH.match(rel)
            if m is None or m["setting"] not in CONFIG_OF:
                raise ProbeError(f"{rel}: not where the release's scorers write (--format {NAME} reads {LAYOUT})")
            model, dimension = m["model"], m["dimension"]
            name = re.fullmatch(
                rf"closed_ended_(?P<mode>.+)_{re.escape(model)}_{re.escape(dimension)}_all_(?P<runs>[0-9]+)_runs\.csv",
                m["file"],
            )
            if name is None:
                raise ProbeError(
                    f"{rel}: not named as the release's scorers name their files "
                    f"(closed_ended_<mode>_{model}_{dimension}_all_<n>_runs.csv)"
                )
            models.add(model)
            config = CONFIG_OF[m["setting"]]
            meta = {"mode": name["mode"], "dimension": dimension, "model": model}
            found.append(SourceFile(path, rel, config, meta))
        if not found:
            raise ProbeError(f"{folder}: no CSV files under {RELEASE_TOP}/ (--format {NAME} reads {LAYOUT})")
        if source_model is not None:
            if source_model not in models:
                raise ProbeError(f"--source-model {source_model!r}: {folder} holds {', '.join(sorted(models))}")
            return [f for f in found if f.meta["model"] == source_model]
        if len(models) > 1:
            raise ProbeError(
                f"{folder} holds the outputs of several models ({', '.join(sorted(models))}): "
                "choose one with --source-model"
            )
        return found

    def prepare(self, prompts: PromptConfig) -> dict[tuple[str, str], np.ndarray]:
        """(outcome or outcome configuration, dimension) -> prompt position of each `release_index` (-1: none)."""
        config = prompts.config
        mode = SETTINGS[config][1]
        columns = ("id", "prompt", "option_keys", "choice_labels", "release_index", "release_seed", mode, "dimension")
        need_columns(prompts, (*columns, *(p for _, p in COPIED[config])), f"--format {NAME}")
        frame = arrow_table(prompts.dataset.select_columns([mode, "dimension", "release_index"])).to_pandas()
        lists: dict[tuple[str, str], np.ndarray] = {}
        for (value, dimension), group in frame.groupby([mode, "dimension"], sort=False):
            index = group["release_index"].to_numpy(dtype=np.int64)
            if len(np.unique(index)) != len(index) or index.min() < 0:
                raise ProbeError(
                    f"{prompts.path} config {config!r}: release_index repeats (or is negative) in the "
                    f"{value}/{dimension} list: not a *_release config as probes build writes it"
                )
            positions = np.full(int(index.max()) + 1, -1, dtype=np.int64)
            positions[index] = group.index.to_numpy(dtype=np.int64)
            lists[(str(value), str(dimension))] = positions
        return lists

    def parse(
        self, source: SourceFile, data: bytes, prompts: PromptConfig, index: dict[tuple[str, str], np.ndarray]
    ) -> ParsedFile:
        config, mode, dimension = source.config, source.meta["mode"], source.meta["dimension"]
        try:
            frame = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False, na_filter=False)
        except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
            raise ProbeError(f"{source.name}: cannot read it as CSV ({' '.join(str(exc).split())})") from exc
        header = next(csv.reader(io.StringIO(data.decode("utf-8", errors="replace").partition("\n")[0])), [])
        repeated = [name for name, count in Counter(header).items() if count > 1]
        if repeated:  # pandas would rename the second `x` to `x.1`, and the first would be read silently
            raise ProbeError(f"{source.name}: row 1 (the header): column {repeated[0]!r} appears more than once")
        copied = tuple((c.replace("{dimension}", dimension), p) for c, p in COPIED[config])
        needed = ("initial_prompt", "run", "seed", *ORDER_COLUMNS[config], *(c for c, _ in copied))
        missing = [c for c in needed if c not in frame.columns]
        if missing:
            raise ProbeError(f"{source.name}: no column(s) {', '.join(map(repr, missing))} (the release's files have)")
        entries = index.get((mode, dimension))
        if entries is None:
            kind = SETTINGS[config][1]
            raise ProbeError(
                f"{source.name}: {prompts.path} config {config!r} has no item of {kind} {mode!r} and dimension "
                f"{dimension!r}"
            )
        n = len(frame)
        row = len(entries) if n > len(entries) else first(entries[:n] < 0)
        if row is not None:
            raise row_error(
                source,
                row,
                "initial_prompt",
                f"no entry {row} in the prompts' {mode}/{dimension} list of {config} (it holds "
                f"{int((entries >= 0).sum())}): more rows than the release's list",
            )
        positions = entries[:n]
        items = arrow_table(
            prompts.dataset.select(positions).select_columns(
                [
                    "id",
                    "prompt",
                    "option_keys",
                    "choice_labels",
                    "release_index",
                    "release_seed",
                    *(p for _, p in copied),
                ]
            )
        ).to_pandas()
        ids = items["id"].tolist()

        def check(column: str, expected: list[str], text: bool = True) -> None:
            got = [_plain(v) for v in frame[column].tolist()] if text else frame[column].tolist()
            bad = first(np.array([g != e for g, e in zip(got, expected, strict=True)], dtype=bool))
            if bad is not None:
                raise row_error(
                    source, bad, column, f"{got[bad]!r} is not {expected[bad]!r} of its prompt item {ids[bad]!r}"
                )

        runs = frame["run"].tolist()
        if n and (bad := first(np.array([r != runs[0] for r in runs], dtype=bool))) is not None:
            raise row_error(source, bad, "run", f"{runs[bad]!r} after run {runs[0]!r}: one run per file is imported")
        seeds = items["release_seed"].to_numpy(dtype=np.int64) - items["release_index"].to_numpy(dtype=np.int64)
        check("seed", [str(s) for s in seeds], text=False)
        check("initial_prompt", statements(items) if n else [])
        keys = [list(k) for k in items["option_keys"]]
        labels = [list(lab) for lab in items["choice_labels"]]
        for column, expected in _orders(config, keys, labels).items():
            check(column, expected)
        for column, prompt_column in copied:
            check(column, ["" if v is None else str(v) for v in items[prompt_column].tolist()])
        probs = _probabilities(source, frame, keys, ids)
        chosen = probs.argmax(axis=1) if n else np.zeros(0, dtype=np.int64)

        def rows() -> list[dict[str, Any]]:
            out = []
            for item_id, p, c in zip(ids, probs.tolist(), chosen.tolist(), strict=True):
                row = empty_row(item_id, self.backend)
                row.update(choice_probs=p, chosen_index=int(c))
                out.append(row)
            return out

        return ParsedFile(positions, rows)


def _orders(config: str, keys: list[list[str]], labels: list[list[str]]) -> dict[str, list[str]]:
    """The option-order cells the release's scorer writes for each row (`analysis.attribution.release_export`)."""
    if config == SINGLE:
        return {"shuffled_options": [str(dict(zip(lab, k, strict=True))) for lab, k in zip(labels, keys, strict=True)]}
    if config == OBSERVER:
        return {
            "shuffled_options": [
                ", ".join(f"{a}:{b}" for a, b in zip(lab, k, strict=True)) for lab, k in zip(labels, keys, strict=True)
            ]
        }
    return {
        f"shuffled_{who}_options": [
            ", ".join(f"{a}:{b}" for a, b in zip(lab, k, strict=True) if b.startswith(f"opt{who}"))
            for lab, k in zip(labels, keys, strict=True)
        ]
        for who in ("X", "Y")
    }


def _numbers(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(values, parsed) of a column's cells, each read with Python's float parsing (exact for a float's repr)."""
    try:
        return np.asarray(texts, dtype=np.float64), np.ones(len(texts), dtype=bool)
    except ValueError:
        values, parsed = np.full(len(texts), np.nan), np.zeros(len(texts), dtype=bool)
        for i, text in enumerate(texts):
            with contextlib.suppress(ValueError):
                values[i], parsed[i] = float(text), True
        return values, parsed


def _places(texts: list[str]) -> np.ndarray:
    """The power of ten of each cell's last printed digit (`runners.results.rules.last_place`), once per text."""
    known: dict[str, int] = {}
    for text in dict.fromkeys(texts):
        try:
            known[text] = last_place(text)
        except ValueError:  # refused as no probability before its place is asked for
            known[text] = 0
    return np.fromiter((known[t] for t in texts), dtype=np.float64, count=len(texts))


def _probabilities(source: SourceFile, frame: pd.DataFrame, keys: list[list[str]], ids: list[str]) -> np.ndarray:
    """Each row's `choice_probs` in presented order, from the option-key columns (module docstring)."""
    n = len(keys)
    width = len(keys[0]) if n else 0
    if n == 0:
        return np.zeros((0, 0))
    matrix = np.array(keys, dtype=object)
    columns = list(dict.fromkeys(matrix.ravel().tolist()))
    where = pd.Index(columns).get_indexer(matrix.ravel()).reshape(n, width)
    absent = [c for c in columns if c not in frame.columns]
    if absent:
        row = first((matrix == absent[0]).any(axis=1))
        assert row is not None
        raise row_error(source, row, absent[0], f"no such column, and item {ids[row]!r} presents option {absent[0]!r}")
    texts = [frame[c].tolist() for c in columns]
    parsed = [_numbers(t) for t in texts]
    values = np.stack([v for v, _ in parsed], axis=1)[np.arange(n)[:, None], where]
    ok = np.stack([p for _, p in parsed], axis=1)[np.arange(n)[:, None], where]
    places = np.stack([_places(t) for t in texts], axis=1)[np.arange(n)[:, None], where]
    with np.errstate(invalid="ignore"):
        ok &= np.isfinite(values) & (values >= -TOLERANCE) & (values <= 1 + TOLERANCE)
    if not ok.all():
        row, col = (int(i[0]) for i in np.nonzero(~ok))
        key = matrix[row, col]
        raise row_error(source, row, key, f"{frame[key].iloc[row]!r} is not a probability (a number from 0 to 1)")
    values = np.clip(values, 0.0, 1.0)
    person = key_table(matrix)[0]
    persons = sorted(set(person.ravel().tolist()))
    for who in persons:
        mine = person == who
        sums = np.where(mine, values, 0.0).sum(axis=1)
        zero = first(sums <= 0)
        if zero is not None:
            column = next(k for k, m in zip(matrix[zero], mine[zero], strict=True) if m)
            raise row_error(source, zero, column, f"the probabilities of {who or 'the'} options sum to 0")
        finest = np.where(mine, places, np.inf).min(axis=1)
        slack = printed_sum_slack(finest, mine.sum(axis=1))
        wrong = first(np.abs(sums - 1) > slack)
        if wrong is not None:
            column = next(k for k, m in zip(matrix[wrong], mine[wrong], strict=True) if m)
            decimals = max(0, -int(finest[wrong]))
            raise row_error(
                source,
                wrong,
                column,
                f"the probabilities of {who or 'the'} options sum to {float(sums[wrong])!r}: printed to {decimals} "
                f"decimal(s), they may miss 1 by {float(slack[wrong]):.3g} at most, so they are no distribution "
                "the release's scorer wrote",
            )
        off = np.abs(sums - 1) > FLOAT_NOISE
        scale = np.where(off, sums, 1.0)[:, None]
        values = np.where(mine, values / scale, values)
    return values / len(persons) if len(persons) > 1 else values


FORMAT = TalentOrLuckCsv()
