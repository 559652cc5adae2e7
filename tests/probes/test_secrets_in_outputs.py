"""No secret in any file the project writes for people, nor on stdout (issue #69, finding 1).

Before: when every answer of a run was refused, `report.html` and `tables/refusals.{csv,parquet}`
quoted the first answers verbatim, so an answer holding `$HF_TOKEN` put the token in the file
people share; stdout was not scrubbed at all. Here every answer an import brings in carries a
secret in each shape the scrubber knows (the value of `HF_TOKEN`, whatever its shape; a token-shaped
`hf_...`; an OpenAI-style key; a bearer credential; the known secret split by a zero-width
space), the answers are imported with `probes import` and analysed with `probes analyze`
(figures and tables), and every byte of the import's results folder, the report folder and
both commands' output is searched for each secret: none is found.
"""

from __future__ import annotations

import secrets as random_secrets
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from probes.cli import app
from promptgen.build import build
from runners.prompts import load_prompt_config

runner = CliRunner()
#: the authors' file stem of the config imported
STEM, CONFIG = "religion_origin", "religion_P0S0T0"


@pytest.fixture(scope="module")
def prompts(shared_sources: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build("intergroup-empathy", out_dir=tmp_path_factory.mktemp("e"), sources=shared_sources, max_events=2).path


def _secrets() -> dict[str, str]:
    """Each shape of secret an answer may carry -> its value (fresh per test: no other file can hold them)."""
    known = "s3cr3t-" + random_secrets.token_hex(12)  # no token shape: masked because HF_TOKEN holds it
    return {
        "known": known,
        "hf": "hf_" + random_secrets.token_hex(17),
        "sk": "sk-" + random_secrets.token_hex(20),
        "bearer": "bearer-" + random_secrets.token_hex(10),
    }


def _answers(values: dict[str, str], n: int) -> list[str]:
    """Refusals (as the authors' rule reads them: the whole run refused) quoting the secrets, each shape in turn."""
    split = values["known"][:6] + "\u200b" + values["known"][6:]
    shapes = [
        f"I cannot rate that. token {values['known']}",
        f"I cannot. My key is {values['hf']}",
        f"I cannot, {values['sk']} is set",
        f"I cannot: Authorization: Bearer {values['bearer']}",
        f"I cannot ({split})",
    ]
    return [shapes[k % len(shapes)] for k in range(n)]


def _write_authors_file(prompts: Path, folder: Path, values: dict[str, str]) -> None:
    """The authors' generation output for one config (`idx, system_prompt, user_input, response`, a TSV)."""
    folder.mkdir(parents=True)
    rows = load_prompt_config(str(prompts), CONFIG).dataset.to_pandas().sort_values("authors_index")
    frame = pd.DataFrame(
        {
            "idx": rows["authors_index"].to_numpy(),
            "system_prompt": [m[0]["content"] for m in rows["messages"]],
            "user_input": [m[1]["content"] for m in rows["messages"]],
            "response": _answers(values, len(rows)),
        }
    )
    frame.to_csv(folder / f"{STEM}_batch-0.tsv", sep="\t", index=False)


def _hits(values: dict[str, str], *places: Path | str) -> list[tuple[str, str]]:
    """(where, which secret) for each secret found in a file under `places` or in a text, read as bytes."""
    found = []
    for place in places:
        files = sorted(p for p in place.rglob("*") if p.is_file()) if isinstance(place, Path) else [place]
        for file in files:
            data = file.read_bytes() if isinstance(file, Path) else file.encode()
            for name, value in values.items():
                if value.encode() in data or value[6:].encode() in data:  # whole, or the tail after a split
                    found.append((str(file)[:80], name))
    return found


def test_no_secret_an_answer_carries_reaches_a_file_or_stdout(prompts, tmp_path, monkeypatch) -> None:
    values = _secrets()
    monkeypatch.setenv("HF_TOKEN", values["known"])
    source, results, report = tmp_path / "exp", tmp_path / "results", tmp_path / "report"
    _write_authors_file(prompts, source, values)
    imported = runner.invoke(
        app,
        ["import", str(source), "--format", "empathy-authors", "--prompts", str(prompts),
         "--model-name", "org/model", "--out", str(results)],
    )  # fmt: skip
    assert imported.exit_code == 0, imported.output
    analysed = runner.invoke(
        app, ["analyze", "--prompts", str(prompts), "--results", str(results), "--out", str(report)]
    )
    assert analysed.exit_code == 0, analysed.output
    # the report is the repro's: every answer refused, the first ones quoted in the refusal table and the page
    refusals = pd.read_csv(report / "tables" / "refusals.csv")
    assert refusals["note"].eq("all items refused").all() and refusals["first_refused"].str.contains("I cannot").all()
    assert "I cannot" in (report / "report.html").read_text(encoding="utf-8")
    assert list((report / "figures").glob("*.png"))
    assert _hits(values, results, report, imported.output, analysed.output) == []


def test_the_answers_are_masked_where_they_are_stored_and_parsed_as_stored(prompts, tmp_path, monkeypatch) -> None:
    """The imported rows keep each answer with its secrets masked (`***`), and the rest of the text as written."""
    from runners.results import key_folders, read_key_rows

    values = _secrets()
    monkeypatch.setenv("HF_TOKEN", values["known"])
    _write_authors_file(prompts, tmp_path / "exp", values)
    result = runner.invoke(
        app,
        ["import", str(tmp_path / "exp"), "--format", "empathy-authors", "--prompts", str(prompts),
         "--model-name", "org/model", "--out", str(tmp_path / "results")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    (folder,) = key_folders(tmp_path / "results", CONFIG)
    texts = set(read_key_rows(folder).column("generated_text").to_pylist())
    assert texts == {
        "I cannot rate that. token ***",
        "I cannot. My key is hf_***",
        "I cannot, sk-*** is set",
        "I cannot: Authorization: Bearer ***",
        "I cannot (***)",
    }
