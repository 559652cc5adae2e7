"""The command line: help texts, exit codes and messages of input errors."""

import json
import re

from typer.testing import CliRunner

from probes.cli import app

runner = CliRunner()


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def _flags(command) -> list[tuple[str, str | None]]:
    """(first flag, help text) of every option of a command, `--help` left out."""
    options = [p for p in command.params if p.param_type_name == "option" and p.opts[0] != "--help"]
    return [(p.opts[0], p.help) for p in options]


def test_help_lists_commands_and_documents_every_flag():
    """Every command's --help names each of its flags, and each flag has a help text of its own."""
    import typer.main

    group = typer.main.get_command(app)
    top = _plain(runner.invoke(app, ["--help"]).output)
    assert set(group.commands) == {
        "build", "run", "sweep", "lint", "curate-pairs", "rewrite", "analyze", "export", "import", "demo",
        "recipes", "publish", "plan",
    }  # fmt: skip
    assert sum(len(_flags(command)) for command in group.commands.values()) > 100  # the options are seen
    for name, command in group.commands.items():
        assert name in top
        shown = _plain(runner.invoke(app, [name, "--help"], env={"COLUMNS": "400"}, terminal_width=400).output)
        for flag, text in _flags(command):
            assert text and len(text) > 10, f"probes {name} {flag} has no help text"
            # an option's row of the panel: `│ *  --out  DIR  help` (a docstring may name the flag too)
            row = re.compile(rf"^│\s*\*?\s*{re.escape(flag)}\b")
            line = next((line for line in shown.splitlines() if row.match(line)), None)
            assert line is not None, f"probes {name} --help does not list {flag}"
            assert len(line.split(flag, 1)[1].strip()) > 10, f"probes {name} --help shows no help for {flag}"


def test_each_command_s_help_shows_its_docstring_paragraphs_unbroken():
    """A paragraph is one line at a width that holds it, not the docstring's source lines (typer keeps
    those: the terminal then wrapped each again, leaving lines of a word or two)."""
    import inspect

    import typer.main

    group = typer.main.get_command(app)
    for name, command in group.commands.items():
        shown = _plain(runner.invoke(app, [name, "--help"], env={"COLUMNS": "400"}, terminal_width=400).output)
        lines = {" ".join(line.split()) for line in shown.splitlines()}
        doc = inspect.getdoc(command.callback) or ""
        for paragraph in doc.split("\n\n"):
            text = " ".join(paragraph.split())
            if len(text) < 350:  # a longer one wraps even at 400 columns
                assert text in lines, f"probes {name} --help breaks the paragraph {text[:60]!r}..."


def test_build_then_second_build_needs_overwrite(fixture_release, tmp_path):
    sources, recipe = fixture_release
    out = tmp_path / "out"
    args = ["build", str(recipe), "--sources", str(sources), "--out", str(out), "-q"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "talent-or-luck" / "build_manifest.json").read_text())
    assert manifest["rows"]["single_actor"] == 400
    again = runner.invoke(app, args)
    assert again.exit_code == 1 and "--overwrite" in again.output and "Traceback" not in again.output
    assert runner.invoke(app, [*args, "--overwrite"]).exit_code == 0


def test_missing_source_is_a_one_line_error(fixture_release, tmp_path):
    sources, recipe = fixture_release
    (sources / "talent-or-luck" / "names" / "race.json").unlink()
    out = tmp_path / "out"
    result = runner.invoke(app, ["build", str(recipe), "--sources", str(sources), "--out", str(out)])
    assert result.exit_code == 1
    text = _plain(result.output)
    assert "names/race.json" in text and "--sources" in text and "Traceback" not in text
    assert not out.exists()


def test_unknown_recipe(tmp_path):
    result = runner.invoke(app, ["build", "no-such-thing", "--out", str(tmp_path)])
    assert result.exit_code == 1 and "talent-or-luck" in _plain(result.output)


def test_lint_command_json(fixture_release):
    sources, recipe = fixture_release
    result = runner.invoke(app, ["lint", str(recipe), "--sources", str(sources), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["label_corrections"][0]["corrected"] == "a Russian"
    assert any(f["check"] == "label" and "a hispanic" in f["where"] for f in report["findings"])
    strict = runner.invoke(app, ["lint", str(recipe), "--sources", str(sources), "--strict"])
    assert strict.exit_code == 2


def test_max_events_is_refused_for_datasets_without_events(fixture_release, tmp_path):
    sources, recipe = fixture_release
    result = runner.invoke(
        app, ["build", str(recipe), "--sources", str(sources), "--out", str(tmp_path / "o"), "--max-events", "5"]
    )
    assert result.exit_code == 1 and "no events" in _plain(result.output)
    assert not (tmp_path / "o").exists()


def test_the_scoring_flags_are_declared_once_for_the_command_line_the_settings_and_protocols() -> None:
    """`promptgen.protocols.ScoringFlags` is the one declaration: `probes run`'s scoring group is its fields in
    order, `scoring_settings` takes exactly those keywords (its defaults of each flag's type), and a protocol may
    set every one but the tolerance. A flag added in one place and not the others fails here."""
    import inspect

    from probes.cli.options import SCORING
    from promptgen.protocols import NOT_A_PROTOCOL_FLAG, SCORING_KEYS, scoring_flags
    from runners.scoring.settings import scoring_settings

    flags = scoring_flags()
    names = [flag.name for flag in flags]
    assert list(SCORING.flags) == names
    keywords = inspect.signature(scoring_settings).parameters
    assert sorted(keywords) == sorted(names)
    for flag in flags:
        assert isinstance(keywords[flag.name].default, flag.kind), flag.name
    assert list(SCORING_KEYS) == [name for name in names if name not in NOT_A_PROTOCOL_FLAG]
    text = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "250"}).output
    for flag in flags:
        assert flag.declaration.split("/")[0] in text, flag.declaration
