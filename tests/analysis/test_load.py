"""`analysis.load` guards: probabilities that cannot be probabilities, and results scored on other prompts.

Both used to pass silently: probabilities outside [0, 1] moved the attribution d by up to 104,
and a rebuilt prompt dataset with the same ids moved the means from -0.46 to -0.31 with no
warning. Each case is checked through the library and through `probes analyze`.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

import runners.results as res
from analysis.load import load_results
from analysis.pipeline import AnalysisOptions, analyze
from probes.cli import app
from promptgen.core.errors import ProbeError
from release_fixture import load_config

runner = CliRunner()
SCORING = '{"choice_mode":"sentence"}'
FAST = AnalysisOptions.from_flags(n_permutations=50)


def write_results(results: Path, config: str, rows: list[dict[str, Any]], *, fingerprint: str | None = None) -> Path:
    """A result folder as `probes run` writes it: key.json, one part, manifest with the prompt fingerprint."""
    key = res.ResultKey("org/model", "rev", SCORING)
    folder = res.key_dir(results, config, key)
    res.write_key_file(folder, key)
    part = res.write_part(folder, (0, 1), [{**key.as_dict(), "refused": False, **r} for r in rows])
    prompt_dataset = {"config": config, **({"fingerprint": fingerprint} if fingerprint else {})}
    entry = {"prompt_dataset": prompt_dataset, "model": key.model, "key": key.slug, "items": len(rows)}
    res.update_manifest(results, f"{config}/{key.slug}/shard-0of1", entry)
    return part


def _rows(n: int = 6) -> list[dict[str, Any]]:
    return [{"id": f"i{k}", "choice_probs": [0.4, 0.3, 0.2, 0.1], "valid_mass": math.nan} for k in range(n)]


@pytest.mark.parametrize(
    ("change", "column", "problem"),
    [
        ({"choice_probs": [0.7, 0.5, -0.1, -0.1]}, "choice_probs", "value -0.1 is outside [0, 1]"),
        ({"choice_probs": [3.0, 0.0, 0.0, 0.0]}, "choice_probs", "value 3.0 is outside [0, 1]"),
        ({"valid_mass": 1.5}, "valid_mass", "value 1.5 is outside [0, 1]"),
        ({"number_probs": [0.2, 0.2]}, "number_probs", "sums to 0.4, not 1"),
        ({"choice_probs": [0.5, math.nan, 0.25, 0.25]}, "choice_probs", "NaN in the distribution of an item"),
        # issue #69, finding 5: raw log-probabilities that contradict the distribution beside them
        ({"choice_logprobs": [5.0] * 4}, "choice_logprobs", "[5.0, 5.0, 5.0, 5.0] holds a value above 0"),
        ({"choice_logprobs": [math.nan] * 4}, "choice_logprobs", "[nan, nan, nan, nan] holds NaN, and the row"),
        (
            {"choice_logprobs": [math.log(0.25)] * 4},
            "choice_logprobs",
            f"{[math.log(0.25)] * 4!r} does not give choice_probs",
        ),
    ],
)
def test_impossible_probabilities_are_refused_naming_file_row_and_column(tmp_path, change, column, problem):
    rows = _rows()
    rows[3].update(change)
    part = write_results(tmp_path / "r", "single_actor", rows)
    with pytest.raises(ProbeError) as info:
        load_results(tmp_path / "r", "single_actor")
    assert str(info.value).startswith(f"{part}: row id 'i3', column {column!r}: {problem}")


def test_what_the_runners_write_is_accepted(tmp_path):
    """NaN where nothing can be computed (refused, no valid mass; sentence-mode valid_mass) and float slack."""
    rows = _rows()
    rows[1].update(choice_probs=[math.nan] * 4, valid_mass=0.0, refused=True)
    rows[2].update(choice_probs=[0.5 + 4e-7, 0.5 - 4e-7, 0.0, 0.0])
    rows[3].update(choice_probs=None, number_probs=list(np.full(101, 1 / 101)), valid_mass=0.93)
    rows[4].update(choice_logprobs=[math.log(p * 0.9) for p in rows[4]["choice_probs"]], choice_tokens=[1] * 4)
    rows[5].update(choice_logprobs=[math.log(p) * 3 for p in rows[5]["choice_probs"]], choice_tokens=[3] * 4)
    write_results(tmp_path / "r", "single_actor", rows)
    frame = load_results(tmp_path / "r", "single_actor")
    assert len(frame) == 6


# ----------------------------------------------------------------------------- prompt fingerprints
# (`two_builds`, the small release built with two option orders, is conftest.py's)


def _fingerprint(dataset: Path) -> str:
    return json.loads((dataset / "build_manifest.json").read_text())["fingerprint"]


def _scored_on(dataset: Path, results: Path) -> None:
    """A model that always prefers the first option presented, scored on `dataset`'s single-actor items."""
    items = load_config(dataset, "single_actor").to_pandas().head(80)
    rows = [{"id": i, "choice_probs": [0.7, 0.1, 0.1, 0.1]} for i in items["id"]]
    write_results(results, "single_actor", rows, fingerprint=_fingerprint(dataset))


def _mean_d(analysis) -> float:
    table = analysis.tables["attribution_single_actor"]
    return float(table.loc[table["refused_items"] == "excluded", "mean"].mean())


def test_results_scored_on_other_prompts_are_refused_unless_allowed(two_builds, tmp_path):
    first, second = two_builds
    assert _fingerprint(first) != _fingerprint(second)
    ids = load_config(first, "single_actor").to_pandas()["id"]
    assert set(ids) == set(load_config(second, "single_actor").to_pandas()["id"])  # the join alone cannot tell
    results = tmp_path / "results"
    _scored_on(first, results)
    right = analyze(first, [results], options=FAST, figures=False)
    assert right.warnings == []

    with pytest.raises(ProbeError) as info:
        analyze(second, [results], options=FAST, figures=False)
    message = str(info.value)
    assert (
        f"{results.name}/results_manifest.json: config 'single_actor'" in message
    )  # a portable name: it goes into the report
    assert _fingerprint(first)[:12] in message and _fingerprint(second)[:12] in message
    assert "--allow-fingerprint-mismatch" in message

    wrong = analyze(second, [results], options=FAST, figures=False, allow_fingerprint_mismatch=True)
    assert len(wrong.warnings) == 1 and _fingerprint(first)[:12] in wrong.warnings[0]
    # what the check protects against: the same answers read against other prompts give other means
    assert abs(_mean_d(right) - _mean_d(wrong)) > 0.05


def test_analyze_command_refuses_then_warns(two_builds, tmp_path):
    first, second = two_builds
    results = tmp_path / "results"
    _scored_on(first, results)
    args = ["analyze", "--prompts", str(second), "--results", str(results), "--no-figures", "--permutations", "20"]
    refused = runner.invoke(app, [*args, "--out", str(tmp_path / "a")], terminal_width=300)
    text = re.sub(r"\x1b\[[0-9;]*m", "", refused.output)
    lines = [line for line in text.splitlines() if line.strip()]
    assert refused.exit_code == 1 and len(lines) == 1 and lines[0].startswith("error: "), text
    assert "fingerprint" in lines[0] and not (tmp_path / "a").exists()
    allowed = runner.invoke(app, [*args, "--out", str(tmp_path / "b"), "--allow-fingerprint-mismatch"])
    assert allowed.exit_code == 0, allowed.output
    assert "warning: " in allowed.output and "scored on prompts with fingerprint" in allowed.output


def test_analyze_command_names_an_out_of_range_probability(tmp_path, two_builds):
    first, _ = two_builds
    items = load_config(first, "single_actor").to_pandas().head(5)
    rows = [{"id": i, "choice_probs": [0.25, 0.25, 0.25, 0.25]} for i in items["id"]]
    rows[2]["choice_probs"] = [1.2, -0.2, 0.0, 0.0]
    part = write_results(tmp_path / "r", "single_actor", rows, fingerprint=_fingerprint(first))
    result = runner.invoke(
        app,
        ["analyze", "--prompts", str(first), "--results", str(tmp_path / "r"), "--out", str(tmp_path / "o")],
        terminal_width=400,
    )
    text = re.sub(r"\x1b\[[0-9;]*m", "", result.output).strip()
    assert result.exit_code == 1 and "\n" not in text, text
    assert text.startswith(f"error: {part}: row id {items['id'].iloc[2]!r}, column 'choice_probs': value 1.2 is")


# ----------------------------------------------------------------------------- rows that contradict themselves


def _number_results(tmp_path: Path, change: dict[str, Any]) -> tuple[Path, Path]:
    """Four 0-10 number items and their scored rows (all mass on 7), one row changed by `change`."""
    from runners_fixtures import number_items, write_prompt_folder

    items = number_items(4)
    prompts = write_prompt_folder(tmp_path / "prompts", items, config="games")
    probs = [0.0] * 11
    probs[7] = 1.0
    scoring = json.dumps({"mode": "score", "refusal_threshold": 0.5})
    key = res.ResultKey("org/model", "rev", scoring)
    rows = [
        {
            **key.as_dict(),
            "id": item["id"],
            "prompt_sha256": res.prompt_sha256(item),
            "number_probs": probs,
            "expected_value": 7.0,
            "argmax_value": 7,
            "valid_mass": 0.9,
            "refused": False,
        }
        for item in items
    ]
    rows[2].update(change)
    folder = res.key_dir(tmp_path / "results", "games", key)
    res.write_key_file(folder, key)
    res.write_part(folder, (0, 1), rows)
    entry = {"prompt_dataset": {"config": "games"}, "model": key.model, "key": key.slug, "items": len(rows)}
    res.update_manifest(tmp_path / "results", f"games/{key.slug}/shard-0of1", entry)
    return prompts, tmp_path / "results"


@pytest.mark.parametrize(
    ("change", "column", "words"),
    [
        ({"expected_value": 3.0}, "expected_value", "3 is not the expected value 7 of its number_probs"),
        ({"argmax_value": 2}, "argmax_value", "2 is not the most probable number 7 of its number_probs"),
        ({"refused": True}, "refused", "True contradicts its valid_mass 0.9"),
        ({"valid_mass": 0.2}, "refused", "False contradicts its valid_mass 0.2"),
    ],
)
def test_a_row_that_contradicts_its_own_distribution_is_refused(tmp_path, change, column, words):
    """An in-range expected value (or argmax) that is not its number_probs', and a `refused` that is not the rule
    applied to its valid_mass, were analysed as they were: `probes analyze` now refuses them, naming the row."""
    prompts, results = _number_results(tmp_path, change)
    out = runner.invoke(
        app, ["analyze", "--prompts", str(prompts), "--results", str(results), "--out", str(tmp_path / "o")]
    )
    text = " ".join(out.output.split())
    assert out.exit_code == 1 and "Traceback" not in text, text
    assert f"row id 'n2', column {column!r}" in text and words in text, text
    assert not (tmp_path / "o").exists()


def test_consistent_number_rows_and_a_bounded_refusal_are_accepted(tmp_path):
    """The same rows unchanged pass; a bounded row whose resolved mass 0.45 is under the threshold but whose mass
    may reach 0.45 x 2 / (2 - 0.2) = 0.5 is not refused (`refused_by_mass`), and one at 0.44 is."""
    from analysis.load import join, load_prompts
    from runners.scoring.distributions import refused_by_mass

    assert not refused_by_mass(0.45, 0.5, 0.2) and refused_by_mass(0.44, 0.5, 0.2)
    assert refused_by_mass(0.45, 0.5) and not refused_by_mass(0.5, 0.5)
    prompts, results = _number_results(tmp_path, {"valid_mass": 0.45, "number_bound": 0.2})
    joined = join(load_prompts(prompts, "games"), load_results(results, "games"))
    assert len(joined) == 4
    # a bounded row scored before the interval rule (refused on its resolved mass alone) still loads
    old, results = _number_results(tmp_path / "old", {"valid_mass": 0.45, "number_bound": 0.2, "refused": True})
    assert len(join(load_prompts(old, "games"), load_results(results, "games"))) == 4
    # a row with its number_probs and no argmax_value (null: nothing to check) loads; it was an IndexError
    blank, results = _number_results(tmp_path / "blank", {"argmax_value": None})
    assert len(join(load_prompts(blank, "games"), load_results(results, "games"))) == 4


# ----------------------------------------------------------------------------- keys no finished run recorded (#69)


def _killed_run(prompts: Path, results: Path, n: int = 6) -> Path:
    """A `probes run` killed after its first part: rows written through the runners' session, never finished."""
    from runners.prompts import load_prompt_config
    from runners.run.session import Session, result_key
    from runners.scoring.settings import resolve_scoring

    loaded = load_prompt_config(str(prompts), "single_actor")
    settings = resolve_scoring(loaded.protocol, None, None).settings
    key = result_key("org/killed", "b" * 40, settings, False, dtype="float32", backend="hf")
    session = Session.open(loaded, results, key, chat=False, batch_size=None, flush_every=n)
    ids = loaded.dataset.select(session.todo[:n])["id"]
    fields = {"backend": "hf", "dtype": "float32", "device": "cpu", "choice_tokens": [3] * 4, "context_tokens": 40}
    p = [0.7, 0.1, 0.1, 0.1]
    rows = [{"id": i, "choice_probs": p, "chosen_index": 0, "valid_mass": math.nan, "refused": False, **fields}
            for i in ids]  # fmt: skip
    session.add(rows)  # n rows: one part flushed, as a run writes it; then the run is killed (no `finish`)
    assert len(res.part_files(session.folder)) == 1
    return session.folder


def test_analyze_and_export_refuse_a_key_no_finished_run_recorded(two_builds, tmp_path):
    """#69: the parts of a `probes run` killed part way (no run recorded) were analysed and exported as a run of
    their model, beside the finished one; both commands now refuse them as publish does, naming the key folder and
    the command that finishes it, and write nothing."""
    from cli_fixture import LIBRARY_PROGRESS, one_line_error

    first, _ = two_builds
    results = tmp_path / "results"
    _scored_on(first, results)  # a finished run of org/model
    killed = _killed_run(first, results)
    rel = killed.relative_to(results).as_posix()
    analyze_args = ["analyze", "--prompts", str(first), "--results", str(results), "--no-figures"]
    export_args = ["export", str(results), "--prompts", str(first), "--format", "jsonl"]
    for args, out in ((analyze_args, tmp_path / "report"), (export_args, tmp_path / "export")):
        result = runner.invoke(app, [*args, "--out", str(out)], terminal_width=400)
        one_line_error(result, rel, "no finished run recorded", "rerun the same `probes run` command",
                       f"delete {killed}", ignore=LIBRARY_PROGRESS)  # fmt: skip
        assert not out.exists()
    with pytest.raises(ProbeError, match="no finished run recorded"):
        load_results(results, "single_actor")
