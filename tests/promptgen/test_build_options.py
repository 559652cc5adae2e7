"""A probe's build options are its own (`ProbeSpec.build_options`, `BuildOptions.derived`).

What a probe's derive step hands a build (the trust game's curated pairs, empathy's rewrites) reaches
the drafter of the probe whose spec names it, a plugin probe's as a built-in's, with no module of
`src/` knowing it; any other probe's build refuses it before any work, naming what it takes.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import promptgen.probe_registry as registry
from promptgen.build import build
from promptgen.core.errors import RecipeError
from promptgen.core.probe_spec import ProbeSpec
from promptgen.hub.read import read_build_manifest


def test_a_plugin_probes_own_build_option_reaches_its_drafter(fake_probe, tmp_path: Path) -> None:
    """The fake probe's variant takes `note`: its drafter gets it, and writes it where its own code says."""
    handed: list[dict] = []

    def draft(recipe, sources, options):
        handed.append(dict(options.derived))
        made = fake_probe.draft(recipe, sources, options)
        return replace(made, parameters={**made.parameters, "note": options.derived.get("note")})

    fake_probe.draft_with_note = draft
    registry._REGISTERED[fake_probe.NAME] = replace(
        fake_probe.SPEC, build_options=("note",), draft="fake_probe:draft_with_note"
    )
    sources = fake_probe.FILES / "sources"
    built = build(fake_probe.NAME, out_dir=tmp_path / "out", sources=sources, derived={"note": "from a derive step"})
    assert handed == [{"note": "from a derive step"}]
    assert read_build_manifest(built.path)["parameters"]["note"] == "from a derive step"
    assert built.path.name == fake_probe.NAME  # a derive step names its new version's folder itself (its --out)


@pytest.mark.parametrize(
    ("recipe", "given", "refusal"),
    [
        (
            "fake-probe",
            {"derived": {"rewrites": object()}},
            "'fake-probe' takes no build option rewrites (its own: none)",
        ),
        (
            "trust-game-names",
            {"derived": {"rewrites": object(), "note": 1}},
            "'trust-game-names' takes no build option note, rewrites (its own: curated_pairs)",
        ),
        (
            "intergroup-empathy",
            {"derived": {"curated_pairs": ()}},
            "'intergroup-empathy' takes no build option curated_pairs (its own: rewrites)",
        ),
        ("talent-or-luck", {"max_events": 3}, "--max-events applies to event-based datasets; 'talent-or-luck' has no"),
        ("intergroup-empathy", {"derived": {"max_events": 3}}, "max_events is BuildOptions.max_events (--max-events)"),
    ],
)
def test_another_probes_build_option_is_refused_before_any_work(
    fake_probe, tmp_path: Path, recipe: str, given: dict, refusal: str
) -> None:
    """Refused before a source is read: the sources folder is empty, and nothing is written."""
    empty = tmp_path / "no-sources"
    empty.mkdir()
    with pytest.raises(RecipeError) as refused:
        build(recipe, out_dir=tmp_path / "out", sources=empty, **given)
    assert refusal in str(refused.value)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_build_option_a_spec_names_is_a_name() -> None:
    with pytest.raises(ValueError, match=r"build options are names .*\['max-events'\]"):
        ProbeSpec(
            name="p",
            builder="p",
            draft="m:f",
            analysis="m:ANALYSIS",
            table_prefix="p_",
            row_probes=("p",),
            build_options=("max-events",),
        )
