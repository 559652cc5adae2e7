"""Per-model pair curation (DESIGN section 5 step 7): selection, errors, and race probe -> pairs -> games on SmolLM2."""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from probes.cli import app
from promptgen.build import build
from promptgen.core.errors import ProbeError, SourceFormatError
from promptgen.trust_game.census import RACES
from promptgen.trust_game.curation import (
    LOGODDS_COLUMNS,
    PAIR_COLUMNS,
    check_pairs_table,
    check_slug,
    compute_logodds,
    curated_version,
    model_size_from_name,
    select_pairs,
)
from release_fixture import REPO
from runners.testmodel import MODEL_NAME

LO = list(LOGODDS_COLUMNS.values())
A, B, H, N, W = RACES  # Asian, Black, Hispanic, Native American, White


# ----------------------------------------------------------------------------- the selection, by hand


def _row(title: str, seed: str, surname: str, values: list[float]) -> dict[str, Any]:
    gender = {"Mr.": "male", "Ms.": "female"}[title]
    return {
        "title": title,
        "gender": gender,
        "seed_race": seed,
        "surname": surname,
        **dict(zip(LO, values, strict=True)),
    }


#: log-odds in RACES order (Asian, Black, Hispanic, Native American, White)
SYNTHETIC = [
    _row("Mr.", A, "Ang", [2.0, 0.5, 0.1, 0.0, 1.0]),  # candidate, spread 2.0 - 1.0 = 1.0
    _row("Mr.", A, "Bui", [1.5, 1.4, 0.0, 0.0, 0.0]),  # candidate, spread 0.1
    _row("Mr.", A, "Cho", [3.0, 0.0, 0.0, 0.0, 0.5]),  # candidate, spread 2.5
    _row("Mr.", A, "Dao", [0.2, 0.9, 0.0, 0.0, 0.0]),  # Black is largest: no candidate
    _row("Mr.", A, "Eng", [1.0, 1.0, 0.0, 0.0, 0.0]),  # tie for the largest: no candidate
    _row("Mr.", A, "Fong", [-1.0, -3.0, -2.0, -4.0, -1.5]),  # all negative, Asian largest: spread 0.5
    _row("Ms.", A, "Ang", [0.0, 1.0, 0.0, 0.0, 0.0]),  # the only Asian female: no candidate
    _row("Mr.", B, "Moss", [0.0, 0.8, 0.0, 0.0, 0.6]),  # in two seed lists, same scores:
    _row("Mr.", W, "Moss", [0.0, 0.8, 0.0, 0.0, 0.6]),  # a candidate for Black only
    _row("Mr.", H, "Vega", [0.0, 0.0, 0.5, 0.0, 0.0]),  # three equal spreads of 0.5:
    _row("Mr.", H, "Soto", [0.0, 0.0, 0.75, 0.25, 0.0]),  # ordered by surname, so Vega drops out
    _row("Mr.", H, "Ruiz", [0.25, 0.0, 0.75, 0.0, 0.0]),
    _row("Mr.", W, "Hill", [0.1, 0.0, 0.0, 0.0, 0.2]),  # spread 0.1
    _row("Ms.", W, "Hill", [0.0, 0.0, 0.0, 0.0, 0.3]),  # spread 0.3
]
# (race, gender, surname, rank, spread), checked by hand from the table above with per_gender = 2
EXPECTED = [
    (A, "male", "Cho", 1, 2.5),
    (A, "male", "Ang", 2, 1.0),
    (B, "male", "Moss", 1, 0.2),
    (H, "male", "Ruiz", 1, 0.5),
    (H, "male", "Soto", 2, 0.5),
    (W, "male", "Hill", 1, 0.1),
    (W, "female", "Hill", 1, 0.3),
]


def test_selection_on_a_hand_built_table():
    selection = select_pairs(pd.DataFrame(SYNTHETIC), per_gender=2)
    pairs = selection.pairs
    assert list(pairs.columns) == list(PAIR_COLUMNS)
    got = [(r.race, r.gender, r.surname, r.rank, round(r.spread, 12)) for r in pairs.itertuples()]
    assert got == EXPECTED
    assert (pairs["seed_race"] == pairs["race"]).all()
    assert list(pairs["title"]) == ["Mr."] * 6 + ["Ms."]
    cho = pairs.iloc[0]
    assert [cho[c] for c in LO] == [3.0, 0.0, 0.0, 0.0, 0.5]
    groups = {(g["race"], g["gender"]): g for g in selection.groups}
    assert len(groups) == 10
    assert groups[(A, "male")] == {"race": A, "gender": "male", "scored": 6, "candidates": 4, "kept": 2, "shortfall": 0}
    assert groups[(A, "female")] == {
        "race": A,
        "gender": "female",
        "scored": 1,
        "candidates": 0,
        "kept": 0,
        "shortfall": 2,
    }
    assert (groups[(W, "male")]["scored"], groups[(W, "male")]["candidates"]) == (2, 1)
    assert groups[(H, "male")]["candidates"] == 3 and groups[(N, "female")]["scored"] == 0
    assert sum(g["kept"] for g in selection.groups) == len(pairs) == 7
    assert {(g["race"], g["gender"]) for g in selection.shortfall} == set(groups) - {(A, "male"), (H, "male")}


def test_selection_ignores_row_order_and_never_pads():
    frame = pd.DataFrame(SYNTHETIC)
    first = select_pairs(frame, per_gender=2).pairs
    shuffled = select_pairs(frame.sample(frac=1.0, random_state=3).reset_index(drop=True), per_gender=2).pairs
    pd.testing.assert_frame_equal(first, shuffled)
    wide = select_pairs(frame, per_gender=17)
    assert len(wide.pairs) == 10  # every candidate (Bui, Fong and Vega now too), nothing else
    assert sorted(wide.pairs.loc[wide.pairs["race"] == A, "surname"]) == ["Ang", "Bui", "Cho", "Fong"]
    assert list(wide.pairs.loc[wide.pairs["race"] == A, "rank"]) == [1, 2, 3, 4]
    one = select_pairs(frame, per_gender=1).pairs
    assert list(one["surname"]) == ["Cho", "Moss", "Ruiz", "Hill", "Hill"]
    with pytest.raises(ProbeError, match="per-gender"):
        select_pairs(frame, per_gender=0)


def test_logodds_come_from_the_raw_logprobs_in_choice_types_order():
    prompts, results = [], []
    for k, race in enumerate(RACES):
        for title, types in (("Mr.", ["True", "False"]), ("Ms.", ["False", "True"])):
            item = f"race_probe/phi/{title}/white/hill/{race}"
            prompts.append(
                {"id": item, **_row(title, W, "Hill", [0] * 5), "race": race, "variant": "phi", "choice_types": types}
            )
            true, false = -1.0 - 0.1 * k, -2.0 + 0.2 * k
            lps = [true, false] if types[0] == "True" else [false, true]
            results.append({"id": item, "choice_logprobs": lps, "file": "part-0.parquet"})
    prompts = pd.DataFrame(prompts)[
        ["id", "title", "gender", "seed_race", "surname", "race", "variant", "choice_types"]
    ]
    results = pd.DataFrame(results)
    out = compute_logodds(prompts, results.iloc[:-1], variant="phi", prompts_file="p")
    assert (out.results, out.incomplete, len(out.table)) == (9, 1, 1)  # Ms. lacks White: no candidate
    row = out.table.iloc[0]
    assert row["title"] == "Mr."
    for k, column in enumerate(LO):
        true, false = -1.0 - 0.1 * k, -2.0 + 0.2 * k
        # independent check: the difference of the renormalised probabilities' logs
        p_true = math.exp(true) / (math.exp(true) + math.exp(false))
        assert row[column] == pytest.approx(math.log(p_true) - math.log(1 - p_true), abs=1e-12)
    with pytest.raises(ProbeError, match=r"variant 'base'.*variant\(s\) \['phi'\]"):
        compute_logodds(prompts, results, variant="base", prompts_file="p")
    stray = pd.concat([results, pd.DataFrame([{"id": "race_probe/x", "choice_logprobs": [0, 0], "file": "f.parquet"}])])
    with pytest.raises(ProbeError, match=re.escape("f.parquet: result id 'race_probe/x' is not an item of p")):
        compute_logodds(prompts, stray, variant="phi", prompts_file="p")
    broken = results.copy()
    broken.at[0, "choice_logprobs"] = [float("-inf"), -1.0]
    with pytest.raises(ProbeError, match=r"part-0\.parquet: result 'race_probe/phi/Mr\./white/hill/Asian'.*not finite"):
        compute_logodds(prompts, broken, variant="phi", prompts_file="p")


@pytest.mark.parametrize(
    ("column", "value", "where", "problem"),
    [
        ("race", "Martian", "row 2 (Mr. Moss), column 'race'", "unknown value 'Martian'"),
        ("gender", "other", "row 2 (Mr. Moss), column 'gender'", "unknown value 'other'"),
        ("title", "Ms.", "row 2 (Ms. Moss), column 'title'", "does not match `gender`"),
        ("seed_race", W, "row 2 (Mr. Moss), column 'seed_race'", "differs from `race`"),
        ("spread", 0.3, "row 2 (Mr. Moss), column 'spread'", "not the positive gap"),
        ("rank", 3, "row 2 (Mr. Moss), column 'rank'", "Black male: ranks [3] are not 1..n"),
        ("logodds_white", float("nan"), "row 2 (Mr. Moss), column 'logodds_*'", "finite"),
    ],
)
def test_a_broken_pairs_table_names_the_row_and_field(column, value, where, problem):
    pairs = select_pairs(pd.DataFrame(SYNTHETIC), per_gender=2).pairs
    check_pairs_table(pairs, file="pairs.parquet", per_gender=2)
    pairs.loc[2, column] = value
    with pytest.raises(SourceFormatError) as info:
        check_pairs_table(pairs, file="pairs.parquet", per_gender=2)
    assert (info.value.file, info.value.where) == ("pairs.parquet", where)
    assert problem in info.value.problem
    with pytest.raises(SourceFormatError, match="n <= 1"):
        check_pairs_table(select_pairs(pd.DataFrame(SYNTHETIC), per_gender=2).pairs, file="f", per_gender=1)


def test_names_versions_and_sizes():
    assert check_slug("smollm2_135m") == "smollm2_135m"
    for bad in ("SmolLM2", "a-b", "", "paper_llama2_13b", "_x"):
        with pytest.raises(ProbeError):
            check_slug(bad)
    assert model_size_from_name("HuggingFaceTB/SmolLM2-135M-Instruct") == 135e6
    assert model_size_from_name("/m/Llama-2-13b-hf") == 13e9 and model_size_from_name("Mistral-7B-v0.1") == 7e9
    assert model_size_from_name("microsoft/phi-2") is None
    assert model_size_from_name("/cache/smollm2-135m-instruct-q4_1/hf") == 135e6
    from promptgen.trust_game.curation import CuratedPairs

    pairs = select_pairs(pd.DataFrame(SYNTHETIC), per_gender=2).pairs
    one = CuratedPairs("m", pairs, {"per_gender": 2})
    version = curated_version("1.1.0", [one])
    assert version.startswith("1.1.0+pairs.") and len(version) == len("1.1.0+pairs.") + 8
    assert curated_version("1.1.0", [CuratedPairs("m", pairs.copy(), {"per_gender": 2})]) == version
    assert curated_version("1.1.0", [CuratedPairs("m", pairs, {"per_gender": 3})]) != version


def test_help_documents_every_flag():
    text = CliRunner().invoke(app, ["curate-pairs", "--help"], terminal_width=200).output
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    flags = ("--prompts", "--out", "--model-slug", "--per-gender", "--variant", "--key", "--recipe", "--sources")
    for flag in (*flags, "--cache-dir", "--offline", "--overwrite"):
        line = next(line for line in text.splitlines() if line.strip("│ *").startswith(flag + " "))
        assert len(line.split(flag, 1)[1].strip("│ ")) > 10, f"{flag} has no help text"
    assert "curate-pairs" in CliRunner().invoke(app, ["--help"]).output


# ----------------------------------------------------------------------------- end to end on SmolLM2

#: the race-probe items scored here: both titles x these seed surnames x all five races, plus three
#: races of Ms. Wood (an incomplete pair); ~28 items, a few seconds on 2 cores
SCORED = {(N, "Begay"), (N, "Locklear"), (W, "Wood")}


def _test_recipe(path: Path) -> Path:
    """The real recipe at a small scale: 2 + 1 surnames per race, the phi probe only, one games source.

    SmolLM2-135M's base-variant items cannot be scored as plain text (its tokenizer merges the
    prompt's final line break with `True`), so the probe is the phi variant. The tiny model reads
    nearly every surname as Native American, so the investors are the two Native American groups:
    the paper's White male and Asian female investors would get no curated pairs and no games.
    """
    recipe = yaml.safe_load((REPO / "builders" / "trust_game.yaml").read_text())
    p = recipe["parameters"]
    # DESIGN's literal threshold reading: at this scale it seeds Wood in both lists, the case the checks below use
    p["census"].update(bayesian_top=2, threshold_top=1)
    p["census"].update(threshold_basis="renormalised", threshold_excludes_bayesian=False)
    p["race_probe"]["variants"] = ["phi"]
    p["games"].update(
        models=["Llama2-13B"],
        variants=["base"],
        investors=[{"race": N, "gender": "male"}, {"race": N, "gender": "female"}],
    )
    p["probing"].update(models=["Llama2-13B"], variants=["base"])
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


@pytest.fixture(autouse=True, scope="module")
def _datasets_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A private datasets cache: its keys for local folders ignore the files' content."""
    import datasets

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path_factory.mktemp("hf-datasets"))
        yield


@pytest.fixture(scope="module")
def tiny(shared_sources: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tg-pairs")
    recipe = _test_recipe(root / "trust_game_small.yaml")
    dataset = build(str(recipe), out_dir=root / "v1", sources=shared_sources).path
    return {"recipe": recipe, "dataset": dataset, "sources": shared_sources}


@pytest.fixture(scope="module")
def race_results(tiny: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The subset `SCORED` of race_probe, scored by the project's run loop with the session SmolLM2."""
    from runners.backends.hf.backend import HFBackend
    from runners.model import identity as model_identity
    from runners.prompts import load_prompt_config
    from runners.run import local_driver
    from runners.run.request import RunRequest
    from runners_fixtures import load_folder, load_model, load_tokenizer

    prompts = load_prompt_config(str(tiny["dataset"]), "race_probe")
    ds = prompts.dataset
    keep = [
        k
        for k, (seed, surname, title, race) in enumerate(
            zip(ds["seed_race"], ds["surname"], ds["title"], ds["race"], strict=True)
        )
        if (seed, surname) in SCORED and not (surname == "Wood" and title == "Ms." and race in (N, W))
    ]
    prompts.dataset = ds.select(keep)
    out = tmp_path_factory.mktemp("results")
    backend = HFBackend(load_model(), model_id=str(load_folder()))
    revision = model_identity.locate(str(load_folder())).revision
    request = RunRequest(
        prompts.path, prompts.config, str(load_folder()), out, model_name=MODEL_NAME, chat=False, batch_size=16
    )
    local_driver.run_config(prompts, backend, load_tokenizer(), request, model_revision=revision)
    return out


def _curate(tiny: dict[str, Path], results: Path, prompts: Path, out: Path, *extra: str) -> Any:
    args = ["curate-pairs", str(results), "--prompts", str(prompts), "--out", str(out), "--recipe", str(tiny["recipe"])]
    return CliRunner().invoke(app, [*args, "--sources", str(tiny["sources"]), "--variant", "phi", *extra])


@pytest.fixture(scope="module")
def curated(tiny: dict[str, Path], race_results: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("v2")
    result = _curate(tiny, race_results, tiny["dataset"], out, "--model-slug", "smollm2_135m")
    assert result.exit_code == 0, result.output
    assert "warning: 10 of 10 groups have fewer than 17 pairs" in result.output
    return out / "trust-game-names"


def _config(folder: Path, config: str) -> pd.DataFrame:
    return pq.read_table(folder / "data" / config).to_pandas()


@pytest.mark.slow
def test_end_to_end_pairs_from_smollm2(curated: Path, tiny: dict[str, Path]):
    manifest = json.loads((curated / "build_manifest.json").read_text())
    before = json.loads((tiny["dataset"] / "build_manifest.json").read_text())
    assert manifest["version"].startswith(before["version"] + "+pairs.") and manifest["version"] != before["version"]
    assert manifest["fingerprint"] != before["fingerprint"]
    assert set(manifest["rows"]) == set(before["rows"]) | {"pairs_smollm2_135m", "games_smollm2_135m"}
    for config in before["rows"]:  # the rebuilt configs are the ones the results were scored on
        assert manifest["configs"][config]["files"] == before["configs"][config]["files"]
    pairs = _config(curated, "pairs_smollm2_135m")
    assert list(pairs.columns) == list(PAIR_COLUMNS)
    # the tiny model reads Begay and Locklear as Native American under both titles (Locklear more clearly),
    # and Mr. Wood not as White
    assert list(zip(pairs["race"], pairs["gender"], pairs["surname"], pairs["rank"], strict=True)) == [
        (N, "male", "Locklear", 1),
        (N, "male", "Begay", 2),
        (N, "female", "Locklear", 1),
        (N, "female", "Begay", 2),
    ]
    assert (pairs["spread"] > 0).all() and np.isfinite(pairs[LO].to_numpy()).all()
    record = manifest["parameters"]["curated_pairs"]["smollm2_135m"]
    assert (record["variant"], record["per_gender"], record["scoring"]["chat"]) == ("phi", 17, False)
    assert record["prompt_fingerprints"] == [before["fingerprint"]]
    sel = record["selection"]
    assert (sel["results"], sel["scored_pairs"], sel["incomplete_pairs"]) == (28, 5, 1)
    wood = next(g for g in sel["groups"] if (g["race"], g["gender"]) == (W, "male"))
    assert (wood["scored"], wood["candidates"], wood["kept"], wood["shortfall"]) == (1, 0, 0, 17)

    games = _config(curated, "games_smollm2_135m")
    # 2 investor groups x (the 2 Native American trustee groups) x (2 x 2 - 2 index pairs) = 8
    assert len(games) == 8 and set(games["pair_source"]) == {"pairs_smollm2_135m"}
    assert set(games["trustee_race"]) == {N} and (games["pair_index_investor"] != games["pair_index_trustee"]).all()
    assert games["id"].str.startswith("trust_game/base/smollm2_135m/native_american_").all()

    card = (curated / "README.md").read_text()
    assert "**Pairs curated on a small model are a pipeline check, not a scientific result.**" in card
    assert "A model of 135M parameters" in card and "**Shortfall:** 10 of 10 groups" in card
    assert "> **Pipeline check, not a scientific result:** SmolLM2-135M-Instruct-Q4_1 has about 135M" in card
    assert "config_name: pairs_smollm2_135m" in card and "config_name: games_smollm2_135m" in card
    assert "The cells are unequal" in card
    assert "| Native American male | 0 | 0 | 0 | 0 | 0 | 0 | 2 | 2 | 0 | 0 |" in card


@pytest.mark.slow
def test_games_of_the_curated_pairs_are_scored(curated: Path, tmp_path: Path):
    from runners_fixtures import load_folder

    out = tmp_path / "games"
    args = ["run", str(curated), "--config", "games_smollm2_135m", "--model", str(load_folder()), "--out", str(out)]
    result = CliRunner().invoke(app, [*args, "--no-chat", "--limit", "3", "-q"])
    assert result.exit_code == 0, result.output
    (key_dir,) = (out / "data" / "games_smollm2_135m").iterdir()
    rows = pd.concat([pq.read_table(p).to_pandas() for p in sorted(key_dir.glob("part-*.parquet"))])
    assert len(rows) == 3
    for row in rows.itertuples():
        assert 0.0 <= row.expected_value <= 10.0
        assert len(row.number_probs) == 11 and sum(row.number_probs) == pytest.approx(1.0, abs=1e-9)


@pytest.mark.slow
def test_a_second_curation_carries_the_first(curated: Path, tiny: dict[str, Path], race_results: Path, tmp_path):
    result = _curate(tiny, race_results, curated, tmp_path, "--model-slug", "smollm2_top1", "--per-gender", "1")
    assert result.exit_code == 0, result.output
    again = tmp_path / "trust-game-names"
    manifest = json.loads((again / "build_manifest.json").read_text())
    assert sorted(manifest["parameters"]["curated_pairs"]) == ["smollm2_135m", "smollm2_top1"]
    first = json.loads((curated / "build_manifest.json").read_text())
    for config in ("pairs_smollm2_135m", "games_smollm2_135m"):  # carried over byte for byte
        assert manifest["configs"][config]["files"] == first["configs"][config]["files"]
    top1 = _config(again, "pairs_smollm2_top1")
    assert list(top1["rank"]) == [1, 1] and set(top1["race"]) == {N}
    assert manifest["version"] != first["version"]


# ----------------------------------------------------------------------------- errors: one message, nothing written


def _fails(tiny: dict[str, Path], results: Path, prompts: Path, out: Path, *extra: str) -> str:
    result = _curate(tiny, results, prompts, out, *extra)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert not (out / "trust-game-names").exists()
    return " ".join(result.output.split())


@pytest.mark.slow
def test_results_without_race_probe(curated: Path, tiny: dict[str, Path], tmp_path: Path):
    (tmp_path / "empty" / "data" / "games_x").mkdir(parents=True)
    message = _fails(tiny, tmp_path / "empty", tiny["dataset"], tmp_path / "out")
    assert f"results folder {tmp_path / 'empty'} has no race_probe results" in message


@pytest.mark.slow
def test_result_ids_not_in_the_prompts(curated: Path, tiny: dict[str, Path], race_results: Path, tmp_path: Path):
    from runners.results import part_files

    results = tmp_path / "results"
    shutil.copytree(race_results, results)
    (key_dir,) = (results / "data" / "race_probe").iterdir()
    part = part_files(key_dir)[0]
    table = pq.read_table(part).to_pandas()
    table.loc[0, "id"] = "race_probe/phi/mr/white/smith/asian"
    pq.write_table(pa.Table.from_pandas(table, schema=pq.read_schema(part), preserve_index=False), part)
    message = _fails(tiny, results, tiny["dataset"], tmp_path / "out")
    assert f"{part}: result id 'race_probe/phi/mr/white/smith/asian' is not an item of" in message


@pytest.mark.parametrize(
    ("column", "value", "where", "problem"),
    [
        ("race", "Martian", "{folder}: row 1 (Mr. Begay), column 'race'", "unknown value 'Martian'"),
        ("surname", "Nobody", "pairs_smollm2_135m: row 1 (Mr. Nobody), column 'surname'", "not in this build's"),
    ],
)
@pytest.mark.slow
def test_a_broken_carried_pairs_config(curated: Path, tiny, race_results, tmp_path, column, value, where, problem):
    dataset = tmp_path / "broken"
    shutil.copytree(curated, dataset)
    (part,) = (dataset / "data" / "pairs_smollm2_135m").glob("*.parquet")
    table = pq.read_table(part)
    frame = table.to_pandas()
    frame.loc[1, column] = value
    pq.write_table(pa.Table.from_pandas(frame, schema=table.schema, preserve_index=False), part)
    message = _fails(tiny, race_results, dataset, tmp_path / "out", "--model-slug", "other")
    assert f"{where.format(folder=part.parent)}: {problem}" in message


@pytest.mark.slow
def test_other_bad_inputs(curated: Path, tiny: dict[str, Path], race_results: Path, tmp_path: Path):
    out = tmp_path / "out"
    base = _fails(tiny, race_results, tiny["dataset"], out, "--variant", "base")
    assert "no race-probe results for variant 'base'; the results hold variant(s) ['phi']" in base
    assert "may not start with 'paper'" in _fails(tiny, race_results, tiny["dataset"], out, "--model-slug", "paper_x")
    other = CliRunner().invoke(
        app, ["curate-pairs", str(race_results), "--prompts", str(tiny["dataset"]), "--out", str(out)]
    )
    assert other.exit_code == 1 and "was not built from the recipe" in " ".join(other.output.split())
    (out / "trust-game-names").mkdir(parents=True)
    assert "already exists" in _fails_existing(tiny, race_results, out)


@pytest.mark.slow
def test_letter_scoring_and_several_keys_are_refused(curated: Path, tiny: dict[str, Path], race_results, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(race_results, results)
    (key_dir,) = (results / "data" / "race_probe").iterdir()
    shutil.copytree(key_dir, key_dir.with_name("other-0123456789abcdef"))
    message = _fails(tiny, results, tiny["dataset"], tmp_path / "out")
    assert "holds several result keys" in message and "choose one with --key" in message
    key = json.loads((key_dir / "key.json").read_text())
    key["scoring"] = key["scoring"].replace('"choice_mode":"sentence"', '"choice_mode":"letter"')
    (key_dir / "key.json").write_text(json.dumps(key))
    message = _fails(tiny, results, tiny["dataset"], tmp_path / "out", "--key", key_dir.name)
    assert f"{key_dir / 'key.json'}: choice_mode 'letter'; curation needs sentence scoring" in message


def _fails_existing(tiny: dict[str, Path], results: Path, out: Path) -> str:
    result = _curate(tiny, results, tiny["dataset"], out)
    assert result.exit_code == 1 and not any((out / "trust-game-names").iterdir())
    return result.output


def test_spreads_of_no_pairs_is_empty_not_an_index_error():
    """A model for which no surname qualifies keeps no pairs; the pairs table is then empty (was an IndexError)."""
    from promptgen.trust_game.curation import LOGODDS_COLUMNS, spreads

    empty = pd.DataFrame({"seed_race": pd.Series([], dtype=object), **{c: [] for c in LOGODDS_COLUMNS.values()}})
    assert spreads(empty).empty
    one = pd.DataFrame({"seed_race": [RACES[0]], **{c: [float(i)] for i, c in enumerate(LOGODDS_COLUMNS.values())}})
    assert spreads(one).iloc[0] == pytest.approx(0.0 - (len(RACES) - 1))


@pytest.mark.slow
def test_no_qualifying_surname_is_one_clear_error(curated: Path, tiny: dict[str, Path], race_results, tmp_path):
    """When the model never gives a surname's seed race the largest log-odds, no pairs are kept: one clear error."""
    results = tmp_path / "results"
    shutil.copytree(race_results, results)
    for part in results.rglob("part-*.parquet"):
        table = pq.read_table(part)
        ids = table.column("id").to_pylist()
        lp = table.column("choice_logprobs").to_pylist()
        # P(True) tiny exactly when the asked race is the seed race (id: race_probe/variant/title/seed/surname/race)
        lp = [[-50.0, -1e-9] if i.split("/")[3] == i.split("/")[5] else row for i, row in zip(ids, lp, strict=True)]
        table = table.set_column(table.schema.get_field_index("choice_logprobs"), "choice_logprobs", pa.array(lp))
        pq.write_table(table, part)
    message = _fails(tiny, results, tiny["dataset"], tmp_path / "out")
    assert "no surname qualifies for any race" in message and "score more race_probe items" in message
    assert not (tmp_path / "out" / "trust-game-names").exists()
