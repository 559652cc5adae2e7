"""Each probe's own analysis options (`ProbeAnalysis.options`): routed to their probe, refused when no
probe declares them, and recorded in the report, for the built-in probes and a plugin one."""

from __future__ import annotations

import pytest

from analysis.attribution.options import AttributionOptions
from analysis.empathy.options import EmpathyOptions
from analysis.probe_analysis import AnalysisOptions
from analysis.probe_options import analysis_flags, probe_option_values
from analysis.probe_part import analysis_of
from promptgen.core.errors import ProbeError
from promptgen.probe_registry import probes


def test_each_flag_goes_to_the_probe_that_declares_it_and_the_rest_keep_their_defaults() -> None:
    options = AnalysisOptions.from_flags(seed=3, n_permutations=7)
    assert options.seed == 3
    assert options.probe(EmpathyOptions) == EmpathyOptions(n_permutations=7)
    assert options.probe(AttributionOptions) == AttributionOptions()  # not given: its default
    rounding = AnalysisOptions.from_flags(release_rounding=True, n_permutations=None)
    assert rounding.probe(AttributionOptions).release_rounding is True
    assert rounding.probe(EmpathyOptions).n_permutations == EmpathyOptions().n_permutations == 10_000
    assert AnalysisOptions().probe(EmpathyOptions) == EmpathyOptions()  # none given at all


def test_the_flags_are_the_specs_declarations_owned_by_their_probe() -> None:
    flags = analysis_flags()
    declared = {spec.name for spec in probes().values() if analysis_of(spec).options}
    assert {flag.owner for group in flags.values() for flag in group} == declared
    assert [(f.owner, f.declaration, f.default, f.limits) for f in flags["n_permutations"]] == [
        ("intergroup-empathy", "--permutations", 10_000, {"min": 1})
    ]
    assert flags["release_rounding"][0].kind is bool


def test_an_option_no_probe_declares_is_one_line_naming_theirs() -> None:
    with pytest.raises(ProbeError) as caught:
        AnalysisOptions.from_flags(permutation_count=5)
    assert str(caught.value) == (
        "--permutation-count: no probe takes this analysis option "
        "(theirs: talent-or-luck: --release-rounding; intergroup-empathy: --permutations)"
    )


def test_the_report_records_every_probe_s_own_values_in_report_order() -> None:
    options = AnalysisOptions.from_flags(n_permutations=5, release_rounding=True)
    assert probe_option_values(options) == [
        ("Attribution", [("--release-rounding", "on")]),
        ("Empathy", [("--permutations", 5)]),
    ]


def test_a_plugin_probe_s_option_reaches_its_analysis_and_the_report(fake_probe) -> None:
    assert [f.owner for f in analysis_flags()["round_to"]] == ["fake-probe"]
    options = AnalysisOptions.from_flags(round_to=2)
    assert options.probe(fake_probe.FakeOptions).round_to == 2
    assert ("Fake probe", [("--fake-round", 2)]) in probe_option_values(options)
    assert ("Fake probe", [("--fake-round", "default")]) in probe_option_values(AnalysisOptions())
