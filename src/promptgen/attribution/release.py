"""Read the Talent-or-Luck release (chahatraj/TalentorLuck, data/) into typed templates.

The release is nested JSON; this module is the only place that knows its shape. Every
structural problem is a `SourceFormatError` naming the file, the JSON path and the field,
because a silently skipped template would bias every metric computed later. Text
corrections from the recipe's versioned table are applied here, and each application
is recorded so the card can list it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ..core.errors import SourceFormatError

GENDERS = ("female", "male")
OUTCOMES = ("success", "failure")
CAUSES = ("effort", "ability", "difficulty", "luck")
DIMENSIONS = ("nationality", "race", "religion")
OUTCOME_CONFIGS = {
    "both_success": ("success", "success"),
    "both_failure": ("failure", "failure"),
    "success_failure": ("success", "failure"),
}
#: option-key suffix -> (outcome, cause); keys look like `opt2_highability`.
_SUFFIX = {
    "higheffort": ("success", "effort"),
    "highability": ("success", "ability"),
    "easytask": ("success", "difficulty"),
    "goodluck": ("success", "luck"),
    "loweffort": ("failure", "effort"),
    "lowability": ("failure", "ability"),
    "difficulttask": ("failure", "difficulty"),
    "badluck": ("failure", "luck"),
}
CAUSE_SUFFIX = {(o, c): s for s, (o, c) in _SUFFIX.items()}


@cache
def observer_key(outcome: str, cause: str) -> str:
    """The release's key of an observer's statement: `y_opt2_highability` (the cause's number in CAUSES, its suffix)."""
    return f"y_opt{CAUSES.index(cause) + 1}_{CAUSE_SUFFIX[(outcome, cause)]}"


_PLACEHOLDER = re.compile(r"\{[^{}]*\}")


@dataclass(frozen=True)
class _Scenario:
    """Where a single-actor or actor-observer template sits in the release: outcome, domain, scenario, gender."""

    outcome: str
    domain: str
    scenario: int
    gender: str

    @property
    def template_id(self) -> str:
        return f"{self.outcome}.{self.domain}.{self.scenario:02d}.{self.gender}"


@dataclass(frozen=True)
class SingleTemplate(_Scenario):
    """A single-actor template: statement with `{X}`/`{dimension}`, options in CAUSES order."""

    statement: str
    instruction: str
    options: tuple[str, ...]
    option_keys: tuple[str, ...]


@dataclass(frozen=True)
class PairTemplate:
    """An actor-actor template for one gender pair; X and Y options in CAUSES order."""

    outcome_config: str
    domain: str
    scenario: int
    gender_pair: str
    statement: str
    instruction: str
    options_x: tuple[str, ...]
    options_y: tuple[str, ...]

    @property
    def genders(self) -> tuple[str, str]:
        gx, gy = self.gender_pair.split("-")
        return gx, gy

    @property
    def outcomes(self) -> tuple[str, str]:
        return OUTCOME_CONFIGS[self.outcome_config]

    @property
    def template_id(self) -> str:
        return f"{self.outcome_config}.{self.domain}.{self.scenario:02d}.{self.gender_pair}"


@dataclass(frozen=True)
class ObserverTemplate(_Scenario):
    """An actor-observer template: observer Y states `observer_cause` before the question."""

    observer_cause: str
    statement: str
    instruction: str
    options: tuple[str, ...]

    @property
    def genders(self) -> tuple[str, str]:
        """(actor X's, observer Y's): the release samples the observer's name with the actor's gender."""
        return self.gender, self.gender

    @property
    def template_id(self) -> str:
        return f"{super().template_id}.{self.observer_cause}"


@dataclass(frozen=True)
class NameGroup:
    """One identity group of a dimension with its release label and first names."""

    dimension: str
    label: str
    names: dict[str, tuple[str, ...]]  # gender -> names in release order


@dataclass(frozen=True)
class TextRule:
    """`corrections.texts`: one text fix applied to every release string that holds `find`, and why."""

    find: str
    replace: str
    reason: str


@dataclass
class Release:
    """The release's templates and name groups as read, with the corrections applied counted per rule and file."""

    single: list[SingleTemplate] = field(default_factory=list)
    pairs: list[PairTemplate] = field(default_factory=list)
    observer: list[ObserverTemplate] = field(default_factory=list)
    groups: dict[str, list[NameGroup]] = field(default_factory=dict)
    #: (rule index, file) -> number of strings changed
    corrections_applied: Counter = field(default_factory=Counter)

    @property
    def domains(self) -> list[str]:
        seen: dict[str, None] = {}
        for t in self.single:
            seen.setdefault(t.domain, None)
        return list(seen)


class _Reader:
    """Walks one JSON file, applying text rules and raising located errors."""

    def __init__(self, path: Path, display: str, rules: list[TextRule], applied: Counter) -> None:
        self.path = path
        self.file = display
        self.rules = rules
        self.applied = applied
        try:
            self.data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SourceFormatError(display, "(whole file)", f"not valid UTF-8 JSON: {exc}") from exc

    def fail(self, where: str, problem: str) -> SourceFormatError:
        return SourceFormatError(self.file, where, problem)

    def mapping(self, value: Any, where: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected a JSON object, got {type(value).__name__}")
        return value

    def get(self, obj: dict, key: str, where: str) -> Any:
        if key not in obj:
            raise self.fail(where, f"missing field {key!r}")
        return obj[key]

    def text(self, obj: dict, key: str, where: str) -> str:
        value = self.get(obj, key, where)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(f"{where}.{key}", f"expected a non-empty string, got {value!r}")
        for i, rule in enumerate(self.rules):
            if rule.find in value:
                value = value.replace(rule.find, rule.replace)
                self.applied[(i, self.file)] += 1
        return value

    def scenarios(self, domain_obj: Any, where: str) -> list:
        domain_obj = self.mapping(domain_obj, where)
        short = self.get(domain_obj, "short", where)
        if not isinstance(short, list) or not short:
            raise self.fail(f"{where}.short", "expected a non-empty list of scenarios")
        return short

    def gendered_scenarios(self, outcome: str) -> Iterator[tuple[dict[str, Any], str, dict]]:
        """(`_Scenario` fields, JSON path, template object) of each template of a gender -> domain -> `short` file."""
        top = self.mapping(self.data, "(top)")
        for gender in GENDERS:
            doms = self.mapping(self.get(top, gender, "(top)"), gender)
            for domain, dom_obj in doms.items():
                for i, t in enumerate(self.scenarios(dom_obj, f"{gender}.{domain}")):
                    where = f"{gender}.{domain}.short[{i}]"
                    place = {"outcome": outcome, "domain": domain, "scenario": i, "gender": gender}
                    yield place, where, self.mapping(t, where)

    def placeholders(self, text: str, required: tuple[str, ...], where: str) -> None:
        found = _PLACEHOLDER.findall(text)
        for ph in required:
            if ph not in found:
                raise self.fail(where, f"template lacks the placeholder {ph}: {text!r}")
        unknown = sorted(set(found) - set(required))
        if unknown:
            raise self.fail(where, f"template has unknown placeholder(s) {unknown}: {text!r}")

    def options(self, obj: dict, outcome: str, where: str, prefix: str = "opt") -> tuple[str, ...]:
        """Four options in CAUSES order from keys like `{prefix}1_higheffort`."""
        expected = {f"{prefix}{i + 1}_{CAUSE_SUFFIX[(outcome, cause)]}": cause for i, cause in enumerate(CAUSES)}
        present = [k for k in obj if k.startswith(prefix)]
        unknown = sorted(set(present) - set(expected))
        if unknown:
            raise self.fail(
                where, f"unknown option key(s) {unknown} for a {outcome} template; expected {sorted(expected)}"
            )
        by_cause = {cause: self.text(obj, key, where) for key, cause in expected.items()}
        return tuple(by_cause[c] for c in CAUSES)


def _outcome_key_check(reader: _Reader, obj: dict, allowed: set[str], where: str) -> None:
    extra = sorted(set(obj) - allowed)
    if extra:
        raise reader.fail(where, f"unexpected field(s) {extra}")


def read_single(path: Path, display: str, outcome: str, rules: list[TextRule], release: Release) -> None:
    r = _Reader(path, display, rules, release.corrections_applied)
    for place, where, t in r.gendered_scenarios(outcome):
        statement = r.text(t, "initial_prompt", where)
        r.placeholders(statement, ("{X}", "{dimension}"), f"{where}.initial_prompt")
        options = r.options(t, outcome, where)
        keys = {k for k in t if k.startswith("opt")}
        _outcome_key_check(r, t, {"initial_prompt", "instruction"} | keys, where)
        release.single.append(
            SingleTemplate(
                **place,
                statement=statement,
                instruction=r.text(t, "instruction", where),
                options=options,
                option_keys=tuple(sorted(keys)),
            )
        )


def read_pairs(path: Path, display: str, config: str, rules: list[TextRule], release: Release) -> None:
    r = _Reader(path, display, rules, release.corrections_applied)
    out_x, out_y = OUTCOME_CONFIGS[config]
    top = r.mapping(r.data, "(top)")
    for domain, dom_obj in top.items():
        for i, t in enumerate(r.scenarios(dom_obj, domain)):
            where = f"{domain}.short[{i}]"
            t = r.mapping(t, where)
            statement = r.text(t, "initial_prompt", where)
            r.placeholders(statement, ("{X}", "{dimension_1}", "{Y}", "{dimension_2}"), f"{where}.initial_prompt")
            instruction = r.text(t, "instruction", where)
            _outcome_key_check(r, t, {"initial_prompt", "instruction", "gender_pairs"}, where)
            pairs = r.mapping(r.get(t, "gender_pairs", where), f"{where}.gender_pairs")
            for pair, opts in pairs.items():
                pw = f"{where}.gender_pairs.{pair}"
                parts = pair.split("-")
                if len(parts) != 2 or any(p not in GENDERS for p in parts):
                    raise r.fail(pw, f"gender pair {pair!r} is not '<female|male>-<female|male>'")
                opts = r.mapping(opts, pw)
                _outcome_key_check(r, opts, {k for k in opts if k.startswith(("optX", "optY"))}, pw)
                release.pairs.append(
                    PairTemplate(
                        outcome_config=config,
                        domain=domain,
                        scenario=i,
                        gender_pair=pair,
                        statement=statement,
                        instruction=instruction,
                        options_x=r.options(opts, out_x, pw, prefix="optX"),
                        options_y=r.options(opts, out_y, pw, prefix="optY"),
                    )
                )


def read_observer(path: Path, display: str, outcome: str, rules: list[TextRule], release: Release) -> None:
    r = _Reader(path, display, rules, release.corrections_applied)
    cause_keys = {observer_key(outcome, c): c for c in CAUSES}
    for place, where, t in r.gendered_scenarios(outcome):
        unknown = sorted(set(t) - set(cause_keys))
        if unknown:
            raise r.fail(where, f"unknown observer-cause key(s) {unknown}; expected {sorted(cause_keys)}")
        for key, cause in cause_keys.items():
            cw = f"{where}.{key}"
            c = r.mapping(r.get(t, key, where), cw)
            statement = r.text(c, "initial_prompt", cw)
            r.placeholders(statement, ("{X}", "{dimension_1}", "{Y}", "{dimension_2}"), f"{cw}.initial_prompt")
            if statement.count("{Y}, {dimension_2}, said ") != 1:
                raise r.fail(f"{cw}.initial_prompt", "expected exactly one '{Y}, {dimension_2}, said '")
            keys = {k for k in c if k.startswith("opt")}
            _outcome_key_check(r, c, {"initial_prompt", "instruction"} | keys, cw)
            release.observer.append(
                ObserverTemplate(
                    **place,
                    observer_cause=cause,
                    statement=statement,
                    instruction=r.text(c, "instruction", cw),
                    options=r.options(c, outcome, cw),
                )
            )


def read_names(path: Path, display: str, dimension: str, release: Release) -> None:
    r = _Reader(path, display, [], release.corrections_applied)
    top = r.mapping(r.data, "(top)")
    if not top:
        raise r.fail("(top)", "no identity groups")
    groups = []
    for label, obj in top.items():
        obj = r.mapping(obj, label)
        names = {}
        for gender in GENDERS:
            key = f"{gender}_names"
            values = r.get(obj, key, label)
            if not isinstance(values, list) or not values:
                raise r.fail(f"{label}.{key}", "the name list is empty; every group needs names for both genders")
            for j, v in enumerate(values):
                if not isinstance(v, str) or not v.strip():
                    raise r.fail(f"{label}.{key}[{j}]", f"expected a non-empty name, got {v!r}")
            names[gender] = tuple(v.strip() for v in values)
        extra = sorted(set(obj) - {f"{g}_names" for g in GENDERS})
        if extra:
            raise r.fail(label, f"unexpected field(s) {extra}")
        groups.append(NameGroup(dimension=dimension, label=label, names=names))
    release.groups[dimension] = groups


#: source id in the recipe -> (reader, argument)
SOURCE_LAYOUT: dict[str, tuple[str, str]] = {
    **{f"single_actor/{o}": ("single", o) for o in OUTCOMES},
    **{f"actor_actor/{c}": ("pairs", c) for c in OUTCOME_CONFIGS},
    **{f"actor_observer/{o}": ("observer", o) for o in OUTCOMES},
    **{f"names/{d}": ("names", d) for d in DIMENSIONS},
}


def load_release(files: dict[str, tuple[Path, str]], rules: list[TextRule]) -> Release:
    """Parse every release file. `files` maps source id -> (local path, display name)."""
    missing = sorted(set(SOURCE_LAYOUT) - set(files))
    if missing:
        raise SourceFormatError("(recipe)", "sources", f"recipe lacks source id(s) {missing}")
    release = Release()
    for source_id, (kind, arg) in SOURCE_LAYOUT.items():
        path, display = files[source_id]
        if kind == "single":
            read_single(path, display, arg, rules, release)
        elif kind == "pairs":
            read_pairs(path, display, arg, rules, release)
        elif kind == "observer":
            read_observer(path, display, arg, rules, release)
        else:
            read_names(path, display, arg, release)
    return release
