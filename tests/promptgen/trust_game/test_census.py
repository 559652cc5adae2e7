"""Census surname lists (DESIGN section 5, steps 1-6), against hand computations and the real table."""

from __future__ import annotations

import zipfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from promptgen.core.errors import SourceFormatError
from promptgen.trust_game.census import (
    CENSUS_COLUMNS,
    LIST_COLUMNS,
    PCT_COLUMNS,
    RACES,
    SHARE_COLUMNS,
    bayesian_ranking,
    compute_lists,
    impute_suppressed,
    load_census,
    posterior_name_given_race,
    race_given_name,
    seed_list,
    threshold_ranking,
)

HEADER = ",".join(CENSUS_COLUMNS)
# columns after count: prop100k, cum_prop100k, pctwhite, pctblack, pctapi, pctaian, pct2prace, pcthispanic
RAW_ROWS = [
    "SMITH,1,2442977,828.19,828.19,70.9,23.11,0.5,0.89,2.19,2.4",  # nothing suppressed
    "NGUYEN,38,437645,148.36,12345.67,0.93,0.11,96.47,0.03,1.83,0.63",
    "ONESUP,500,5000,1.7,20000.1,50.00,30.00,(S),5.00,5.00,4.00",  # one (S): gets 100 - 94 = 6
    "DORIOTT,160975,100,0.03,90063.03,89.00,0.00,(S),0.00,5.00,(S)",  # two (S): 3.00 each
    "FOURSUP,160976,100,0.03,90063.06,90.00,(S),(S),(S),2.00,(S)",  # four (S): 2.00 each
    "ROUNDUP,160977,100,0.03,90063.09,60.01,20.00,20.01,(S),0.00,0.00",  # known 100.02: (S) gets 0, not -0.02
    "ALL OTHER NAMES,0,29312001,9936.97,100000,66.65,8.53,7.97,0.86,2.32,13.67",
]


def write_raw(tmp_path: Path, rows: list[str] = RAW_ROWS, header: str = HEADER, name: str = "raw.csv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def imputed_row(frame: pd.DataFrame, name: str) -> dict[str, float]:
    return frame.set_index("name").loc[name, list(PCT_COLUMNS)].to_dict()


# ----------------------------------------------------------------------------- step 1: reading and imputation


def test_suppressed_shares_get_equal_parts_of_the_remainder(tmp_path):
    census = load_census(write_raw(tmp_path))
    assert census["pctapi"].isna().sum() == 3 and census.isna().sum().sum() == 8
    imputed = impute_suppressed(census)
    assert not imputed[list(PCT_COLUMNS)].isna().any().any()
    expected = {
        "ONESUP": {"pctwhite": 50, "pctblack": 30, "pctapi": 6, "pctaian": 5, "pct2prace": 5, "pcthispanic": 4},
        "DORIOTT": {"pctwhite": 89, "pctblack": 0, "pctapi": 3, "pctaian": 0, "pct2prace": 5, "pcthispanic": 3},
        "FOURSUP": {"pctwhite": 90, "pctblack": 2, "pctapi": 2, "pctaian": 2, "pct2prace": 2, "pcthispanic": 2},
        "ROUNDUP": {"pctwhite": 60.01, "pctblack": 20, "pctapi": 20.01, "pctaian": 0, "pct2prace": 0, "pcthispanic": 0},
        "SMITH": {
            "pctwhite": 70.9,
            "pctblack": 23.11,
            "pctapi": 0.5,
            "pctaian": 0.89,
            "pct2prace": 2.19,
            "pcthispanic": 2.4,
        },
    }
    for name, shares in expected.items():
        assert imputed_row(imputed, name) == pytest.approx(shares, abs=1e-9), name
    # typed columns survive the text reading
    assert imputed.set_index("name").loc["SMITH", "count"] == 2442977
    assert imputed["rank"].dtype == np.int64 and imputed["count"].dtype == np.int64


def test_raw_doriott_imputes_to_the_shared_imputed_copy(tmp_path, shared_sources):
    """The shared parquet was imputed upstream with the same rule: our imputation of the raw row agrees."""
    ours = imputed_row(impute_suppressed(load_census(write_raw(tmp_path))), "DORIOTT")
    theirs = load_census(shared_sources / "census-surnames/census_2010.parquet")
    assert imputed_row(theirs, "DORIOTT") == pytest.approx(ours, abs=1e-9)


def test_csv_zip_and_parquet_read_the_same_table(tmp_path):
    csv = write_raw(tmp_path)
    archive = tmp_path / "names.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(csv, "Names_2010Census.csv")
    # a typed copy marks suppressed shares as null, like the text `(S)`
    parquet = tmp_path / "census.parquet"
    load_census(csv).to_parquet(parquet)
    frames = [load_census(p) for p in (csv, archive, parquet)]
    for other in frames[1:]:
        pd.testing.assert_frame_equal(frames[0], other)
    assert list(frames[0].columns) == list(CENSUS_COLUMNS)


@pytest.mark.parametrize(
    ("header", "rows", "where", "problem"),
    [
        (HEADER.replace(",pctaian", ""), [r.replace(",0.89,", ",") for r in RAW_ROWS[:1]], "header", "pctaian"),
        (
            HEADER,
            [RAW_ROWS[0], RAW_ROWS[1].replace(",96.47,", ",n/a,")],
            "line 3 (name 'NGUYEN'), column 'pctapi'",
            "'n/a'",
        ),
        (
            HEADER,
            [RAW_ROWS[0], RAW_ROWS[2].replace(",5000,", ",(S),")],
            "line 3 (name 'ONESUP'), column 'count'",
            "'(S)'",
        ),
        (HEADER, [RAW_ROWS[0], "OVERFULL,2,10,1,2,90.00,20.00,(S),0,0,0"], "line 3 (name 'OVERFULL')", "110.00"),
        (HEADER, ["SHORTED,2,10,1,2,80.00,10.00,0,0,0,0"], "line 2 (name 'SHORTED')", "not 100"),
        (HEADER, [RAW_ROWS[0], RAW_ROWS[0]], "line 3 (name 'SMITH'), column 'name'", "twice"),
        (HEADER, ["NEG,2,10,1,2,110.00,-10.00,0,0,0,0"], "line 2 (name 'NEG'), column 'pctwhite'", "outside 0-100"),
    ],
)
def test_malformed_census_rows_are_clear_errors(tmp_path, header, rows, where, problem):
    path = write_raw(tmp_path, rows, header)
    with pytest.raises(SourceFormatError) as info:
        load_census(path, display_name="census-surnames/raw.csv")
    assert info.value.file == "census-surnames/raw.csv"
    assert where in info.value.where
    assert problem in str(info.value)


def test_zip_without_one_csv_and_unknown_extension_are_errors(tmp_path):
    archive = tmp_path / "names.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("README.txt", "no table here")
    with pytest.raises(SourceFormatError, match=r"exactly one \.csv member"):
        load_census(archive)
    with pytest.raises(SourceFormatError, match="unknown extension"):
        load_census(tmp_path / "names.xlsx")


# ----------------------------------------------------------------------------- steps 2-6 on a toy table

# name, count, pctwhite, pctblack, pctapi, pctaian, pct2prace, pcthispanic
TOY = [
    ("ALPHA", 600, 50, 50, 0, 0, 0, 0),
    ("BRAVO", 300, 100, 0, 0, 0, 0, 0),
    ("CHARLIE", 100, 0, 0, 40, 0, 20, 40),  # pct2prace is dropped: Asian 1/2, Hispanic 1/2
    ("DELTA", 1000, 25, 25, 0, 25, 0, 25),
    ("ALL OTHER NAMES", 5000, 20, 20, 20, 20, 0, 20),
]


def toy_census() -> pd.DataFrame:
    frame = pd.DataFrame(TOY, columns=["name", "count", *PCT_COLUMNS])
    return frame.assign(rank=range(len(frame)), prop100k=0.0, cum_prop100k=0.0)[list(CENSUS_COLUMNS)]


def test_posterior_matches_a_hand_computation():
    """Pr(name | race) by hand, in units of people (the 1 / sum(count) of Pr(name) cancels):

    White: ALPHA 0.5*600 = 300, BRAVO 300, DELTA 0.25*1000 = 250; total 850
    Black: ALPHA 300, DELTA 250; total 550.  Asian: CHARLIE 0.5*100 = 50.
    Hispanic: CHARLIE 50, DELTA 250; total 300.  Native American: DELTA 250.
    """
    shares = race_given_name(impute_suppressed(toy_census()))
    assert list(shares["surname"]) == ["Alpha", "Bravo", "Charlie", "Delta"]
    assert shares.loc[2, SHARE_COLUMNS["Asian"]] == pytest.approx(0.5)
    posterior = posterior_name_given_race(shares)
    F = Fraction
    expected = {
        "Asian": [0, 0, F(1), 0],
        "Black": [F(6, 11), 0, 0, F(5, 11)],
        "Hispanic": [0, 0, F(1, 6), F(5, 6)],
        "Native American": [0, 0, 0, F(1)],
        "White": [F(6, 17), F(6, 17), 0, F(5, 17)],
    }
    for k, race in enumerate(RACES):
        assert posterior.iloc[:, k].tolist() == pytest.approx([float(x) for x in expected[race]], abs=1e-15), race
    # each name goes to its highest posterior: ALPHA Black (6/11 > 6/17), DELTA Native American (1 > 5/6)
    ranked = bayesian_ranking(shares, top=300)
    assert ranked[["race", "rank", "surname"]].values.tolist() == [
        ["Asian", 1, "Charlie"],
        ["Black", 1, "Alpha"],
        ["Native American", 1, "Delta"],
        ["White", 1, "Bravo"],
    ]
    assert ranked["posterior"].tolist() == pytest.approx([1, 6 / 11, 1, 6 / 17])
    assert list(ranked.columns) == list(LIST_COLUMNS)


def test_ties_and_cuts_do_not_depend_on_row_order():
    rows = [(f"N{i}", 100, 100, 0, 0, 0, 0, 0) for i in (3, 1, 2)] + [("BIG", 1000, 100, 0, 0, 0, 0, 0)]
    frame = pd.DataFrame(rows, columns=["name", "count", *PCT_COLUMNS])
    frame = frame.assign(rank=1, prop100k=0.0, cum_prop100k=0.0)[list(CENSUS_COLUMNS)]
    shares = race_given_name(frame)
    white = bayesian_ranking(shares, top=3).query("race == 'White'")
    # equal posteriors (N1..N3, 100/1300 each) are ordered by surname, below BIG (1000/1300); top 3 cuts N3
    assert white[["rank", "surname"]].values.tolist() == [[1, "Big"], [2, "N1"], [3, "N2"]]
    shuffled = race_given_name(frame.iloc[[3, 2, 0, 1]])
    pd.testing.assert_frame_equal(bayesian_ranking(shuffled, top=3), bayesian_ranking(shares, top=3))
    # equal counts are ordered by surname too
    thr = threshold_ranking(shares, threshold=0.96, top=3)
    assert thr[["race", "rank", "surname"]].values.tolist() == [
        ["White", 1, "Big"],
        ["White", 2, "N1"],
        ["White", 3, "N2"],
    ]


def test_threshold_bases_and_exclusion():
    # share of White: renormalised 90/95 = 0.947 passes 0.9; the Census percentage 0.90 passes too; 89/94 fails census
    rows = [("KEEP", 500, 90, 5, 0, 0, 5, 0), ("DROP", 400, 89, 5, 0, 0, 6, 0), ("TOP", 900, 100, 0, 0, 0, 0, 0)]
    frame = pd.DataFrame(rows, columns=["name", "count", *PCT_COLUMNS])
    shares = race_given_name(frame.assign(rank=1, prop100k=0.0, cum_prop100k=0.0)[list(CENSUS_COLUMNS)])
    renorm = threshold_ranking(shares, threshold=0.9, top=10)
    census = threshold_ranking(shares, threshold=0.9, top=10, basis="census")
    assert renorm["surname"].tolist() == ["Top", "Keep", "Drop"]  # 89/94 = 0.947
    assert census["surname"].tolist() == ["Top", "Keep"]
    exclude = pd.DataFrame({"race": ["White"], "surname": ["Top"]})
    assert threshold_ranking(shares, threshold=0.9, top=1, exclude=exclude)["surname"].tolist() == ["Keep"]
    with pytest.raises(ValueError, match="basis"):
        threshold_ranking(shares, threshold=0.9, top=1, basis="raw")


def test_seed_list_is_the_union_with_methods():
    def ranking(race, names):
        return pd.DataFrame(
            {
                "race": race,
                "rank": range(1, len(names) + 1),
                "surname": names,
                "count": [10 * (len(names) - i) for i in range(len(names))],
                **{c: 0.2 for c in SHARE_COLUMNS.values()},
                "posterior": 0.1,
            }
        )

    bayes = pd.concat([ranking("Asian", ["Lee", "Kim"]), ranking("White", ["Miller"])])
    thresh = pd.concat([ranking("Asian", ["Kim", "Patel"]), ranking("Black", ["Smalls"])])
    seed = seed_list(bayes, thresh)
    assert seed[["race", "rank", "surname"]].values.tolist() == [
        ["Asian", 1, "Lee"],
        ["Asian", 2, "Kim"],
        ["Asian", 3, "Patel"],
        ["Black", 1, "Smalls"],
        ["White", 1, "Miller"],
    ]
    assert seed["methods"].tolist() == [
        ["bayesian"],
        ["bayesian", "threshold"],
        ["threshold"],
        ["threshold"],
        ["bayesian"],
    ]
    assert seed["bayesian_rank"].tolist() == [1, 2, pd.NA, pd.NA, 1]
    assert seed["threshold_rank"].tolist() == [pd.NA, 1, 2, 1, pd.NA]


# ----------------------------------------------------------------------------- the real table

# the paper's Table 1, first entry per race (surname, 2010 Census count)
TABLE1_FIRST = {
    "Asian": ("Nguyen", 437_645),
    "Black": ("Williams", 1_625_252),
    "Hispanic": ("Garcia", 1_166_120),
    "Native American": ("Begay", 17_553),
    "White": ("Miller", 1_161_437),
}


@pytest.fixture(scope="module")
def real(shared_sources):
    census = load_census(shared_sources / "census-surnames/census_2010.parquet")
    shares = race_given_name(impute_suppressed(census))
    return census, shares, *compute_lists(shares, bayesian_top=300, threshold=0.9, threshold_top=100)


def test_real_table_shape(real):
    census, shares, *_ = real
    assert len(census) == 162_253 and census["name"].iloc[-1] == "ALL OTHER NAMES"
    assert not census[list(PCT_COLUMNS)].isna().any().any()  # the shared copy is already imputed
    pd.testing.assert_frame_equal(impute_suppressed(census), census)
    assert len(shares) == 162_252 and "All Other Names" not in set(shares["surname"])
    assert np.allclose(shares[list(SHARE_COLUMNS.values())].sum(axis=1), 1.0)
    assert shares.set_index("name").loc["OBRIEN", "surname"] == "Obrien"
    assert shares["surname"].str.fullmatch(r"[A-Z][a-z]+").all()


def test_real_bayesian_top_entries_match_table_1(real):
    _, shares, bayesian, _, _ = real
    top3 = {race: group.head(3)[["surname", "count"]].values.tolist() for race, group in bayesian.groupby("race")}
    print("bayesian top 3:", top3)
    for race, (surname, count) in TABLE1_FIRST.items():
        assert top3[race][0] == [surname, count]
    assert top3 == {
        "Asian": [["Nguyen", 437645], ["Lee", 693023], ["Kim", 262352]],
        "Black": [["Williams", 1625252], ["Johnson", 1932812], ["Smith", 2442977]],
        "Hispanic": [["Garcia", 1166120], ["Rodriguez", 1094924], ["Hernandez", 1043281]],
        "Native American": [["Begay", 17553], ["Locklear", 19716], ["Yazzie", 14949]],
        "White": [["Miller", 1161437], ["Baker", 419586], ["Murphy", 308417]],
    }
    # independent recomputation of the whole ranking with plain numpy
    pct = shares[[f"share_{r.lower().replace(' ', '_')}" for r in RACES]].to_numpy()
    joint = pct * shares["count"].to_numpy()[:, None]
    post = joint / joint.sum(axis=0)
    best = post.argmax(axis=1)
    for k, race in enumerate(RACES):
        idx = np.flatnonzero(best == k)
        order = idx[np.argsort(-post[idx, k], kind="stable")][:300]
        got = bayesian[bayesian["race"] == race]
        assert got["surname"].tolist() == shares["surname"].to_numpy()[order].tolist()
        assert got["posterior"].to_numpy() == pytest.approx(post[order, k], rel=1e-12)
        assert got["rank"].tolist() == list(range(1, 301))
    assert bayesian["surname"].is_unique  # one race per surname


def test_real_threshold_list(real):
    _, shares, _, threshold, seed = real
    assert threshold.groupby("race").size().to_dict() == dict.fromkeys(RACES, 100)
    top3 = {race: group.head(3)["surname"].tolist() for race, group in threshold.groupby("race")}
    print("threshold top 3:", top3)
    assert top3["Native American"] == ["Begay", "Yazzie", "Benally"]
    for race, group in threshold.groupby("race"):
        column = SHARE_COLUMNS[race]
        assert (group[column] >= 0.9).all()
        assert group["count"].is_monotonic_decreasing
        # nothing more frequent over the threshold was skipped
        others = shares[(shares[column] >= 0.9) & ~shares["surname"].isin(group["surname"])]
        assert others["count"].max() <= group["count"].min()
    sizes = seed.groupby("race").size().to_dict()
    for race in RACES:
        b = set(real[2].query("race == @race")["surname"])
        t = set(threshold.query("race == @race")["surname"])
        assert sizes[race] == len(b | t)
        assert set(seed.query("race == @race")["surname"]) == b | t
    assert sizes == {"Asian": 300, "Black": 399, "Hispanic": 300, "Native American": 375, "White": 302}
