"""2010 US Census surnames -> racially representative surname lists (docs/DESIGN.md section 5, steps 1-6).

The Trust Game paper identifies players by title + surname, so the surnames must signal a
race as clearly as the Census allows. Two published selection rules are implemented:

* **bayesian** (the paper's): Pr(race | name) from the Census shares, Pr(name) from the
  counts, posterior Pr(name | race) = Pr(race | name) Pr(name) / sum over names. Every
  surname goes to the race whose posterior is highest, and is ranked there by posterior.
  This favours names that are both typical and frequent (Williams is the top Black name).
* **threshold** (Aher et al. 2023): Pr(race | name) >= 0.9, most frequent first. This
  favours names that are almost exclusive to one race, however rare.

Everything below `load_census` is a pure function of data frames, so each step can be
checked against a hand computation on a few rows.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
from datasets import List, Value

from ..core.errors import SourceFormatError

#: the five races of the paper, in the order used everywhere (lists, ties, columns).
RACES: tuple[str, ...] = ("Asian", "Black", "Hispanic", "Native American", "White")
#: race -> Census share column (percent of people with the surname who report that race).
RACE_COLUMNS: dict[str, str] = {
    "Asian": "pctapi",
    "Black": "pctblack",
    "Hispanic": "pcthispanic",
    "Native American": "pctaian",
    "White": "pctwhite",
}
#: race -> renormalised share column of the published lists.
SHARE_COLUMNS: dict[str, str] = {race: "share_" + race.lower().replace(" ", "_") for race in RACES}
PCT_COLUMNS: tuple[str, ...] = ("pctwhite", "pctblack", "pctapi", "pctaian", "pct2prace", "pcthispanic")
INT_COLUMNS: tuple[str, ...] = ("rank", "count")
FLOAT_COLUMNS: tuple[str, ...] = ("prop100k", "cum_prop100k")
CENSUS_COLUMNS: tuple[str, ...] = ("name", *INT_COLUMNS, *FLOAT_COLUMNS, *PCT_COLUMNS)
#: the Census marker of a share withheld for disclosure avoidance.
SUPPRESSED = "(S)"
#: the table's last row aggregates every surname below the publication cut-off; it is no surname.
ALL_OTHER_NAMES = "ALL OTHER NAMES"
#: shares are rounded to 0.01 percentage points, so six of them may sum to 100 +- 0.03;
#: a row further off than this is corrupt.
SHARE_SUM_TOLERANCE = 0.1
#: a share that is exactly the threshold in decimal (e.g. 89.91 / 99.9) can land one ulp
#: below it in floating point; this slack keeps such names in the threshold list.
THRESHOLD_SLACK = 1e-9
LIST_COLUMNS: tuple[str, ...] = ("race", "rank", "surname", "count", *SHARE_COLUMNS.values(), "posterior")
METHODS: tuple[str, ...] = ("bayesian", "threshold")
THRESHOLD_BASES: tuple[str, ...] = ("renormalised", "census")


# ----------------------------------------------------------------------------- reading


def load_census(path: Path | str, *, display_name: str | None = None) -> pd.DataFrame:
    """Read the Census surname table from the raw CSV, the upstream names.zip, or a parquet copy.

    Returns one row per file row with the Census columns typed; suppressed shares are NaN
    (`impute_suppressed` fills them). `display_name` is how errors name the file.
    """
    path = Path(path)
    file = display_name or str(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        try:
            raw = pd.read_parquet(path)
        except (pa.ArrowException, OSError) as exc:  # truncated or not parquet at all
            raise SourceFormatError(file, "(whole file)", f"not a readable parquet file: {exc}") from exc
        return parse_census(raw, file=file, first_line=None)
    if suffix == ".csv":
        with open(path, "rb") as fh:
            return parse_census(_read_csv(fh.read(), file), file=file, first_line=2)
    if suffix == ".zip":
        try:
            with zipfile.ZipFile(path) as archive:
                members = [m for m in archive.namelist() if m.lower().endswith(".csv") and not m.startswith("__MACOSX")]
                if len(members) != 1:
                    raise SourceFormatError(file, "archive", f"expected exactly one .csv member, found {members}")
                member = f"{file}:{members[0]}"
                data = archive.read(members[0])
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:  # not a zip, or a damaged member
            raise SourceFormatError(file, "(whole file)", f"not a readable zip archive: {exc}") from exc
        return parse_census(_read_csv(data, member), file=member, first_line=2)
    raise SourceFormatError(file, "file name", f"unknown extension {suffix!r}; expected .csv, .zip or .parquet")


def _read_csv(data: bytes, file: str) -> pd.DataFrame:
    """Every cell as text, so `(S)` and malformed numbers reach the checks unchanged."""
    try:
        return pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False, na_filter=False, encoding="utf-8-sig")
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise SourceFormatError(file, "file", f"not a readable CSV: {exc}") from exc


def _where(frame: pd.DataFrame, i: int, first_line: int | None) -> str:
    name = frame["name"].iloc[i]
    return f"line {first_line + i} (name {name!r})" if first_line is not None else f"row {i} (name {name!r})"


def _to_numbers(
    frame: pd.DataFrame, column: str, *, file: str, first_line: int | None, suppressible: bool
) -> pd.Series:
    """A column as float64; `(S)` -> NaN where allowed; anything else non-numeric is an error."""
    raw = frame[column]
    if pd.api.types.is_numeric_dtype(raw) and not pd.api.types.is_bool_dtype(raw):
        # a typed copy (parquet) marks a suppressed share as null
        values = raw.astype("float64")
        bad = values.isna() if not suppressible else pd.Series(False, index=raw.index)
    else:
        text = raw.astype(str).str.strip()
        suppressed = text.eq(SUPPRESSED) if suppressible else pd.Series(False, index=raw.index)
        values = pd.to_numeric(text.where(~suppressed), errors="coerce")
        bad = values.isna() & ~suppressed
        values = values.astype("float64")
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        allowed = f"a number or {SUPPRESSED!r}" if suppressible else "a number"
        raise SourceFormatError(
            file,
            f"{_where(frame, i, first_line)}, column {column!r}",
            f"value {raw.iloc[i]!r} is not {allowed} ({int(bad.sum())} such value(s) in this column)",
        )
    return values


def parse_census(raw: pd.DataFrame, *, file: str, first_line: int | None) -> pd.DataFrame:
    """Check and type a Census surname table read as text or from parquet.

    `first_line` is the file line of the first data row (2 for a CSV with a header) or None
    for row-numbered formats; it is only used to say where an error is.
    """
    missing = [c for c in CENSUS_COLUMNS if c not in raw.columns]
    if missing:
        raise SourceFormatError(
            file, "header", f"missing column(s) {missing}; found {list(raw.columns)}; expected {list(CENSUS_COLUMNS)}"
        )
    frame = raw.loc[:, list(CENSUS_COLUMNS)].reset_index(drop=True)
    names = frame["name"].astype(str).str.strip()
    frame["name"] = names
    empty = names.eq("")
    if empty.any():
        i = int(np.flatnonzero(empty.to_numpy())[0])
        raise SourceFormatError(file, f"{_where(frame, i, first_line)}, column 'name'", "empty surname")
    dup = names.duplicated()
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        raise SourceFormatError(file, f"{_where(frame, i, first_line)}, column 'name'", "surname appears twice")
    out = pd.DataFrame({"name": names})
    for column in INT_COLUMNS:
        values = _to_numbers(frame, column, file=file, first_line=first_line, suppressible=False)
        fractional = values.ne(values.round())
        negative = values.lt(0)
        if (fractional | negative).any():
            i = int(np.flatnonzero((fractional | negative).to_numpy())[0])
            raise SourceFormatError(
                file,
                f"{_where(frame, i, first_line)}, column {column!r}",
                f"value {frame[column].iloc[i]!r} is not a non-negative integer",
            )
        out[column] = values.astype("int64")
    for column in FLOAT_COLUMNS:
        out[column] = _to_numbers(frame, column, file=file, first_line=first_line, suppressible=False)
    for column in PCT_COLUMNS:
        values = _to_numbers(frame, column, file=file, first_line=first_line, suppressible=True)
        out_of_range = values.lt(0) | values.gt(100 + SHARE_SUM_TOLERANCE)
        if out_of_range.any():
            i = int(np.flatnonzero(out_of_range.to_numpy())[0])
            raise SourceFormatError(
                file,
                f"{_where(frame, i, first_line)}, column {column!r}",
                f"share {values.iloc[i]} is outside 0-100",
            )
        out[column] = values
    _check_share_sums(out, file=file, first_line=first_line)
    return out


def _check_share_sums(frame: pd.DataFrame, *, file: str, first_line: int | None) -> None:
    """Known shares may not exceed 100; a row without suppressed shares must sum to 100."""
    pct = frame[list(PCT_COLUMNS)]
    known = pct.sum(axis=1, skipna=True)
    n_suppressed = pct.isna().sum(axis=1)
    over = known.gt(100 + SHARE_SUM_TOLERANCE)
    off = n_suppressed.eq(0) & (known - 100).abs().gt(SHARE_SUM_TOLERANCE)
    for mask, problem in (
        (over, "the known race shares sum to {total:.2f}, more than 100"),
        (off, "the race shares sum to {total:.2f}, not 100, and none is suppressed"),
    ):
        if mask.any():
            i = int(np.flatnonzero(mask.to_numpy())[0])
            raise SourceFormatError(
                file,
                f"{_where(frame, i, first_line)}, columns {list(PCT_COLUMNS)}",
                problem.format(total=known.iloc[i])
                + f" (tolerance {SHARE_SUM_TOLERANCE}; {int(mask.sum())} such row(s))",
            )


# ----------------------------------------------------------------------------- steps 1-3


def impute_suppressed(census: pd.DataFrame) -> pd.DataFrame:
    """Step 1: every suppressed share in a row gets an equal part of what the known shares leave.

    `100 - sum(known)` is clipped at 0: known shares may exceed 100 by rounding (at most
    `SHARE_SUM_TOLERANCE`, checked on reading), and a share is never negative. A file that
    is already imputed (the parquet copy) has no NaN and passes through unchanged.
    """
    out = census.copy()
    pct = out[list(PCT_COLUMNS)]
    n_suppressed = pct.isna().sum(axis=1)
    rest = (100.0 - pct.sum(axis=1, skipna=True)).clip(lower=0.0)
    fill = (rest / n_suppressed.where(n_suppressed > 0)).fillna(0.0)
    for column in PCT_COLUMNS:
        out[column] = pct[column].fillna(fill)
    return out


def race_given_name(census: pd.DataFrame, *, file: str = "census") -> pd.DataFrame:
    """Step 2: drop the `ALL OTHER NAMES` row and pct2prace; the five races renormalised to 1.

    Returns `surname` (title case), `name` (as in the Census), `count`, the five imputed
    Census percentages (`pctapi`, ...; kept for the `census` threshold basis) and the five
    `share_*` columns = Pr(race | name). Expects imputed shares (no NaN).
    """
    frame = census[census["name"] != ALL_OTHER_NAMES].reset_index(drop=True)
    pct = frame[[RACE_COLUMNS[r] for r in RACES]].to_numpy(dtype="float64")
    if np.isnan(pct).any():
        raise ValueError("race_given_name needs imputed shares; call impute_suppressed first")
    total = pct.sum(axis=1)
    if (total <= 0).any():
        i = int(np.flatnonzero(total <= 0)[0])
        raise SourceFormatError(
            file,
            f"name {frame['name'].iloc[i]!r}, columns {[RACE_COLUMNS[r] for r in RACES]}",
            "the five race shares sum to 0, so Pr(race | name) is undefined",
        )
    shares = pct / total[:, None]
    out = pd.DataFrame({"surname": title_case(frame["name"]), "name": frame["name"], "count": frame["count"]})
    for k, race in enumerate(RACES):
        out[RACE_COLUMNS[race]] = pct[:, k]
    for k, race in enumerate(RACES):
        out[SHARE_COLUMNS[race]] = shares[:, k]
    return out


def title_case(names: pd.Series) -> pd.Series:
    """`NGUYEN` -> `Nguyen`, `OBRIEN` -> `Obrien` (the Census spells surnames without punctuation)."""
    return names.str.lower().str.title()


def posterior_name_given_race(shares: pd.DataFrame) -> pd.DataFrame:
    """Step 3: Pr(name | race) per surname and race, from `race_given_name`'s output.

    Pr(name) = count / sum(count); joint = Pr(race | name) Pr(name); posterior = joint /
    sum over names of joint. Returns one `posterior_*` column per race (suffix as `share_*`).
    A race that no surname of the table has (possible only in a small table) has no
    posterior: its column is NaN.
    """
    p_name = shares["count"].to_numpy(dtype="float64") / shares["count"].sum()
    out = pd.DataFrame(index=shares.index)
    for race in RACES:
        joint = shares[SHARE_COLUMNS[race]].to_numpy() * p_name
        total = joint.sum()
        out[_posterior_column(race)] = joint / total if total > 0 else np.full(len(joint), np.nan)
    return out


def _posterior_column(race: str) -> str:
    return SHARE_COLUMNS[race].replace("share_", "posterior_", 1)


# ----------------------------------------------------------------------------- steps 4-6


def bayesian_ranking(shares: pd.DataFrame, *, top: int) -> pd.DataFrame:
    """Step 4: each surname in the race with the highest posterior, ranked by posterior; top `top` per race.

    Ties: an equal posterior under two races goes to the race listed first in `RACES`; equal
    posteriors within a race are ordered by surname, so the list never depends on row order.
    """
    posteriors = posterior_name_given_race(shares)
    matrix = posteriors[[_posterior_column(r) for r in RACES]].to_numpy()
    # a race without posterior (NaN) never wins; every surname has some race with mass
    best = np.where(np.isnan(matrix), -np.inf, matrix).argmax(axis=1)
    frames = []
    for k, race in enumerate(RACES):
        members = shares[best == k].assign(race=race, posterior=matrix[best == k, k])
        frames.append(_rank(members, ["posterior", "surname"], [False, True], top))
    return pd.concat(frames, ignore_index=True)[list(LIST_COLUMNS)]


def threshold_ranking(
    shares: pd.DataFrame,
    *,
    threshold: float,
    top: int,
    basis: str = "renormalised",
    exclude: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Step 5 (Aher et al. 2023): share >= threshold, most frequent first; top `top` per race.

    `basis` says which share: `renormalised` is Pr(race | name) of step 2 (docs/DESIGN.md section 5);
    `census` is the Census percentage / 100, with the two-or-more-races share still in the
    denominator (Aher et al. read the Census table directly). `exclude` (a list with `race`
    and `surname`, e.g. the bayesian ranking) removes its surnames from that race's
    candidates before the top `top` are taken, so the two lists add up to `top` new names.
    The published pairs fit `basis="census"` with the bayesian list excluded (see the card).

    Equal counts are ordered by surname. `posterior` is Pr(name | race) for the list's race,
    so both lists can be compared column for column.
    """
    if basis not in THRESHOLD_BASES:
        raise ValueError(f"threshold basis {basis!r} is not one of {THRESHOLD_BASES}")
    posteriors = posterior_name_given_race(shares)
    frames = []
    for race in RACES:
        if basis == "renormalised":
            share = shares[SHARE_COLUMNS[race]].to_numpy()
        else:
            share = shares[RACE_COLUMNS[race]].to_numpy() / 100.0
        keep = share >= threshold - THRESHOLD_SLACK
        if exclude is not None:
            keep &= ~shares["surname"].isin(exclude.loc[exclude["race"] == race, "surname"]).to_numpy()
        members = shares[keep].assign(race=race, posterior=posteriors.loc[keep, _posterior_column(race)])
        frames.append(_rank(members, ["count", "surname"], [False, True], top))
    return pd.concat(frames, ignore_index=True)[list(LIST_COLUMNS)]


def _rank(members: pd.DataFrame, by: list[str], ascending: list[bool], top: int) -> pd.DataFrame:
    ranked = members.sort_values(by, ascending=ascending, kind="mergesort").head(top).reset_index(drop=True)
    return ranked.assign(rank=np.arange(1, len(ranked) + 1, dtype="int64"))


def seed_list(bayesian: pd.DataFrame, threshold: pd.DataFrame) -> pd.DataFrame:
    """Step 6: per race, the de-duplicated union of both lists, with the method(s) that proposed each surname.

    Order within a race: the bayesian list in its order, then the threshold-only surnames
    in theirs. `bayesian_rank` / `threshold_rank` are null where a method did not propose
    the surname; `rank` numbers the seed list itself.
    """
    frames = []
    value_columns = ["count", *SHARE_COLUMNS.values(), "posterior"]
    for race in RACES:
        b = bayesian[bayesian["race"] == race].set_index("surname")
        t = threshold[threshold["race"] == race].set_index("surname")
        order = list(b.index) + [s for s in t.index if s not in b.index]
        values = pd.concat([b[value_columns], t.loc[~t.index.isin(b.index), value_columns]]).loc[order]
        frame = values.reset_index().assign(race=race)
        frame["bayesian_rank"] = frame["surname"].map(b["rank"]).astype("Int64")
        frame["threshold_rank"] = frame["surname"].map(t["rank"]).astype("Int64")
        frame["methods"] = [
            [m for m, r in zip(METHODS, ranks, strict=True) if not pd.isna(r)]
            for ranks in zip(frame["bayesian_rank"], frame["threshold_rank"], strict=True)
        ]
        frame["rank"] = np.arange(1, len(frame) + 1, dtype="int64")
        frames.append(frame)
    columns = ["race", "rank", "surname", "methods", "bayesian_rank", "threshold_rank", *value_columns]
    return pd.concat(frames, ignore_index=True)[columns]


def compute_lists(
    shares: pd.DataFrame,
    *,
    bayesian_top: int,
    threshold: float,
    threshold_top: int,
    threshold_basis: str = "renormalised",
    threshold_excludes_bayesian: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Steps 4-6 from `race_given_name`'s frame: (bayesian ranking, threshold ranking, seed list)."""
    bayesian = bayesian_ranking(shares, top=bayesian_top)
    thresholded = threshold_ranking(
        shares,
        threshold=threshold,
        top=threshold_top,
        basis=threshold_basis,
        exclude=bayesian if threshold_excludes_bayesian else None,
    )
    return bayesian, thresholded, seed_list(bayesian, thresholded)


# ----------------------------------------------------------------------------- list configs' features

LIST_FEATURES: dict = {
    "race": Value("string"),
    "rank": Value("int32"),
    "surname": Value("string"),
    "count": Value("int64"),
    **{column: Value("float64") for column in SHARE_COLUMNS.values()},
    "posterior": Value("float64"),
}
SEED_FEATURES: dict = {
    "race": Value("string"),
    "rank": Value("int32"),
    "surname": Value("string"),
    "methods": List(Value("string")),
    "bayesian_rank": Value("int32"),
    "threshold_rank": Value("int32"),
    "count": Value("int64"),
    **{column: Value("float64") for column in SHARE_COLUMNS.values()},
    "posterior": Value("float64"),
}
