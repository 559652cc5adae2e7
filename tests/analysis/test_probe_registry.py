"""The probe registry (`promptgen.probe_registry`): a probe added through it alone is in the sweep and the report.

`fake_probe` (tests/fake_probe.py) is one module with one `register_probe(...)` call; nothing
else in the project names it. Named in `PROBES_PLUGINS`, the CLI lists it; imported, the
report gives its tables a section that opens with its headline. Built, run and analysed
through the CLI alone: tests/probes/test_fourth_probe.py.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis.pipeline import Analysis, AnalysisOptions
from analysis.probe_analysis import ProbeTables
from analysis.probe_part import ProbeAnalysis, analysis_of
from analysis.probes import section_headlines, section_of, sections, tables_of
from analysis.report import render_html
from probes.probe_part import ProbeCommands, commands_of
from promptgen.core.errors import ProbeError
from promptgen.core.probe_spec import ProbeSpec
from promptgen.core.release_format import ReleaseFormat
from promptgen.probe_registry import probe_names, probes

TESTS = Path(__file__).resolve().parents[1]
_MODULES = itertools.count()


def other_probe(
    monkeypatch: pytest.MonkeyPatch, analysis: ProbeAnalysis | None = None, commands: ProbeCommands | None = None
) -> ProbeSpec:
    """A probe "other" whose parts are these objects, in a module of its own (a new name each call), registered
    for one test (the registry is a copy, restored afterwards)."""
    import types

    import promptgen.probe_registry as registry
    from promptgen.probe_registry import register_probe

    name = f"other_parts_{next(_MODULES)}"
    module = types.ModuleType(name)
    module.ANALYSIS = analysis or ProbeAnalysis(section="Other", tables=lambda: None)  # type: ignore[attr-defined]
    module.COMMANDS = commands or ProbeCommands()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(registry, "_REGISTERED", dict(registry._REGISTERED))
    spec = ProbeSpec(
        name="other",
        builder="other",
        draft="m:f",
        analysis=f"{name}:ANALYSIS",
        commands=f"{name}:COMMANDS",
        table_prefix="other_",
        row_probes=("other",),
    )
    return register_probe(spec)


def test_the_three_probes_are_registered_in_sweep_order_with_their_aliases() -> None:
    assert list(probes())[:3] == ["talent-or-luck", "trust-game-names", "intergroup-empathy"]
    assert probe_names(["intergroup-empathy", "trust-game"]) == ["trust-game-names", "intergroup-empathy"]
    assert section_of("empathy_gap") == "Empathy" and section_of("refusals") == "Overview"
    with pytest.raises(ProbeError, match=r"--probe 'nope' is not a probe \(known: intergroup-empathy, "):
        probe_names(["nope"])


def test_each_built_in_probe_is_one_name_in_every_stage_and_its_parts_resolve_to_their_types() -> None:
    """`ProbeSpec.in_project`: `promptgen/<p>/`, `analysis/<p>/` and `probes/<p>/` share the name the import
    contracts list once; the spec's two references are a `ProbeAnalysis` and a `ProbeCommands`."""
    from promptgen.core.plugins import resolve_reference

    contract = (TESTS.parent / "pyproject.toml").read_text(encoding="utf-8").split('id = "probe-layers"', 1)[1]
    (probe_line,) = [line for line in contract.splitlines() if "attribution" in line and "|" in line]
    listed = {name.strip(' ",()') for name in probe_line.split("|")}
    built_in = [spec for spec in probes().values() if spec.draft.startswith("promptgen.")]
    assert {spec.builder for spec in built_in} == listed == {"attribution", "empathy", "trust_game"}
    for spec in built_in:
        assert spec.draft == f"promptgen.{spec.builder}.dataset:draft"
        assert spec.analysis == f"analysis.{spec.builder}.spec:ANALYSIS"
        assert spec.commands == f"probes.{spec.builder}.spec:COMMANDS"
        assert callable(resolve_reference(spec.draft)) and resolve_reference(spec.demo).runs
        tables = tables_of(analysis_of(spec))
        assert isinstance(tables, ProbeTables) and set(tables.headline_tables) <= set(tables.descriptions)
        # a probe's own commands and API live in its own room of the top stage, `probes/<p>/`
        own = commands_of(spec)
        for target in (*own.commands.values(), *own.api.values()):
            assert target.startswith(f"probes.{spec.builder}."), target
            assert resolve_reference(target) is not None
        for name, release in own.import_formats.items():  # a reader keys its rows by its own name
            reader = resolve_reference(release.format)
            assert release.format.startswith(f"probes.{spec.builder}.") and reader.name == name
        for name, release in analysis_of(spec).export_formats.items():  # a writer is its probe's analysis
            writer = resolve_reference(release.format)
            assert release.format.startswith(f"analysis.{spec.builder}.") and writer.name == name


def test_a_part_of_another_type_is_one_line_naming_the_probe_and_its_reference(monkeypatch) -> None:
    """The stage that uses a part checks its type where it resolves it (the spec holds a reference)."""
    from probes.probe_part import resolve_parts

    spec = other_probe(monkeypatch)
    module = sys.modules[spec.analysis.partition(":")[0]]
    monkeypatch.setattr(module, "ANALYSIS", {"section": "Other"})
    with pytest.raises(
        ProbeError, match=rf"^probe 'other': its analysis {spec.analysis} is a dict, not a ProbeAnalysis$"
    ):
        resolve_parts()
    monkeypatch.setattr(module, "ANALYSIS", ProbeAnalysis(section="Other", tables=lambda: "tables"))
    monkeypatch.setattr(module, "COMMANDS", analysis_of(spec))
    with pytest.raises(ProbeError, match=rf"its commands {spec.commands} are a ProbeAnalysis, not ProbeCommands$"):
        resolve_parts()
    with pytest.raises(ProbeError, match=r"^the Other analysis' tables are a str, not ProbeTables$"):
        tables_of(analysis_of(spec))
    with pytest.raises(ValueError, match=r"analysis is a reference module:attribute, got 'analysis.other'"):
        ProbeSpec(name="x", builder="x", draft="m:f", analysis="analysis.other", table_prefix="x_", row_probes=())


def test_a_probe_s_tables_are_imported_once_per_analysis(monkeypatch) -> None:
    """`probes analyze` resolves each probe's tables once, however many times the pipeline and report ask."""
    calls = []
    computed = tables_of(analysis_of(probes()["talent-or-luck"]))

    def load() -> ProbeTables:
        calls.append(1)
        return computed

    spec = other_probe(monkeypatch, ProbeAnalysis(section="Other", tables=load))
    assert [tables_of(analysis_of(spec)) for _ in range(4)] == [computed] * 4 and calls == [1]


def test_a_probe_s_own_commands_and_api_come_from_its_parts() -> None:
    """`curate-pairs` and `rewrite` are the Trust Game's and the empathy probe's, found through the registry."""
    from probes import api
    from probes.cli import commands
    from probes.probe_part import probe_extras
    from promptgen.core.plugins import resolve_reference

    by_name = dict(commands.COMMANDS)
    for spec in probes().values():
        for name, target in commands_of(spec).commands.items():
            assert by_name[name] is resolve_reference(target)
        for name, target in commands_of(spec).api.items():
            assert getattr(api, name) is resolve_reference(target) and name in api.__all__
    assert set(probe_extras("commands")) == {"curate-pairs", "rewrite"}
    names = [name for name, _ in commands.COMMANDS]
    assert names.index("lint") + 1 == names.index("curate-pairs") and names.index("rewrite") + 1 == names.index(
        "analyze"
    )
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        api.nope  # noqa: B018


def test_no_registry_loads_a_plugin_when_imported_and_load_extensions_does() -> None:
    code = (
        "import promptgen.probe_registry as r, runners.backends as b; from promptgen.core.plugins import "
        "load_extensions; print('fake-probe' in r.probes(), 'fake-third' in b.BACKENDS); load_extensions(); "
        "print('fake-probe' in r.probes(), 'fake-third' in b.BACKENDS)"
    )
    env = {
        **os.environ,
        "PROBES_PLUGINS": "fake_probe,fake_backend",
        "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path]),
    }
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["False", "False", "True", "True"], done.stderr


def test_a_plugin_probe_is_listed_by_probes_sweep_help() -> None:
    env = {
        **os.environ,
        "PROBES_PLUGINS": "fake_probe",
        "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path]),
        "COLUMNS": "250",
        "NO_COLOR": "1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "probes.cli", "sweep", "--help"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "fake-probe (fake)" in done.stdout
    without = subprocess.run(
        [sys.executable, "-m", "probes.cli", "sweep", "--help"],
        env={**env, "PROBES_PLUGINS": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "fake-probe" not in without.stdout and "talent-or-luck" in without.stdout


def test_probes_analyze_help_lists_each_registered_probe_s_metrics(fake_probe) -> None:
    """The help is composed from the probes' analyses (`ProbeAnalysis.metrics`): a plugin probe's is in it too."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path]), "COLUMNS": "120", "NO_COLOR": "1"}

    def shown(plugins: str) -> str:
        args = [sys.executable, "-m", "probes.cli", "analyze", "--help"]
        done = subprocess.run(args, env={**env, "PROBES_PLUGINS": plugins}, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return " ".join(done.stdout.split())  # the terminal's wrapping undone

    fake = fake_probe  # registered for this test only (its SECTION and METRICS)
    with_plugin, without = shown("fake_probe"), shown("")
    assert f"{fake.SECTION}: {fake.METRICS}" in with_plugin and fake.SECTION not in without
    for spec in (s for s in probes().values() if s.name != fake.NAME):  # the fixture registered it here
        found = analysis_of(spec)
        assert found.metrics and f"{found.section}: {found.metrics}" in without


def test_a_plugin_probe_s_own_command_and_api_are_in_probes_help_and_probes_api() -> None:
    env = {**os.environ, "PROBES_PLUGINS": "fake_probe", "PYTHONPATH": os.pathsep.join([str(TESTS), *sys.path])}
    code = "from probes import api; print(api.fake_groups.__module__, 'fake_groups' in api.__all__)"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["fake_probe", "True"], done.stderr
    env = {**env, "COLUMNS": "250", "NO_COLOR": "1"}
    done = subprocess.run([sys.executable, "-m", "probes.cli", "--help"], env=env, capture_output=True, text=True)
    assert re.search(r"fake-groups +Count the fake probe's statements per group", done.stdout), done.stdout


def test_the_command_line_with_the_probes_own_commands_imports_no_data_library() -> None:
    """Every command is registered, the probes' own too, and `--help` still imports no pandas or `datasets`."""
    code = (
        "import sys; from probes.cli import app; print(len(app.registered_commands), sorted(m for m in "
        "('datasets', 'pandas', 'pyarrow', 'huggingface_hub', 'torch') if m in sys.modules))"
    )
    env = {**os.environ, "PROBES_PLUGINS": ""}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["13", "[]"], done.stderr


def test_a_probe_command_named_like_a_command_of_probes_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "clashing_probe.py").write_text(
        "from analysis.probe_part import ProbeAnalysis\nfrom probes.probe_part import ProbeCommands\n"
        "from promptgen.core.probe_spec import ProbeSpec\nfrom promptgen.probe_registry import register_probe\n"
        "ANALYSIS = ProbeAnalysis(section='Clash', tables=lambda: None)\n"
        "COMMANDS = ProbeCommands(commands={'run': 'clashing_probe:nothing'})\n"
        "register_probe(ProbeSpec(name='clash', builder='clash', draft='m:f', analysis='clashing_probe:ANALYSIS',\n"
        "    commands='clashing_probe:COMMANDS', table_prefix='clash_', row_probes=('clash',)))\n"
    )
    env = {**os.environ, "PROBES_PLUGINS": "clashing_probe", "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-m", "probes.cli", "recipes"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "error: a probe's command 'run' (clashing_probe:nothing) is a command of probes already"
    ), done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_a_plugin_that_cannot_be_imported_is_one_line() -> None:
    env = {**os.environ, "PROBES_PLUGINS": "no_such_plugin_module", "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "probes.cli", "recipes"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode != 0
    assert "PROBES_PLUGINS: cannot import plugin module 'no_such_plugin_module'" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_a_registered_probe_gets_its_report_section_and_headline(fake_probe) -> None:
    fake = fake_probe
    assert probe_names(["fake"]) == [fake.NAME] and sections()[-1] == fake.SECTION
    run = {"model": "m", "model_revision": "r", "scoring": "{}"}
    scores = pd.DataFrame({**run, "group": ["north", "south"], "p_agree": [0.25, 0.75], "n": [3, 3]})
    tables = {fake.SCORES: scores}
    assert set(section_headlines(tables)) == {fake.SECTION}
    provenance = {"prompts": {"path": "prompts", "fingerprint": "ab" * 32}, "results": []}
    html = render_html(Analysis(tables, [], provenance, AnalysisOptions(), []), {}, "now")
    section = next(s for s in re.split(r"<h2[^>]*>", html) if s.startswith(fake.SECTION))
    assert "mean p(agree)" in section and "0.5" in section  # the headline: mean of 0.25 and 0.75
    assert section.index('class="headline"') < section.index(fake.SCORES)
    assert fake.DESCRIPTIONS[fake.SCORES] in section


def test_finding_the_probes_imports_no_data_library() -> None:
    """Every command's `--help` lists the probes: finding their specs imports neither pandas nor `datasets`."""
    code = (
        "import sys\nfrom promptgen.probe_registry import probes\nassert len(probes()) >= 3\n"
        "print(sorted(m for m in ('datasets', 'pandas', 'pyarrow', 'huggingface_hub') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_no_module_outside_a_probe_s_own_rooms_names_a_probe() -> None:
    """Issue #49's rule: `grep -rn 'trust_game\\|"empathy"\\|"attribution"' src` finds only the probes' own rooms."""
    found = subprocess.run(
        ["git", "grep", "-n", "-e", "trust_game", "-e", '"empathy"', "-e", '"attribution"', "--", "src"],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
    )
    assert found.returncode in (0, 1), found.stderr
    rooms = re.compile(r"src/(promptgen|analysis|probes)/(attribution|empathy|trust_game)/")
    outside = [line for line in found.stdout.splitlines() if not rooms.match(line)]
    assert found.stdout and outside == []


def test_two_probes_cannot_add_the_same_command_api_name_or_format(fake_probe, monkeypatch) -> None:
    from probes.probe_part import resolve_parts

    taken = {
        "commands": ProbeCommands(commands={"fake-groups": "m:f"}),
        "api": ProbeCommands(api={"fake_groups": "m:f"}),
        "import_formats": ProbeCommands(import_formats={"fake-release": ReleaseFormat("m:F", "x")}),
        "export_formats": ProbeAnalysis(
            section="Other", tables=lambda: None, export_formats={"fake-agreement-csv": ReleaseFormat("m:F", "x")}
        ),
    }
    for kind, part in taken.items():
        with monkeypatch.context() as scoped:
            spec = other_probe(scoped, **{"analysis" if kind == "export_formats" else "commands": part})
            name = next(iter(getattr(part, kind)))
            held = f"{fake_probe.__name__}"
            reference = spec.analysis if kind == "export_formats" else spec.commands
            with pytest.raises(ProbeError) as caught:
                resolve_parts()
            assert str(caught.value) == (
                f"probe 'other' ({reference}): {kind} name {name!r} is registered already, by 'fake-probe', in {held}"
            )
    assert "other" not in probes()  # each registration was scoped to its case


@pytest.mark.parametrize(
    ("kind", "name", "holder"),
    [
        ("export_formats", "jsonl", "by the project's own, in analysis.export"),
        ("import_formats", "talent-or-luck-csv", "by 'talent-or-luck', in probes.attribution.release_import"),
        ("export_formats", "talent-or-luck-csv", "by 'talent-or-luck', in analysis.attribution.release_export"),
    ],
)
def test_a_format_name_a_built_in_has_is_refused_where_the_parts_are_resolved(
    kind: str, name: str, holder: str, monkeypatch
) -> None:
    """Issue #69: a plugin's `jsonl` export format was registered; `--help` then showed its text while ours ran."""
    from analysis.export_format import JSONL, format_helps
    from probes.probe_part import resolve_parts
    from promptgen.probe_registry import BUILTIN_FORMATS

    assert JSONL in BUILTIN_FORMATS["export_formats"]  # the one list of our own formats holds analysis's
    formats = {name: ReleaseFormat("m:F", "x")}
    if kind == "export_formats":
        spec = other_probe(
            monkeypatch, analysis=ProbeAnalysis(section="Other", tables=lambda: None, export_formats=formats)
        )
        reference = spec.analysis
    else:
        spec = other_probe(monkeypatch, commands=ProbeCommands(import_formats=formats))
        reference = spec.commands
    with pytest.raises(ProbeError) as caught:
        resolve_parts()
    line = str(caught.value)
    assert line == f"probe 'other' ({reference}): {kind} name {name!r} is registered already, {holder}"
    assert "\n" not in line
    if kind == "export_formats":
        with pytest.raises(ProbeError):
            format_helps()  # `probes export --help` never shows the plugin's text for our name


def test_a_format_whose_object_names_another_format_is_refused(fake_probe, monkeypatch) -> None:
    """A spec pointing `--format other-release` at the fake probe's `fake-release` reader would key its rows wrongly."""
    from probes.probe_part import probe_extras
    from promptgen.core.release_format import load_format

    other = ReleaseFormat("fake_probe:FORMAT", "x")
    other_probe(monkeypatch, commands=ProbeCommands(import_formats={"other-release": other}))
    formats = probe_extras("import_formats")
    assert load_format("fake-release", formats["fake-release"]).__wrapped__ is fake_probe.FORMAT  # guarded
    with pytest.raises(ProbeError, match="--format other-release: fake_probe:FORMAT is format 'fake-release'"):
        load_format("other-release", formats["other-release"])
