"""Lint the Talent-or-Luck release: what a reviewer of the stimuli would check by hand.

Structural breakage (missing placeholders, wrong option keys, empty name lists) is
already an error in `release`; here are the softer findings that the build
reports in the card instead of failing: article agreement of identity labels,
lowercase proper adjectives, pronouns that contradict the template's gender, duplicate
names, and how unbalanced the four option texts are in length (a length-biased option
set can masquerade as an attribution preference).
"""

from __future__ import annotations

import re
import statistics
from dataclasses import asdict, dataclass

from .release import CAUSES, GENDERS, Release

_PRONOUNS = {
    "female": re.compile(r"\b(he|him|his|himself)\b", re.IGNORECASE),
    "male": re.compile(r"\b(she|her|hers|herself)\b", re.IGNORECASE),
}
#: words starting with a vowel letter but a consonant sound ("a European") and vice versa.
_CONSONANT_SOUND = ("eu", "uk", "uni", "use", "usu", "uru", "one", "once")
_VOWEL_SOUND = ("hour", "honest", "heir")
_PROPER = {
    "asian",
    "hispanic",
    "eastern",
    "latino",
    "latina",
    "american",
    "african",
    "european",
    "christian",
    "muslim",
    "hindu",
    "buddhist",
    "sikh",
    "jewish",
    "jew",
}


@dataclass(frozen=True)
class Finding:
    check: str
    severity: str  # "warning" or "info"
    where: str
    message: str


def expected_article(word: str) -> str:
    """`a` or `an` for the word that follows, by a small spelling-to-sound heuristic."""
    w = word.lower()
    if w.startswith(_VOWEL_SOUND):
        return "an"
    if w.startswith(_CONSONANT_SOUND):
        return "a"
    return "an" if w[:1] in "aeiou" else "a"


def lint_label(label: str) -> list[str]:
    """Problems with one identity label such as `an east asian`."""
    problems = []
    m = re.match(r"^(a|an)\s+(\S+)", label)
    if not m:
        problems.append(f"label {label!r} does not start with 'a' or 'an'")
    elif m.group(1) != expected_article(m.group(2)):
        problems.append(f"article disagreement in {label!r}: expected '{expected_article(m.group(2))}'")
    lowered = [w for w in re.findall(r"[A-Za-z-]+", label)[1:] if w in _PROPER]
    if lowered:
        problems.append(f"proper adjective(s) in lowercase in {label!r}: {lowered}")
    return problems


def pronoun_clashes(text: str, gender: str) -> list[str]:
    """Pronouns in `text` that belong to the other gender."""
    return sorted({m.group(0) for m in _PRONOUNS[gender].finditer(text)})


def length_ratio(options: tuple[str, ...]) -> float:
    """Longest option length over shortest, in characters (1.0 = perfectly balanced)."""
    lengths = [len(o) for o in options]
    return max(lengths) / min(lengths)


def lint_release(release: Release) -> tuple[list[Finding], dict]:
    """All findings plus a summary of option-length balance per setting."""
    findings: list[Finding] = []
    for dimension, groups in release.groups.items():
        for group in groups:
            for problem in lint_label(group.label):
                sev = "warning"
                findings.append(Finding("label", sev, f"names/{dimension}.json: {group.label}", problem))
            for gender in GENDERS:
                names = group.names[gender]
                dups = sorted({n for n in names if names.count(n) > 1})
                if dups:
                    findings.append(
                        Finding(
                            "names",
                            "warning",
                            f"names/{dimension}.json: {group.label}.{gender}_names",
                            f"duplicate name(s) {dups}; sampling uses each name once",
                        )
                    )
        seen: dict[tuple[str, str], list[str]] = {}
        for group in groups:
            for gender in GENDERS:
                for n in set(group.names[gender]):
                    seen.setdefault((gender, n), []).append(group.label)
        shared = {k: v for k, v in seen.items() if len(v) > 1}
        if shared:
            examples = "; ".join(f"{n} ({g}): {', '.join(v)}" for (g, n), v in sorted(shared.items())[:5])
            findings.append(
                Finding(
                    "names",
                    "info",
                    f"names/{dimension}.json",
                    f"{len(shared)} first name(s) appear in more than one group of this dimension, e.g. {examples}",
                )
            )

    def pron(where: str, text: str, gender: str) -> None:
        clash = pronoun_clashes(text, gender)
        if clash:
            findings.append(
                Finding("pronoun", "warning", where, f"{gender} template uses {clash}: {text!r} (kept as released)")
            )

    for t in release.single:
        where = f"single_actor/{t.outcome}.json: {t.gender}.{t.domain}.short[{t.scenario}]"
        pron(where + ".initial_prompt", t.statement, t.gender)
        for cause, o in zip(CAUSES, t.options, strict=True):
            pron(f"{where}.{cause}", o, t.gender)
    for p in release.pairs:
        gx, gy = p.genders
        where = f"actor_actor/{p.outcome_config}.json: {p.domain}.short[{p.scenario}].{p.gender_pair}"
        for o in p.options_x:
            pron(where + ".X", o, gx)
        for o in p.options_y:
            pron(where + ".Y", o, gy)
    seen_obs: set[tuple] = set()
    for ob in release.observer:
        where = f"actor_observer/{ob.outcome}.json: {ob.gender}.{ob.domain}.short[{ob.scenario}]"
        pron(f"{where}.{ob.observer_cause}.initial_prompt", ob.statement, ob.gender)
        key = (ob.outcome, ob.gender, ob.domain, ob.scenario)
        if key not in seen_obs:
            seen_obs.add(key)
            for o in ob.options:
                pron(where + ".options", o, ob.gender)

    balance = {}
    for setting, option_sets in (
        ("single_actor", [t.options for t in release.single]),
        ("actor_actor", [o for p in release.pairs for o in (p.options_x, p.options_y)]),
        ("actor_observer", [t.options for t in release.observer]),
    ):
        ratios = [length_ratio(o) for o in option_sets]
        balance[setting] = {
            "templates": len(ratios),
            "mean_length_ratio": round(statistics.fmean(ratios), 4),
            "max_length_ratio": round(max(ratios), 4),
            "share_over_2": round(sum(r > 2 for r in ratios) / len(ratios), 4),
        }
    return findings, balance


def findings_as_dicts(findings: list[Finding]) -> list[dict]:
    return [asdict(f) for f in findings]
