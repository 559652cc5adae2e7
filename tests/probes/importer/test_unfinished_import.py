"""An import that did not finish is unfinished everywhere (issue #69, finding 3).

`probes import` writes as a run does (`runners.run.session.Session`), so an import killed or stopped
part way leaves key folders as a killed run does. Each is refused by `analyze`, `export` and
`publish` in one line naming the key folder and the command that finishes it, `probes import`
(never `probes run`, which cannot). The import records the configs it will write before it writes
any, so one killed between configs is not a complete import of fewer configs; the same import run
again finishes it and removes the temporary files the killed one left. A file with a header and
no rows is refused before anything is written.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from analysis.attribution.release import RELEASE_CONFIGS
from analysis.pipeline import AnalysisOptions, analyze
from cli_fixture import LIBRARY_PROGRESS, one_line_error
from probes import importer
from probes.cli import app
from probes.importer import ImportRequest, import_results
from promptgen.core.errors import ProbeError
from runners.results import DATA_DIR, key_folders, part_files, read_manifest
from runners.results.check import validate_results
from runners.run.session import Session

runner = CliRunner()
MODEL = "org/model-a"
FORMAT = "talent-or-luck-csv"
FAST = AnalysisOptions.from_flags(n_permutations=10)


class Killed(Exception):
    """Stands for the kill: raised where the import would have been killed."""


def _kill_at_finish(monkeypatch: pytest.MonkeyPatch, call: int) -> None:
    """The import is killed as it finishes its `call`-th config (counting from 1): that config's rows written, no
    run recorded; the configs before it finished."""
    finish, calls = Session.finish, []

    def finish_or_die(self: Session, **kwargs):
        calls.append(self.prompts.config)
        if len(calls) == call:
            raise Killed(self.prompts.config)
        return finish(self, **kwargs)

    monkeypatch.setattr(Session, "finish", finish_or_die)


def _problems(out: Path) -> list[str]:
    """What `probes publish` refuses the folder for (its check of a results folder)."""
    return validate_results(out, read_manifest(out)).problems


def test_a_key_an_interrupted_import_wrote_is_refused_naming_probes_import(scored, tmp_path, monkeypatch) -> None:
    """Killed after writing parts of its first config: `analyze` and `export` refused the key no import recorded
    only since #69, and publish's advice said `probes run`; each names the key folder and `probes import` now."""
    monkeypatch.setattr(importer, "FLUSH_EVERY", 50)  # parts are written as the rows come, as in a large import
    _kill_at_finish(monkeypatch, 1)
    out = tmp_path / "imported"
    with pytest.raises(Killed):
        import_results(ImportRequest(scored["outputs"], FORMAT, scored["prompts"], MODEL, out))
    (folder,) = (f for c in RELEASE_CONFIGS for f in key_folders(out, c))
    assert part_files(folder) and not read_manifest(out).get("runs")
    rel = folder.relative_to(out).as_posix()
    finish = f"rerun the same `probes import --format {FORMAT}` command"

    (problem,) = (p for p in _problems(out) if p.startswith(rel))
    assert finish in problem and "probes run" not in problem and f"delete {folder}" in problem
    args = {
        "analyze": ["analyze", "--prompts", str(scored["prompts"]), "--results", str(out), "--no-figures"],
        "export": ["export", str(out), "--prompts", str(scored["prompts"]), "--format", "jsonl"],
    }
    for command, given in args.items():
        written = tmp_path / command
        result = runner.invoke(app, [*given, "--out", str(written)], terminal_width=400)
        line = one_line_error(result, rel, finish, ignore=LIBRARY_PROGRESS)
        assert "probes run" not in line and not written.exists()


def test_an_import_killed_between_configs_is_unfinished_until_the_same_import_finishes(
    scored, tmp_path, monkeypatch
) -> None:
    """Killed after its first config finished and before the second wrote anything: the folder held one complete
    config and published as a complete import of it. The import recorded its configs before writing, so the
    finished config is unfinished too, until the same import, run again, finishes them all and removes the
    temporary files the killed one left."""
    _kill_at_finish(monkeypatch, 2)
    out = tmp_path / "imported"
    request = ImportRequest(scored["outputs"], FORMAT, scored["prompts"], MODEL, out)
    with pytest.raises(Killed):
        import_results(request)
    (done,) = (f for c in RELEASE_CONFIGS for f in key_folders(out, c))
    assert len(read_manifest(out)["runs"]) == 1  # the first config's run is recorded, as it finished
    (record,) = read_manifest(out)["imports"].values()
    assert sorted(record["configs"]) == sorted(RELEASE_CONFIGS)  # every config, recorded before any was written
    rel = done.relative_to(out).as_posix()
    (problem,) = _problems(out)
    assert problem.startswith(f"{rel}: ") and f"`probes import --format {FORMAT}`" in problem, problem
    with pytest.raises(ProbeError, match=rf"{rel}: .*`probes import --format {FORMAT}`"):
        analyze(scored["prompts"], [out], options=FAST, figures=False)
    assert read_manifest(out)["configs"][done.parent.name][done.name]["finished"] is False

    # what a kill in the middle of writing a part, and of the manifest, leaves
    left = [done / f".{part_files(done)[0].name}.k1ll3d00.tmp", out / ".results_manifest.json.k1ll3d00.tmp"]
    for path in left:
        path.write_bytes(b"half")
    monkeypatch.undo()
    result = import_results(request)
    assert sorted(c.config for c in result.configs) == sorted(RELEASE_CONFIGS)
    assert _problems(out) == []
    assert analyze(scored["prompts"], [out], options=FAST, figures=False).tables
    assert not [p for p in out.rglob("*.tmp")]
    configs = read_manifest(out)["configs"]
    assert {k["finished"] for keys in configs.values() for k in keys.values()} == {True}


def test_a_file_with_a_header_and_no_rows_is_refused_and_nothing_is_written(scored, tmp_path) -> None:
    """It imported as '0 rows' with exit 0 and left a run record of nothing."""
    outputs = shutil.copytree(scored["outputs"], tmp_path / "outputs")
    target = sorted(outputs.rglob("*.csv"))[0]
    target.write_text(target.read_text().splitlines()[0] + "\n")
    out = tmp_path / "imported"
    args = ["import", str(outputs), "--format", FORMAT, "--prompts", str(scored["prompts"]), "--model-name", MODEL]
    result = runner.invoke(app, [*args, "--out", str(out)], terminal_width=400)
    one_line_error(result, target.relative_to(outputs).as_posix(), "no rows", ignore=LIBRARY_PROGRESS)
    assert not out.exists() and not (tmp_path / DATA_DIR).exists()
