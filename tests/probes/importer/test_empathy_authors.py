"""`probes import --format empathy-authors` (`probes.empathy.authors_import`): the authors' generation files.

A 2-event build of the intergroup-empathy dataset (from the release's files in ../shared/sources)
gives the prompts; the authors' `batch_pred_emotion.py` output is written from them as their code
writes it (`idx`, `system_prompt`, `user_input`, `response`; `to_csv(sep='\\t', index=False)`), in
batches, with answers that exercise their parser. The oracle for each answer is their own
`extract_numbers` and refusal prefixes (tests/reference, run unchanged), on the response as their
`process_exp_results.py` reads it.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

import empathy_reference as ref
from cli_fixture import one_line_error
from probes.cli import app
from probes.empathy.authors_import import FORMAT as EMPATHY_AUTHORS
from probes.importer import ImportRequest, import_results
from promptgen.build import build
from promptgen.core.errors import ProbeError
from runners.prompts import PromptConfig, load_prompt_config
from runners.results import key_folders, read_key_rows, read_manifest
from runners.results.check import validate_results
from runners.scoring.settings import resolve_scoring

runner = CliRunner()
MODEL = "meta-llama/Meta-Llama-3.1-8B-Instruct"
FORMAT = "empathy-authors"
#: the authors' file stem -> our config
FILES = {"religion_origin": "religion_P0S0T0", "religion_10-scale": "religion_P0S1T0"}
ANSWERS = [
    "70",
    "On a scale from 0 to 100, I would rate it 70.",
    "I cannot rate the emotions of a person based on their religion.",
    "",
    "NA",
    "150",
    "50 (0 to 100)",
    "I'm not rating that.",
    "Emotion intensity: 1,000",
    "None",
    "0",
    "8\n\nThe narrator felt sad.",
]
REFUSAL_PREFIXES = ("I cannot", "I can't", "I'm not rating")


@pytest.fixture(scope="module")
def prompts(shared_sources: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("empathy")
    return build("intergroup-empathy", out_dir=out, sources=shared_sources, max_events=2).path


def write_authors_files(prompts: Path, folder: Path, batches: int = 2) -> dict[str, pd.DataFrame]:
    """Their generation output for FILES, as `vllm_inference` writes it: one TSV per batch of rows in idx order."""
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for stem, config in FILES.items():
        rows = load_prompt_config(str(prompts), config).dataset.to_pandas().sort_values("authors_index")
        frame = pd.DataFrame(
            {
                "idx": rows["authors_index"].to_numpy(),
                "system_prompt": [m[0]["content"] for m in rows["messages"]],
                "user_input": [m[1]["content"] for m in rows["messages"]],
                "response": [ANSWERS[k % len(ANSWERS)] for k in range(len(rows))],
            }
        )
        size = -(-len(frame) // batches)
        for b in range(batches):
            frame.iloc[b * size : (b + 1) * size].to_csv(folder / f"{stem}_batch-{b}.tsv", sep="\t", index=False)
        written[config] = rows
    return written


def their_reading(folder: Path) -> dict[int, tuple[str, int]]:
    """idx -> (the response as their process_exp_results.py reads it, their intensity; -1 is a refusal)."""
    code = ref.process_exp_results()
    out = {}
    for path in sorted(folder.glob("*.tsv")):
        frame = pd.read_csv(path, sep="\t")
        for idx, response in zip(frame["idx"], frame["response"], strict=True):
            text = str(response)
            out[int(idx)] = (text, -1 if text.startswith(REFUSAL_PREFIXES) else code.extract_numbers(text))
    return out


@pytest.fixture(scope="module")
def imported(prompts: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("empathy-import")
    write_authors_files(prompts, root / "exp_llama-8b")
    result = import_results(ImportRequest(root / "exp_llama-8b", FORMAT, prompts, MODEL, root / "results"))
    assert sorted(c.config for c in result.configs) == sorted(FILES.values())
    assert all(c.added == c.rows > 0 and len(c.files) == 2 for c in result.configs)
    return {"root": root, "source": root / "exp_llama-8b", "results": root / "results"}


def test_rows_are_the_answers_read_by_the_authors_rule(prompts, imported) -> None:
    theirs = their_reading(imported["source"])
    for config in FILES.values():
        items = load_prompt_config(str(prompts), config).dataset.to_pandas().set_index("id")
        (folder,) = key_folders(imported["results"], config)
        rows = read_key_rows(folder).to_pandas().set_index("id")
        assert sorted(rows.index) == sorted(items.index)
        statuses = set()
        for item_id, row in rows.iterrows():
            text, intensity = theirs[int(items.loc[item_id, "authors_index"])]
            assert row["generated_text"] == text
            assert bool(row["refused"]) == (intensity == -1), (text, row["parse_status"])
            if intensity != -1:
                assert row["parsed_value"] == intensity, text
            statuses.add(row["parse_status"])
            assert pd.isna(row["context_tokens"]) and pd.isna(row["finish_reason"])
        assert {"ok", "refusal", "no_number", "out_of_range"} <= statuses
        assert "nan" in set(rows["generated_text"])  # an empty answer, as their str(response) reads it
        scoring = json.loads(rows["scoring"].iloc[0])
        assert scoring["backend"] == f"import:{FORMAT}" and scoring["chat"] is True and scoring["dtype"] is None
        # the scoring of a `probes run` with the dataset's protocol (the authors' generation and parser)
        protocol = resolve_scoring(load_prompt_config(str(prompts), config).protocol, None, None)
        assert protocol.chat is True
        ours = {k: v for k, v in scoring.items() if k not in ("backend", "dtype", "chat")}
        assert ours == json.loads(protocol.settings.key())
        assert ours["number_parser"] == "first-integer" and ours["temperature"] == 0 and ours["max_new_tokens"] == 128
        assert rows["model_revision"].str.fullmatch("imported-[0-9a-f]{64}").all() and (rows["model"] == MODEL).all()


def test_the_imported_folder_is_analysed_publishable_and_records_its_files(prompts, imported) -> None:
    """`analyze` reads it (the 0-100 config: on the 10-point one the authors' rule keeps "70" as an answer,
    which the analysis refuses as outside the item's range, as it would for a run with their parser)."""
    from analysis.pipeline import AnalysisOptions, analyze

    options = AnalysisOptions.from_flags(n_permutations=10)
    tables = analyze(prompts, [imported["results"]], configs=["religion_P0S0T0"], options=options, figures=False).tables
    assert len(tables["empathy_paper_cells"]) > 0 and len(tables["empathy_cells"]) > 0
    manifest = read_manifest(imported["results"])
    assert validate_results(imported["results"], manifest).problems == []
    for run in manifest["runs"].values():
        names = [f["path"] for f in run["imported"]["files"]]
        assert all(re.fullmatch(r"religion_(origin|10-scale)_batch-[01]\.tsv", n) for n in names), names
        assert run["imported"]["format"] == FORMAT
    assert str(imported["root"]) not in json.dumps(manifest)


def test_a_second_import_adds_nothing_and_a_batch_alone_imports(prompts, imported, tmp_path) -> None:
    again = import_results(ImportRequest(imported["source"], FORMAT, prompts, MODEL, imported["results"]))
    assert all(c.added == 0 and c.already == c.rows for c in again.configs)
    one = tmp_path / "one"
    one.mkdir()
    shutil.copy(imported["source"] / "religion_origin_batch-1.tsv", one)
    partial = import_results(ImportRequest(one, FORMAT, prompts, MODEL, tmp_path / "results"))
    ((config,),) = [[c.config for c in partial.configs]]
    assert config == "religion_P0S0T0"
    rows = len(pd.read_csv(one / "religion_origin_batch-1.tsv", sep="\t"))
    assert partial.configs[0].added == rows
    assert len(read_key_rows(key_folders(tmp_path / "results", config)[0])) == rows


@pytest.mark.parametrize("column", ["system_prompt", "user_input"])
def test_a_prompt_that_differs_is_one_line_naming_file_and_idx_and_nothing_is_written(
    prompts, imported, tmp_path, column
) -> None:
    source = tmp_path / "exp"
    shutil.copytree(imported["source"], source)
    target = source / "religion_origin_batch-1.tsv"
    frame = pd.read_csv(target, sep="\t")
    frame.loc[3, column] = frame.loc[3, column].replace("a ", "an ", 1)
    frame.to_csv(target, sep="\t", index=False)
    out = tmp_path / "results"
    args = ["import", str(source), "--format", FORMAT, "--prompts", str(prompts), "--model-name", MODEL]
    line = one_line_error(
        runner.invoke(app, [*args, "--out", str(out)], terminal_width=400),
        "religion_origin_batch-1.tsv",
        f"idx {int(frame.loc[3, 'idx'])}",
        column,
    )
    assert "at character" in line
    assert not out.exists()


def test_answers_generated_otherwise_than_the_config_s_protocol_are_one_line(prompts, imported, tmp_path) -> None:
    """The key's scoring is the config's declared protocol: a build declaring 64 new tokens where the authors
    generated 128 is refused, naming the config and the setting, and nothing is written."""
    other = tmp_path / "prompts"
    shutil.copytree(prompts, other)
    manifest = json.loads((other / "build_manifest.json").read_text())
    manifest["protocols"]["religion_P0S1T0"]["scoring"]["max_new_tokens"] = 64
    (other / "build_manifest.json").write_text(json.dumps(manifest, indent=2))
    out = tmp_path / "results"
    args = ["import", str(imported["source"]), "--format", FORMAT, "--prompts", str(other), "--model-name", MODEL]
    one_line_error(
        runner.invoke(app, [*args, "--out", str(out)], terminal_width=400),
        "config 'religion_P0S1T0' declares max_new_tokens=64 in its protocol",
        f"--format {FORMAT}'s answers were scored with max_new_tokens=128",
    )
    assert not out.exists()


def test_bad_files_are_one_line(prompts, imported, tmp_path) -> None:
    source = tmp_path / "exp"
    shutil.copytree(imported["source"], source)
    out = tmp_path / "results"
    args = ["import", str(source), "--format", FORMAT, "--prompts", str(prompts), "--model-name", MODEL, "--out"]
    target = source / "religion_10-scale_batch-0.tsv"
    frame = pd.read_csv(target, sep="\t", dtype={"idx": str})
    frame.loc[4, "idx"] = "x"
    frame.to_csv(target, sep="\t", index=False)
    one_line_error(runner.invoke(app, [*args, str(out)]), target.name, "row 5", "'idx'", "not an integer")
    frame.loc[4, "idx"] = "99999999"
    frame.to_csv(target, sep="\t", index=False)
    one_line_error(runner.invoke(app, [*args, str(out)]), target.name, "row 5", "idx 99999999")
    shutil.copy(source / "religion_origin_batch-0.tsv", target)  # religion_P0S0T0's rows under P0S1T0's name
    one_line_error(runner.invoke(app, [*args, str(out)]), target.name, "system_prompt")
    shutil.copy(imported["source"] / target.name, target)
    shutil.copy(source / "religion_origin_batch-0.tsv", source / "religion_origin_batch-7.tsv")
    one_line_error(runner.invoke(app, [*args, str(out)]), "religion_origin_batch-7.tsv", "answered in")
    (source / "ethnicity_persona-9_batch-0.tsv").write_text("idx\n")
    one_line_error(runner.invoke(app, [*args, str(out)]), "ethnicity_persona-9_batch-0.tsv")
    assert not out.exists()


def test_a_prompt_config_without_authors_index_is_refused() -> None:
    """Configs built before `authors_index` cannot be joined to the authors' idx: one line saying so."""
    import datasets

    dataset = datasets.Dataset.from_dict({"id": ["a"], "messages": [[]], "task": ["number"]})
    prompts = PromptConfig(dataset, "datasets/intergroup-empathy", "race_P0S0T0", None, None, "other")
    with pytest.raises(ProbeError, match=r"race_P0S0T0.*authors_index, number_min, number_max.*empathy-authors"):
        EMPATHY_AUTHORS.prepare(prompts)


def _make_unreadable(kind: str, path: Path) -> str:
    """A batch file at `path` the import cannot read, of `kind`; what its error says."""
    import os

    if kind == "dangling link":
        path.symlink_to(path.with_name("gone.tsv"))
        return "does not exist"
    if kind == "device":
        path.symlink_to("/dev/null")
        return "a character device"
    if kind == "fifo":
        os.mkfifo(path)
        return "a FIFO"
    if kind == "folder":
        path.mkdir()
        return "a folder"
    shutil.copy(path.with_name("religion_origin_batch-0.tsv"), path)  # "unreadable"
    path.chmod(0)
    return "permission denied"


@pytest.mark.parametrize("kind", ["dangling link", "device", "fifo", "folder", "unreadable"])
def test_a_batch_file_it_cannot_read_is_one_line_naming_it(prompts, imported, tmp_path, kind) -> None:
    """A dangling link, a device, a FIFO or a folder named as a batch file was skipped without a word (an import
    of fewer files than the folder shows); each is now one line naming it and what to do, before anything is
    read or written. A file without read permission too (as root every file is readable: not tested there)."""
    import os

    if kind == "unreadable" and os.geteuid() == 0:
        pytest.skip("root reads every file")
    source = tmp_path / "exp"
    shutil.copytree(imported["source"], source)
    name = "religion_origin_batch-2.tsv"
    problem = _make_unreadable(kind, source / name)
    out = tmp_path / "results"
    args = ["import", str(source), "--format", FORMAT, "--prompts", str(prompts), "--model-name", MODEL]
    line = one_line_error(runner.invoke(app, [*args, "--out", str(out)]), name, problem)
    assert "--format empathy-authors" in line
    assert not out.exists()


def test_revision_with_a_local_prompt_folder_is_refused_as_analyze_refuses_it(prompts, imported, tmp_path) -> None:
    """`--revision` names a Hub commit: with a local `--prompts` folder, import read the folder and ignored it,
    where analyze refused it. Both now give the same one line (one rule, `promptgen.hub.read.local_source`)."""
    out = tmp_path / "results"
    flags = ["--revision", "v1.0.0"]
    source = imported["source"]
    args = ["import", str(source), "--format", FORMAT, "--prompts", str(prompts), "--model-name", MODEL]
    imported_line = one_line_error(runner.invoke(app, [*args, "--out", str(out), *flags]), str(prompts), "--revision")
    assert not out.exists()
    args = ["analyze", "--prompts", str(prompts), "--results", str(imported["results"])]
    analyzed = runner.invoke(app, [*args, "--out", str(tmp_path / "analysis"), *flags])
    assert one_line_error(analyzed, str(prompts)) == imported_line


def test_a_partial_import_then_the_full_one_warns_in_one_line_naming_the_folder_to_delete(
    prompts, imported, tmp_path
) -> None:
    """One batch imported to try it, then every batch: two runs of the model side by side, without a word. The later
    import now says so in one line naming the earlier (partial) folder to delete; after deleting it the folder holds
    one run, and the full import run again adds nothing and still finds nothing to say. The other way round (the
    full import first), the line names the partial one's folder."""
    one = tmp_path / "one"
    one.mkdir()
    shutil.copy(imported["source"] / "religion_origin_batch-1.tsv", one)
    out = tmp_path / "results"

    def cli(source: Path, results: Path) -> list[str]:
        args = ["import", str(source), "--format", FORMAT, "--prompts", str(prompts), "--model-name", MODEL]
        result = runner.invoke(app, [*args, "--out", str(results)], terminal_width=400)
        assert result.exit_code == 0, result.output
        return [line for line in result.output.splitlines() if line.startswith("warning:")]

    assert cli(one, out) == []
    (partial,) = key_folders(out, "religion_P0S0T0")
    (line,) = cli(imported["source"], out)
    assert f"delete {partial} " in line and "religion_P0S0T0" in line and MODEL in line and "1 of these 2 files" in line
    assert len(key_folders(out, "religion_P0S0T0")) == 2  # nothing deleted for the user
    shutil.rmtree(partial)
    assert cli(imported["source"], out) == []
    assert len(key_folders(out, "religion_P0S0T0")) == 1
    assert validate_results(out, read_manifest(out)).problems == []

    reverse = tmp_path / "reverse"
    assert cli(imported["source"], reverse) == []
    (line,) = cli(one, reverse)
    assert f"delete {reverse / partial.relative_to(out)} " in line and "every one of these files and 1 more" in line
