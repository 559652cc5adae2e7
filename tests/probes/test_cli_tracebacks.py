"""Inputs and outputs that used to end in a traceback or destroy data, through the real command line.

`test_one_line_error` is one table: each `Case` builds its scenario in a fresh folder (a builder
function returning the command line and a check that nothing was written) and the command must
fail with exit code 1 (2 for a missing extra), one `error:` line, no traceback. To add a case,
append a `Case` to `CASES`.

The data-loss tests check the one output guard (`promptgen.core.outputs`): no command writes
into or replaces one of its inputs, another command's output or a foreign folder, even with
`--overwrite`, and an empty `--out` (the current folder) is refused.
"""

from __future__ import annotations

import copy
import errno
import hashlib
import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from datasets import Features, Value
from typer.testing import CliRunner

import runners.results as res
from cli_fixture import unwritable_out
from envent_fixture import write_recipe as write_envent_recipe
from envent_fixture import write_sources as write_envent_sources
from loop_items import FEATURES, ITEMS, write_loop_prompts
from probes.cli import app
from promptgen.build import build
from release_fixture import write_recipe, write_release
from runners_fixtures import number_items, require_extra, tiny_llama_folder, write_prompt_folder

runner = CliRunner()
EMPATHY_CONFIG = "religion_P0S0T0"
#: progress lines of libraries that load data or models (they go to stderr too)
_PROGRESS = re.compile(r"^(WARNING |Generating test split|Loading weights|Writing model shards)")


def _lines(result) -> list[str]:
    text = re.sub(r"\x1b\[[0-9;]*m", "", result.output)
    return [line for line in text.splitlines() if line.strip() and not _PROGRESS.match(line.strip())]


def _one_error_line(result, exit_codes: tuple[int, ...] = (1, 2)) -> str:
    """Exit 1 or 2, no traceback, exactly one `error:` line; returns it."""
    assert result.exit_code in exit_codes, result.output
    assert "Traceback" not in result.output, result.output
    lines = _lines(result)
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def _tree(root: Path) -> dict[str, str]:
    """Every file under `root` (hidden ones too) -> its sha256: a folder's exact content."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


# ----------------------------------------------------------------------------- shared inputs


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny number-item prompt folder, a tiny model, and an empathy dataset with one model's results."""
    require_extra("hf")
    root = tmp_path_factory.mktemp("inputs")
    prompts = write_prompt_folder(root / "prompts", number_items(4))
    emp_root = root / "emp"
    emp_root.mkdir()
    empathy = build(
        str(write_envent_recipe(emp_root / "r.yaml")),
        out_dir=emp_root / "out",
        sources=write_envent_sources(emp_root / "src"),
        max_events=12,
    ).path
    results = root / "results"
    _write_results(empathy, results, EMPATHY_CONFIG, "org/m", '{"choice_mode":"sentence"}')
    return {"prompts": prompts, "model": tiny_llama_folder("float32"), "empathy": empathy, "results": results}


def _write_results(dataset: Path, results: Path, config: str, model: str, scoring: str) -> None:
    """Expected values for every item of an empathy config under one key, as `probes run` records them."""
    ids = pq.read_table(dataset / "data" / config, columns=["id"]).column("id").to_pylist()
    key = res.ResultKey(model, "rev", scoring)
    folder = res.key_dir(results, config, key)
    res.write_key_file(folder, key)
    rng = np.random.default_rng(len(scoring))
    rows = [{"id": i, **key.as_dict(), "expected_value": float(50 + rng.normal(0, 5)), "refused": False} for i in ids]
    res.write_part(folder, (0, 1), rows)
    run = {"prompt_dataset": {"config": config}, "model": model, "key": key.slug, "backend": "test", "items": len(ids)}
    res.update_manifest(results, f"{config}/{key.slug}/shard-0of1", run)


def _analyze(inputs: dict[str, Path], out: str | Path, *extra: str, results: Path | None = None) -> list[str]:
    prompts, results = inputs["empathy"], results or inputs["results"]
    args = ["analyze", "--prompts", str(prompts), "--results", str(results), "--out", str(out)]
    return [*args, "--config", EMPATHY_CONFIG, "--permutations", "50", "--no-figures", *extra]


def _run(inputs: dict[str, Path], out: str | Path, *extra: str, dataset: str | Path | None = None) -> list[str]:
    dataset = dataset or inputs["prompts"]
    args = ["run", str(dataset), "-c", "items", "-m", str(inputs["model"]), "--out", str(out), "--no-chat", "-q"]
    return [*args, *extra]


def _plan(inputs: dict[str, Path], *extra: str, dataset: Path | None = None) -> list[str]:
    return ["plan", str(dataset or inputs["prompts"]), "-m", str(inputs["model"]), "-q", *extra]


# ----------------------------------------------------------------------------- one line, nothing written

#: a builder gets (inputs, a fresh folder, monkeypatch) and returns (command line, check that nothing was written)
Builder = Callable[[dict[str, Path], Path, pytest.MonkeyPatch], tuple[list[str], Callable[[], None]]]


@dataclass(frozen=True)
class Case:
    """One scenario of `test_one_line_error`: `build` makes it; the error line must name every `names`."""

    id: str
    build: Builder
    names: tuple[str, ...] = ()


def _absent(path: Path) -> Callable[[], None]:
    def check() -> None:
        assert not path.exists(), sorted(p.name for p in path.parent.iterdir())

    return check


def _unchanged(root: Path) -> Callable[[], None]:
    before = _tree(root)

    def check() -> None:
        assert _tree(root) == before

    return check


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _run_disk_full(inputs, tmp, monkeypatch):
    monkeypatch.setattr(pq, "write_table", _enospc)  # the parquet writer of result parts
    out = tmp / "out"

    def check() -> None:
        leftovers = [p.name for p in out.rglob("*") if p.suffix in (".parquet", ".tmp")]
        assert not leftovers and not (out / "results_manifest.json").exists(), leftovers

    return _run(inputs, out), check


def _build_disk_full(inputs, tmp, monkeypatch):
    monkeypatch.setattr(pq.ParquetWriter, "write_table", _enospc)  # the dataset's shard writer
    sources = write_release(tmp / "sources")
    out = tmp / "out"

    def check() -> None:
        assert not out.exists() or not list(out.iterdir()), list(out.iterdir())  # no dataset, no staging folder

    recipe = write_recipe(tmp / "r.yaml", sources)
    return ["build", str(recipe), "--sources", str(sources), "--out", str(out), "-q"], check


def _analyze_disk_full(inputs, tmp, monkeypatch):
    import pandas as pd

    monkeypatch.setattr(pd.DataFrame, "to_csv", _enospc)  # the report's table writer
    out = tmp / "report"
    return _analyze(inputs, out), lambda: (_absent(out)(), _unchanged(tmp)())


def _plan_json_folder(inputs, tmp, monkeypatch):
    (tmp / "plan").mkdir()
    return _plan(inputs, "--json", str(tmp / "plan")), _unchanged(tmp)


def _plan_json_read_only(inputs, tmp, monkeypatch):
    target = unwritable_out(tmp).parent / "plan.json"  # a folder nothing can be created in
    return _plan(inputs, "--json", str(target)), _absent(target)


def _manifest_list_analyze(inputs, tmp, monkeypatch):
    results = tmp / "results"
    shutil.copytree(inputs["results"], results)
    (results / res.MANIFEST_NAME).write_text("[1, 2]\n")
    return _analyze(inputs, tmp / "report", results=results), _absent(tmp / "report")


def _manifest_entries_run(inputs, tmp, monkeypatch):
    out = tmp / "out"
    out.mkdir()
    (out / res.MANIFEST_NAME).write_text(json.dumps({"runs": {"items/k/shard-0of1": 1}}))
    return _run(inputs, out), _unchanged(out)


def _top_p_zero(inputs, tmp, monkeypatch):
    return _run(inputs, tmp / "out", "--scoring", "generate", "--top-p", "0"), _absent(tmp / "out")


def _temperature_nan(inputs, tmp, monkeypatch):
    return _run(inputs, tmp / "out", "--scoring", "generate", "--temperature", "nan"), _absent(tmp / "out")


def _hub_run(inputs, tmp, monkeypatch):
    monkeypatch.chdir(tmp)  # `org/does-not-exist` is not a local folder
    return _run(inputs, tmp / "out", dataset="org/does-not-exist"), _absent(tmp / "out")


def _hub_analyze(inputs, tmp, monkeypatch):
    monkeypatch.chdir(tmp)
    args = ["analyze", "--prompts", "org/nope", "--results", str(inputs["results"]), "--out", str(tmp / "report")]
    return args, _absent(tmp / "report")


def _demo_at_file(inputs, tmp, monkeypatch):
    (tmp / "notes.txt").write_text("mine\n")
    return ["demo", "--out", str(tmp / "notes.txt")], _unchanged(tmp)


def _plan_corrupt_parquet(inputs, tmp, monkeypatch):
    prompts = tmp / "prompts"
    shutil.copytree(inputs["prompts"], prompts)
    (part,) = (prompts / "data" / "items").glob("*.parquet")
    part.write_bytes(b"PAR1 not really parquet")
    return _plan(inputs, dataset=prompts), _unchanged(tmp)


def _analyze_empty_out(inputs, tmp, monkeypatch):
    monkeypatch.chdir(tmp)
    return _analyze(inputs, ""), _unchanged(tmp)


def _integer_ids(tmp_path: Path) -> tuple[Path, list[str]]:
    items = [{**item, "id": k} for k, item in enumerate(copy.deepcopy(ITEMS))]
    return write_loop_prompts(tmp_path / "p", items, Features({**FEATURES, "id": Value("int64")})), []


def _null_prompt_no_chat(tmp_path: Path) -> tuple[Path, list[str]]:
    items = copy.deepcopy(ITEMS)
    items[0]["prompt"] = None
    return write_loop_prompts(tmp_path / "p", items), ["--no-chat"]


def _contract(make: Callable[[Path], tuple[Path, list[str]]]) -> Builder:
    """A prompt folder that breaks the item contract (`test_item_contract`), run by `probes run`."""

    def build_case(inputs: dict[str, Path], tmp: Path, monkeypatch: pytest.MonkeyPatch):
        dataset, extra = make(tmp)
        out = tmp / "results"
        return _run(inputs, out, *extra, dataset=dataset), _absent(out)

    return build_case


CASES = [
    Case("run-disk-full", _run_disk_full, ("cannot write", "No space left on device")),
    Case("build-disk-full", _build_disk_full, ("cannot write the dataset folder", "No space left on device")),
    Case("analyze-disk-full", _analyze_disk_full, ("cannot write the report", "No space left on device")),
    Case("plan-json-is-a-folder", _plan_json_folder, ("--json", "is a folder")),
    Case("plan-json-read-only", _plan_json_read_only, ("--json", "cannot write")),
    Case("results-manifest-a-list-analyze", _manifest_list_analyze, (res.MANIFEST_NAME, "expected a JSON object")),
    Case("results-manifest-entry-not-object-run", _manifest_entries_run, (res.MANIFEST_NAME, "items/k/shard-0of1")),
    Case("top-p-zero", _top_p_zero, ("--top-p",)),
    Case("temperature-nan", _temperature_nan, ("--temperature",)),
    Case("unreachable-hub-dataset-run", _hub_run, ("org/does-not-exist",)),
    Case("unreachable-hub-dataset-analyze", _hub_analyze, ("org/nope",)),
    Case("demo-out-is-a-file", _demo_at_file, ("notes.txt", "not a folder")),
    Case("plan-corrupt-parquet", _plan_corrupt_parquet, ("test-00000-of-00001.parquet", "cannot read")),
    Case("analyze-empty-out", _analyze_empty_out, ("--out is empty",)),
    Case("integer-id-column", _contract(_integer_ids), ("column 'id' has type int64", "needs string")),
    Case("null-prompt-no-chat", _contract(_null_prompt_no_chat), ("id 'choice-maria'", "field 'prompt' is null")),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_one_line_error(case: Case, inputs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args, nothing_written = case.build(inputs, tmp_path, monkeypatch)
    line = _one_error_line(runner.invoke(app, args))
    for name in case.names:
        assert name in line, (name, line)
    nothing_written()


# ----------------------------------------------------------------------------- data loss


@pytest.mark.parametrize("which", ["results", "empathy"])
def test_analyze_overwrite_never_replaces_an_input(inputs, which: str) -> None:
    """`analyze --out R --overwrite` deleted the results folder (or prompt dataset) R."""
    before = _tree(inputs[which])
    line = _one_error_line(runner.invoke(app, _analyze(inputs, inputs[which], "--overwrite")))
    assert "is the input" in line and ("a results folder" in line or "a prompt dataset folder" in line)
    assert _tree(inputs[which]) == before


def test_analyze_overwrite_replaces_its_own_report_only(inputs, tmp_path: Path) -> None:
    report = tmp_path / "report"
    assert runner.invoke(app, _analyze(inputs, report)).exit_code == 0
    assert runner.invoke(app, _analyze(inputs, report, "--overwrite")).exit_code == 0  # its own: replaced
    (report / "my-notes.txt").write_text("keep me\n")  # now a folder with someone's file in it
    before = _tree(report)
    assert "not a report" in _one_error_line(runner.invoke(app, _analyze(inputs, report, "--overwrite")))
    assert _tree(report) == before
    inside = _one_error_line(runner.invoke(app, _analyze(inputs, inputs["results"] / "report")))
    assert "is inside the input --results" in inside and not (inputs["results"] / "report").exists()


def _git_init(folder: Path) -> None:
    import subprocess

    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    (folder / ".notes").write_text("mine\n")


def test_analyze_overwrite_keeps_a_git_folder_and_a_users_files(inputs, tmp_path: Path) -> None:
    """`analyze --overwrite` decided from the visible top-level names only and deleted `.git` and a user's table
    in `tables/`: now every entry counts, it refuses naming the first foreign one, and deletes nothing."""
    report = tmp_path / "report"
    assert runner.invoke(app, _analyze(inputs, report)).exit_code == 0
    _git_init(report)
    (report / "tables" / "my_table.csv").write_text("mine\n")
    before = _tree(report)
    line = _one_error_line(runner.invoke(app, _analyze(inputs, report, "--overwrite")))
    assert ".git/" in line and "not a report" in line and "nothing was replaced or deleted" in line
    assert _tree(report) == before
    shutil.rmtree(report / ".git")
    (report / ".notes").unlink()
    line = _one_error_line(runner.invoke(app, _analyze(inputs, report, "--overwrite")))
    assert "tables/my_table.csv" in line and (report / "tables" / "my_table.csv").read_text() == "mine\n"
    (report / "tables" / "my_table.csv").unlink()
    assert runner.invoke(app, _analyze(inputs, report, "--overwrite")).exit_code == 0  # only its own files: replaced


def test_build_overwrite_keeps_a_git_folder_in_the_dataset_folder(inputs, tmp_path: Path) -> None:
    sources = write_release(tmp_path / "sources")
    recipe = write_recipe(tmp_path / "r.yaml", sources)
    args = ["build", str(recipe), "--sources", str(sources), "--out", str(tmp_path / "out"), "-q"]
    assert runner.invoke(app, args).exit_code == 0
    (target,) = (tmp_path / "out").iterdir()
    _git_init(target)
    before = _tree(target)
    line = _one_error_line(runner.invoke(app, [*args, "--overwrite"]))
    assert ".git/" in line and "nothing was replaced or deleted" in line
    assert _tree(target) == before
    shutil.rmtree(target / ".git")
    (target / ".notes").unlink()
    (target / "data" / "extra.parquet").write_bytes(b"mine")
    assert "data/extra.parquet" in _one_error_line(runner.invoke(app, [*args, "--overwrite"]))
    (target / "data" / "extra.parquet").unlink()
    assert runner.invoke(app, [*args, "--overwrite"]).exit_code == 0


def test_demo_never_writes_into_a_results_folder(inputs) -> None:
    before = _tree(inputs["results"])
    line = _one_error_line(runner.invoke(app, ["demo", "--out", str(inputs["results"]), "--overwrite"]))
    assert "is a results folder" in line
    assert _tree(inputs["results"]) == before


def test_build_overwrite_never_replaces_a_foreign_folder(inputs, tmp_path: Path) -> None:
    sources = write_release(tmp_path / "sources")
    recipe = write_recipe(tmp_path / "r.yaml", sources)
    target = tmp_path / "out" / "talent-or-luck"
    shutil.copytree(inputs["results"], target)  # a results folder where the dataset would go
    before = _tree(target)
    args = ["build", str(recipe), "--sources", str(sources), "--out", str(tmp_path / "out"), "--overwrite", "-q"]
    assert "is a results folder" in _one_error_line(runner.invoke(app, args))
    assert _tree(target) == before


def test_plan_json_never_writes_into_the_prompt_dataset(inputs) -> None:
    manifest = inputs["prompts"] / "build_manifest.json"
    before = _tree(inputs["prompts"])
    over = _one_error_line(runner.invoke(app, _plan(inputs, "--json", str(manifest))))
    assert "is inside the input DATASET" in over
    inside = _one_error_line(runner.invoke(app, _plan(inputs, "--json", str(inputs["prompts"] / "plan.json"))))
    assert "is inside the input DATASET" in inside
    assert _tree(inputs["prompts"]) == before


def test_empty_out_is_refused_and_readme_is_kept(inputs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`run --out ""` wrote the results card over ./README.md."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "README.md").write_text("# my project\n")
    before = _tree(tmp_path)
    assert "--out is empty" in _one_error_line(runner.invoke(app, _run(inputs, "")))
    assert "--out is empty" in _one_error_line(runner.invoke(app, _analyze(inputs, "", "--overwrite")))
    dot = _one_error_line(runner.invoke(app, _run(inputs, ".")))  # the current folder is someone's project
    assert "not a results folder this command wrote" in dot
    assert _tree(tmp_path) == before


# ----------------------------------------------------------------------------- figures of one model at two settings


def test_one_model_at_two_scorings_gets_figures_of_its_own(tmp_path: Path) -> None:
    """Two keys with one model name crashed the attribution shares figure (TypeError in plots)."""
    sources = write_release(tmp_path / "sources")
    dataset = build(str(write_recipe(tmp_path / "r.yaml", sources)), out_dir=tmp_path / "ds", sources=sources).path
    ids = pq.read_table(dataset / "data" / "single_actor", columns=["id"]).column("id").to_pylist()
    results = tmp_path / "results"
    for scoring in ('{"choice_mode":"sentence"}', '{"choice_mode":"letter"}'):
        key = res.ResultKey("org/m", "rev", scoring)
        folder = res.key_dir(results, "single_actor", key)
        res.write_key_file(folder, key)
        rng = np.random.default_rng(len(scoring))
        rows = [
            {"id": i, **key.as_dict(), "choice_probs": list(rng.dirichlet(np.ones(4))), "refused": False} for i in ids
        ]
        res.write_part(folder, (0, 1), rows)
        run = {"prompt_dataset": {"config": "single_actor"}, "model": "org/m", "key": key.slug, "items": len(ids)}
        res.update_manifest(results, f"single_actor/{key.slug}/shard-0of1", run)
    out = tmp_path / "report"
    args = ["analyze", "--prompts", str(dataset), "--results", str(results), "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    figures = sorted(p.name for p in (out / "figures").glob("attribution_domain_*.png"))
    assert len(figures) == 2, figures  # one per run, told apart by the key digest
    assert "attribution_shares.png" in {p.name for p in (out / "figures").iterdir()}


def test_an_output_may_lie_inside_a_folder_only_read_from(tmp_path: Path) -> None:
    """`probes build --sources .` writes ./datasets: sources, caches, models and recipes are references, not data."""
    from promptgen.core.errors import OutputError
    from promptgen.core.outputs import Output, Reference, check_output

    sources = tmp_path / "sources"
    sources.mkdir()
    kind = Output("dataset", owns=lambda p: False)
    assert check_output(sources / "datasets", kind, inputs=[Reference("--sources", sources)]) == sources / "datasets"
    with pytest.raises(OutputError, match="is inside the input DATASET"):
        check_output(sources / "datasets", kind, inputs=[("DATASET", sources)])
    for target, relation in ((sources, "is"), (tmp_path, "holds")):
        with pytest.raises(OutputError, match=f"{relation} the input --sources"):
            check_output(target, kind, inputs=[Reference("--sources", sources)], overwrite=True)
