"""A fourth probe registered from the tests alone: built, run with a third backend and analysed through the CLI.

Nothing in src/ names it. Its files are exactly those docs/EXTENDING.md lists:
`FILES` below. The backend is the tests' third one (tests/fake_backend.py), also a plugin. The
report's table is recomputed here from the rows the run wrote and the prompts the build wrote.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from fake_probe_check import check_scores_table

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
ASSETS = TESTS / "fake_probe_files"
#: every file of the fourth probe
FILES = (
    "tests/fake_probe.py",
    "tests/fake_probe_files/builders/fake_probe.yaml",
    "tests/fake_probe_files/cards/fake_probe.md.j2",
    "tests/fake_probe_files/sources/fake-statements/statements.csv",
)


def _probes(args: list[str | Path]) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PROBES_PLUGINS": "fake_probe,fake_backend",
        "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path]),
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }
    done = subprocess.run(
        [sys.executable, "-m", "probes.cli", *map(str, args)], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_the_fourth_probe_s_files_are_all_it_has() -> None:
    assert sorted(p.relative_to(REPO).as_posix() for p in ASSETS.rglob("*") if p.is_file()) == sorted(FILES[1:])
    named = subprocess.run(["git", "grep", "-l", "-e", "fake-probe", "-e", "fake_probe", "--", "src"], cwd=REPO)
    assert named.returncode == 1  # no file under src/ names it
    extending = (REPO / "docs" / "EXTENDING.md").read_text(encoding="utf-8")
    assert all(f"`{f}`" in extending for f in FILES)


@pytest.mark.slow  # three CLI processes that import the whole stack
def test_a_fourth_probe_is_built_run_and_analysed_by_registering_it(smollm2: Path, tmp_path: Path) -> None:
    _probes(["build", "fake-probe", "--sources", ASSETS / "sources", "--out", tmp_path / "datasets", "-q"])
    dataset = tmp_path / "datasets" / "fake-probe"
    assert "# Fake probe: agreement with statements about two groups" in (dataset / "README.md").read_text()
    run = ["run", dataset, "-c", "items", "-m", smollm2, "--model-name", "smol", "--backend", "fake-third"]
    _probes([*run, "--out", tmp_path / "results", "-q"])
    _probes(["analyze", "--prompts", dataset, "--results", tmp_path / "results", "--out", tmp_path / "report"])

    # the report's table, recomputed from the written prompts and result rows
    expected = check_scores_table(dataset, tmp_path / "results", tmp_path / "report")
    prompts = pq.read_table(sorted((dataset / "data" / "items").glob("*.parquet"))).to_pandas()
    assert 0 < expected.min() < 1

    # its report section: the headline first, then its figure and table
    html = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    section = next(s for s in re.split(r"<h2[^>]*>", html) if s.startswith("Fake probe"))
    assert (
        section.index("mean p(agree)") < section.index("fake_probe_agreement.png") < section.index("fake_probe_scores")
    )
    assert (tmp_path / "report" / "figures" / "fake_probe_agreement.png").is_file()

    # a sweep of it: its declared config scored with one load and analysed into the same table
    sweep = ["sweep", "-m", smollm2, "--model-name", "smol", "--backend", "fake-third", "--probe", "fake-probe"]
    _probes([*sweep, "--datasets", tmp_path / "datasets", "--out", tmp_path / "sweep", "--yes", "-q"])
    swept = pd.read_csv(tmp_path / "sweep" / "report" / "fake-probe" / "tables" / "fake_probe_scores.csv")
    assert swept.set_index("group")["p_agree"].to_dict() == pytest.approx(expected.to_dict(), abs=1e-12)

    # its own command, declared by its spec, is a command of `probes`
    counted = _probes(["fake-groups", dataset]).stdout.split()
    assert dict(zip(counted[::2], map(int, counted[1::2]), strict=True)) == prompts["group"].value_counts().to_dict()

    # its release format: another team's answers, imported and analysed like a run of ours
    answers = tmp_path / "release" / "answers.csv"
    answers.parent.mkdir()
    p_yes = [round(0.1 + 0.15 * k, 2) for k in range(len(prompts))]
    pd.DataFrame({"id": prompts["id"], "p_yes": p_yes, "p_no": [round(1 - p, 2) for p in p_yes]}).to_csv(
        answers, index=False
    )
    imported = tmp_path / "imported"
    release = ["import", answers.parent, "--format", "fake-release", "--prompts", dataset, "--model-name", "team/m"]
    _probes([*release, "--out", imported])
    _probes(["analyze", "--prompts", dataset, "--results", imported, "--out", tmp_path / "report2", "--no-figures"])
    table = pd.read_csv(tmp_path / "report2" / "tables" / "fake_probe_scores.csv").set_index("group")
    expected = prompts.assign(p_yes=p_yes).groupby("group")["p_yes"].mean()  # TYPES: the first choice agrees
    assert table["p_agree"].to_dict() == pytest.approx(expected.to_dict(), abs=1e-12)

    # its own analysis option, a flag of `probes analyze` (`FakeOptions`), applied and recorded in the report
    rounded = ["analyze", "--prompts", dataset, "--results", imported, "--out", tmp_path / "report3", "--no-figures"]
    _probes([*rounded, "--fake-round", "0"])
    table = pd.read_csv(tmp_path / "report3" / "tables" / "fake_probe_scores.csv").set_index("group")
    assert table["p_agree"].to_dict() == expected.round(0).to_dict() != expected.to_dict()
    assert "Fake probe: <code>--fake-round</code> 0" in (tmp_path / "report3" / "report.html").read_text("utf-8")

    # its export format, the default for its results: the agreement table, for another tool
    _probes(["export", imported, "--prompts", dataset, "--out", tmp_path / "exported"])
    exported = pd.read_csv(tmp_path / "exported" / "agreement.csv").set_index("group")
    assert exported["p_agree"].to_dict() == pytest.approx(expected.to_dict(), abs=1e-12)
