"""`probes import --format talent-or-luck-csv` (`probes.attribution.release_import`): the inverse of `probes export`.

A model's `*_release` results, made by a run's session on the small synthetic release, are
exported at full precision in the release's CSV layout, imported into a new results folder and
compared with the originals row by row: every probability as written, bit for bit. The imported
folder is one that `analyze` reads (the release tables equal the original run's) and `publish`
accepts; a second import of the same files adds nothing; a bad cell is one line naming the
file, the row and the column, and nothing is written.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from analysis.attribution.release import METRIC_PERSONS, RELEASE_CONFIGS, option_matrices, person_probabilities
from analysis.export_files import ExportRequest, export
from analysis.pipeline import AnalysisOptions, analyze
from cli_fixture import one_line_error
from probes.cli import app
from probes.importer import ImportRequest, import_results
from runners.prompts import load_prompt_config
from runners.results import DATA_DIR, MANIFEST_NAME, key_folders, part_files, read_key_rows, read_manifest
from runners.results.check import validate_results
from runners.scoring.settings import resolve_scoring

runner = CliRunner()
MODEL = "org/model-a"
FORMAT = "talent-or-luck-csv"


@pytest.fixture(scope="module")
def imported(scored: dict[str, Path]) -> Path:
    out = scored["root"] / "imported"
    result = import_results(ImportRequest(scored["outputs"], FORMAT, scored["prompts"], MODEL, out))
    assert sorted(c.config for c in result.configs) == sorted(RELEASE_CONFIGS)
    assert all(c.added == c.rows > 0 and c.already == 0 for c in result.configs)
    return out


def _rows(results: Path, config: str):
    (folder,) = key_folders(results, config)
    return read_key_rows(folder).to_pandas().set_index("id")


def test_imported_rows_are_the_exported_rows(scored, imported) -> None:
    """Each config: the same ids and prompt hashes, and each probability the release's file holds, bit for bit:
    single actor cappr's as scored, actor-observer renormalised, actor-actor per person (half the mass each)."""
    path = str(scored["prompts"])
    prompts = {c: load_prompt_config(path, c).dataset.to_pandas().set_index("id") for c in RELEASE_CONFIGS}
    for config in RELEASE_CONFIGS:
        original, got = _rows(scored["results"], config), _rows(imported, config)
        assert sorted(got.index) == sorted(original.index)
        got = got.loc[original.index]
        assert (got["prompt_sha256"] == original["prompt_sha256"]).all()
        frame = prompts[config].loc[original.index].reset_index()
        frame["choice_probs"] = list(original["choice_probs"])
        keys, probs = option_matrices(frame)
        written = np.full(probs.shape, np.nan)
        for person, renormalise in METRIC_PERSONS[config].values():
            mine = person_probabilities(keys, probs, person, renormalise=renormalise)
            written = np.where(np.isnan(mine), written, mine)
        persons = len(METRIC_PERSONS[config])
        assert np.array_equal(np.stack(got["choice_probs"].to_numpy()), written / persons)
        if persons == 1:
            assert (got["chosen_index"] == original["chosen_index"]).all()
        assert not got["refused"].any()
        assert (got["model"] == MODEL).all() and (got["backend"] == f"import:{FORMAT}").all()
        assert got["model_revision"].str.fullmatch("imported-[0-9a-f]{64}").all()
        scoring = json.loads(got["scoring"].iloc[0])
        assert scoring["backend"] == f"import:{FORMAT}" and scoring["chat"] is False
        # the release's scorer: the dataset's protocol for these configs
        ours = {k: v for k, v in scoring.items() if k not in ("backend", "dtype", "chat")}
        assert ours == json.loads(_protocol_key(scored["prompts"], config))


def _protocol_key(prompts: Path, config: str) -> str:
    return resolve_scoring(load_prompt_config(str(prompts), config).protocol, None, None).settings.key()


def test_the_imported_folder_is_analysed_and_published_like_a_run(scored, imported) -> None:
    """`analyze` gives the imported run the original run's release tables; `publish`'s check finds nothing; the
    manifest records each file by its relative name and sha256, and no local path."""
    import hashlib

    options = AnalysisOptions.from_flags(n_permutations=10)
    tables = {
        name: analyze(scored["prompts"], [folder], options=options, figures=False).tables
        for name, folder in (("original", scored["results"]), ("imported", imported))
    }
    compared = [name for name in tables["original"] if name.startswith("attribution_release")]
    assert len(compared) >= 3
    for name in compared:
        a, b = tables["original"][name], tables["imported"][name]
        assert len(a) == len(b) > 0, name
        for column in ("mean", "n"):
            if column in a.columns:
                np.testing.assert_allclose(a[column].to_numpy(float), b[column].to_numpy(float), atol=1e-12)
    manifest = read_manifest(imported)
    assert validate_results(imported, manifest).problems == []
    text = (imported / MANIFEST_NAME).read_text() + (imported / "README.md").read_text()
    assert str(scored["root"]) not in text
    for run in manifest["runs"].values():
        record = run["imported"]
        assert record["format"] == FORMAT
        assert run["model_revision"] == f"imported-{record['digest']}"
        for entry in record["files"]:
            assert not Path(entry["path"]).is_absolute() and entry["path"].startswith("closed_ended/")
            assert hashlib.sha256((scored["outputs"] / entry["path"]).read_bytes()).hexdigest() == entry["sha256"]


def test_rounded_files_are_renormalised_per_person(scored, tmp_path) -> None:
    """The release wrote 2 decimals: each person's written values, divided by their sum (the analysis reads
    distributions), so the release's metrics keep their sign and order; the folder analyses."""
    rounded = export(ExportRequest(scored["results"], scored["prompts"], tmp_path / "outputs", decimals=2)).path
    out = tmp_path / "results"
    import_results(ImportRequest(rounded, FORMAT, scored["prompts"], MODEL, out))
    got = _rows(out, "actor_actor_release")
    probs = np.stack(got["choice_probs"].to_numpy())
    assert np.allclose(probs.sum(axis=1), 1.0, atol=1e-12)
    original = _rows(scored["results"], "actor_actor_release").loc[got.index]
    frame = load_prompt_config(str(scored["prompts"]), "actor_actor_release").dataset.to_pandas().set_index("id")
    frame = frame.loc[got.index].reset_index()
    frame["choice_probs"] = list(original["choice_probs"])
    keys, p = option_matrices(frame)
    for person in ("X", "Y"):
        written = np.round(person_probabilities(keys, p, person, renormalise=True), 2)
        mine = ~np.isnan(written)
        expected = written / np.nansum(written, axis=1, keepdims=True) / 2
        np.testing.assert_allclose(probs[mine], expected[mine], rtol=0, atol=1e-15)
    assert analyze(
        scored["prompts"], [out], options=AnalysisOptions.from_flags(n_permutations=10), figures=False
    ).tables


@pytest.mark.parametrize(
    ("cells", "decimals", "total"),
    [
        (("1", "1", "1", "1"), 0, 4.0),  # was stored as uniform
        (("0.5", "0", "0", "0"), 1, 0.5),  # was stored as certainty
        (("1e-300", "0.0", "0.0", "0.0"), 300, 1e-300),  # was stored as certainty
        (("0.25", "0.25", "0.25", "0.2"), 2, 0.95),  # more than 2 decimals' rounding explains
    ],
)
def test_a_row_whose_sum_its_printed_precision_does_not_explain_is_refused(
    scored, tmp_path, cells, decimals, total
) -> None:
    """Issue #69, finding 2: a row was divided by its sum whatever it summed to. Now only a sum within half a unit
    of the row's finest printed place per value (plus float noise) is a rounded distribution; any other row is
    one line naming the file, row and sum, and nothing is written."""
    import pandas as pd

    outputs = tmp_path / "outputs"
    shutil.copytree(scored["outputs"], outputs)
    target = sorted(p for p in outputs.rglob("*.csv") if "single_actor" in p.parts)[0]
    frame = pd.read_csv(target, dtype=str, keep_default_na=False)
    options = sorted(c for c in frame.columns if re.fullmatch(r"opt[0-9]_.+", c))
    assert len(options) == 4
    frame.loc[2, options] = list(cells)
    frame.to_csv(target, index=False)
    out = tmp_path / "imported"
    line = one_line_error(
        _import_cli(outputs, scored["prompts"], out),
        target.relative_to(outputs).as_posix(),
        "row 3",
        f"sum to {total!r}",
        f"printed to {decimals} decimal(s)",
    )
    assert "no distribution" in line
    assert not out.exists()


def test_a_row_its_rounding_explains_is_renormalised(scored, tmp_path) -> None:
    """0.33 x 3 + 0.0 sums to 0.99, within 4 x 0.005 of 1: a rounded distribution, kept as a third each."""
    import pandas as pd

    outputs = tmp_path / "outputs"
    shutil.copytree(scored["outputs"], outputs)
    target = sorted(p for p in outputs.rglob("*.csv") if "single_actor" in p.parts)[0]
    frame = pd.read_csv(target, dtype=str, keep_default_na=False)
    options = sorted(c for c in frame.columns if re.fullmatch(r"opt[0-9]_.+", c))
    frame.loc[2, options] = ["0.33", "0.33", "0.33", "0.0"]
    frame.to_csv(target, index=False)
    result = _import_cli(outputs, scored["prompts"], tmp_path / "imported")
    assert result.exit_code == 0, result.output
    got = _rows(tmp_path / "imported", "single_actor_release")
    probs = [sorted(p) for p in got["choice_probs"] if sorted(p)[0] == 0.0 and abs(sorted(p)[1] - 1 / 3) < 1e-12]
    assert len(probs) == 1 and abs(sum(probs[0]) - 1) < 1e-15


def test_a_header_that_names_a_column_twice_is_one_line(scored, tmp_path) -> None:
    """#69: pandas renamed the second of two `opt1_...` columns to `opt1_....1`, and the first was read silently."""
    outputs = tmp_path / "outputs"
    shutil.copytree(scored["outputs"], outputs)
    target = sorted(p for p in outputs.rglob("*.csv") if "single_actor" in p.parts)[0]
    lines = target.read_text(encoding="utf-8").split("\n")
    names = lines[0].split(",")
    option = next(n for n in names if re.fullmatch(r"opt[0-9]_.+", n))
    lines[0] = ",".join(option if n == "option_probs" else n for n in names)
    target.write_text("\n".join(lines), encoding="utf-8")
    out = tmp_path / "imported"
    rel = target.relative_to(outputs).as_posix()
    one_line_error(_import_cli(outputs, scored["prompts"], out), rel, "row 1", f"column {option!r}", "more than once")
    assert not out.exists()


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_second_import_of_the_same_files_adds_nothing(scored, imported) -> None:
    before = _tree(imported)
    parts = {c: [p.name for p in part_files(f)] for c in RELEASE_CONFIGS for f in key_folders(imported, c)}
    result = runner.invoke(
        app,
        ["import", str(scored["outputs"]), "--format", FORMAT, "--prompts", str(scored["prompts"]),
         "--model-name", MODEL, "--out", str(imported)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "0 rows imported (400 already there)" in result.output
    assert {c: [p.name for p in part_files(f)] for c in RELEASE_CONFIGS for f in key_folders(imported, c)} == parts
    after = _tree(imported)
    runs = lambda tree: json.loads(tree[MANIFEST_NAME])["runs"]  # noqa: E731
    assert runs(after) == runs(before)
    after.pop(MANIFEST_NAME), before.pop(MANIFEST_NAME)
    assert after == before  # the parts, key files and card, byte for byte


def test_a_subset_of_configs_imports_alone(scored, tmp_path) -> None:
    """A folder with the single-actor files only, and `--config` picking one config of a full folder."""
    subset = tmp_path / "outputs"
    shutil.copytree(scored["outputs"] / "closed_ended" / "single_actor", subset / "closed_ended" / "single_actor")
    out = tmp_path / "results"
    result = import_results(ImportRequest(subset, FORMAT, scored["prompts"], MODEL, out))
    assert [c.config for c in result.configs] == ["single_actor_release"]
    assert sorted(p.name for p in (out / DATA_DIR).iterdir()) == ["single_actor_release"]
    request = ImportRequest(
        scored["outputs"], FORMAT, scored["prompts"], MODEL, tmp_path / "r2", configs=["actor_observer_release"]
    )
    picked = import_results(request)
    assert [c.config for c in picked.configs] == ["actor_observer_release"]
    assert analyze(
        scored["prompts"], [out], options=AnalysisOptions.from_flags(n_permutations=10), figures=False
    ).tables


def _import_cli(source: Path, prompts: Path, out: Path, *extra: str):
    args = ["import", str(source), "--format", FORMAT, "--prompts", str(prompts), "--model-name", MODEL]
    return runner.invoke(app, [*args, "--out", str(out), *extra], env={"COLUMNS": "400"}, terminal_width=400)


def test_each_config_is_resolved_as_a_run_and_keyed_by_its_declared_protocol(scored, tmp_path, monkeypatch) -> None:
    """The import resolves each config through `resolve_protocol` (a run's resolution and checks), and its key's
    scoring is what the config's declared protocol resolves to (`resolve_scoring`, computed apart here)."""
    import probes.importer.resolve as resolve

    resolved: list[str] = []
    real = resolve.resolve_protocol
    monkeypatch.setattr(resolve, "resolve_protocol", lambda r, **k: resolved.append(r.config) or real(r, **k))
    result = import_results(ImportRequest(scored["outputs"], FORMAT, scored["prompts"], MODEL, tmp_path / "r"))
    assert sorted(resolved) == sorted(RELEASE_CONFIGS)
    key = json.loads(result.key.scoring)
    assert (key.pop("backend"), key.pop("dtype")) == (f"import:{FORMAT}", None)
    for config in RELEASE_CONFIGS:
        declared = resolve_scoring(load_prompt_config(str(scored["prompts"]), config).protocol, None, None)
        assert key == {**json.loads(declared.settings.key()), "chat": declared.chat}


def _with_protocol(prompts: Path, to: Path, config: str, change) -> Path:
    """A copy of the built prompts whose build manifest declares another protocol for `config`."""
    shutil.copytree(prompts, to)
    path = to / "build_manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest["protocols"], config)
    path.write_text(json.dumps(manifest, indent=2))
    return to


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (
            lambda protocols, c: protocols[c]["scoring"].update(length_normalize=False),
            "declares length_normalize=False in its protocol, but --format talent-or-luck-csv's answers were scored "
            "with length_normalize=True",
        ),
        (
            lambda protocols, c: protocols[c]["scoring"].update(tokenization="joint"),
            "declares tokenization='joint' in its protocol, but --format talent-or-luck-csv's answers were scored "
            "with tokenization='separate'",
        ),
        (lambda protocols, c: protocols.pop(c), "declares no scoring protocol"),
    ],
)
def test_files_scored_otherwise_than_the_config_s_protocol_are_one_line_and_nothing_is_written(
    scored, tmp_path, change, says
) -> None:
    """The key's scoring is the config's protocol: answers that followed another are refused, naming config and
    setting, before anything is written (the other configs' files were fine)."""
    prompts = _with_protocol(scored["prompts"], tmp_path / "prompts", "actor_observer_release", change)
    out = tmp_path / "imported"
    one_line_error(_import_cli(scored["outputs"], prompts, out), "config 'actor_observer_release'", says)
    assert not out.exists()


@pytest.mark.parametrize(
    ("column", "cell", "problem"),
    [
        ("opt2_lowability", "0.3x", "is not a probability"),
        ("opt2_lowability", "", "is not a probability"),
        ("opt2_lowability", "1.5", "is not a probability"),
        ("name", "Zed", "is not"),
        ("shuffled_options", "{'A': 'opt1_loweffort'}", "is not"),
    ],
)
def test_a_malformed_cell_is_one_line_naming_file_row_and_column_and_nothing_is_written(
    scored, tmp_path, column, cell, problem
) -> None:
    """The bad cell sits in the last file checked: every earlier file is fine, yet nothing is written."""
    import pandas as pd

    outputs = tmp_path / "outputs"
    shutil.copytree(scored["outputs"], outputs)
    files = sorted(p for p in outputs.rglob("*.csv") if "single_actor" in p.parts and "failure" in p.name)
    target = files[-1]
    frame = pd.read_csv(target, dtype=str, keep_default_na=False)
    frame.loc[6, column] = cell
    frame.to_csv(target, index=False)
    out = tmp_path / "imported"
    rel = target.relative_to(outputs).as_posix()
    one_line_error(_import_cli(outputs, scored["prompts"], out), rel, "row 7", f"column {column!r}", problem)
    assert not out.exists()


def test_bad_folders_and_flags_are_one_line(scored, tmp_path) -> None:
    out = tmp_path / "imported"
    (tmp_path / "empty").mkdir()
    one_line_error(_import_cli(tmp_path / "empty", scored["prompts"], out), "no closed_ended/ folder")
    one_line_error(_import_cli(tmp_path / "missing", scored["prompts"], out), "not a folder")
    stray = tmp_path / "stray" / "closed_ended" / "single_actor" / "race"
    stray.mkdir(parents=True)
    (stray / "x.csv").write_text("a\n1\n")
    one_line_error(_import_cli(tmp_path / "stray", scored["prompts"], out), "closed_ended/single_actor/race/x.csv")
    one_line_error(_import_cli(scored["outputs"], scored["prompts"], out, "--config", "single_actor"), "--config")
    one_line_error(_import_cli(scored["outputs"], scored["prompts"], out, "--source-model", "other"), "model-a")
    bad_format = runner.invoke(
        app, ["import", str(scored["outputs"]), "--format", "xml", "--prompts", str(scored["prompts"]),
              "--model-name", MODEL, "--out", str(out)],
    )  # fmt: skip
    one_line_error(bad_format, "--format")
    one_line_error(_import_cli(scored["outputs"], scored["prompts"], scored["outputs"]), "--out")
    assert not out.exists()


#: a known secret of no token shape (only its being held in $HF_TOKEN says what it is), and token shapes
HELD = "s3cret-held-in-env-42"
HF_SHAPED = "hf_" + "Ab1" * 12
SK_SHAPED = "sk-proj-" + "x9" * 12


@pytest.mark.parametrize(
    ("name", "secret", "says"),
    [
        (f"org/{HELD}", HELD, "holds a Hugging Face token held in $HF_TOKEN (not shown)"),
        (f"org/{HF_SHAPED}", HF_SHAPED, "looks like a Hugging Face token (not shown)"),
        (f"org/{SK_SHAPED}", SK_SHAPED, "looks like an OpenAI-style API key (not shown)"),
        (f"org/hf_\u200b{HF_SHAPED[3:]}", HF_SHAPED[3:], "looks like a Hugging Face token (not shown)"),
        ("org/m1\u200b", None, "invisible or unprintable character (U+200B)"),
        ("org/\u202eevil", None, "bidirectional control character (U+202E)"),
        ("\uff4f\uff52\uff47/m1", None, "not in NFKC form; give it as 'org/m1'"),
        ("org/", None, "has an empty part"),
        ("a//b", None, "has an empty part"),
        ("/m", None, "is a local path"),
        ("org/../../x", None, "has a '..' part"),
        ("./m", None, "has a '.' part"),
    ],
)
def test_a_model_name_that_would_leak_or_mislead_is_one_line(scored, tmp_path, monkeypatch, name, secret, says) -> None:
    """Issue #69: the name is in every row, folder name and printed line; a secret in it is never echoed."""
    monkeypatch.setenv("HF_TOKEN", HELD)
    out = tmp_path / "imported"
    args = ["import", str(scored["outputs"]), "--format", FORMAT, "--prompts", str(scored["prompts"])]
    result = runner.invoke(app, [*args, "--model-name", name, "--out", str(out)], terminal_width=400)
    line = one_line_error(result, "--model-name", says)
    for text in (result.stdout, result.stderr):
        assert secret is None or secret not in text, text
        assert not any(c in text for c in "\u200b\u202e"), text
    assert line.count("--model-name") == 1 and not out.exists()


def test_a_good_model_name_still_imports(scored, tmp_path) -> None:
    """Dots, dashes, underscores, spaces and brackets inside a part are a name, not a path step."""
    good = "Org-2/model_v1.5 (int8)"
    args = ["import", str(scored["outputs"]), "--format", FORMAT, "--prompts", str(scored["prompts"])]
    other = tmp_path / "other"
    args += ["--model-name", good, "--out", str(other), "--config", "actor_observer_release"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert set(_rows(other, "actor_observer_release")["model"]) == {good}


def test_a_linked_setting_folder_is_followed_and_a_link_back_up_is_one_line(scored, imported, tmp_path) -> None:
    """A setting folder that is a link (a layout assembled from links, not copies) was skipped without a word: the
    import read the other settings only. It is followed now, and the files keep their names in the layout, so the
    import is the same import as from the real folders (same revision: the same files). A link to a folder above
    it would never end: one line naming it."""
    outputs = tmp_path / "outputs"
    shutil.copytree(scored["outputs"], outputs)
    elsewhere = tmp_path / "elsewhere"
    (outputs / "closed_ended" / "single_actor").rename(elsewhere)
    (outputs / "closed_ended" / "single_actor").symlink_to(elsewhere, target_is_directory=True)
    result = import_results(ImportRequest(outputs, FORMAT, scored["prompts"], MODEL, tmp_path / "results"))
    assert sorted(c.config for c in result.configs) == sorted(RELEASE_CONFIGS)
    assert (
        result.key.model_revision
        == read_key_rows(key_folders(imported, "single_actor_release")[0])["model_revision"][0].as_py()
    )
    single = next(c for c in result.configs if c.config == "single_actor_release")
    assert all(name.startswith("closed_ended/single_actor/") for name in single.files)
    loop = outputs / "closed_ended" / "actor_observer" / "loop"
    loop.symlink_to(outputs / "closed_ended", target_is_directory=True)
    out = tmp_path / "again"
    one_line_error(_import_cli(outputs, scored["prompts"], out), "closed_ended/actor_observer/loop", "above it")
    assert not out.exists()
