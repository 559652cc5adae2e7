"""The scoring each dataset's paper used, as its recipe declares it per config (docs/DESIGN.md section 6).

A recipe's `protocols:` list says, for the configs its glob patterns match, how the paper
read a model's answer: the `probes run` scoring flags it amounts to (`scoring`,
`length_normalize`, `number_mode`, the sampling flags) and the prompt form (`chat`). The build
resolves it per config into the build manifest and the card, and `probes run` uses it for
every flag the user does not give (`runners.scoring.settings.resolve_scoring`), so a run
without flags reproduces the paper's method and says so.

This module knows the declaration's shape only; what the values mean is the runners'
(`runners.scoring.settings.scoring_settings`), so a recipe's values are checked against it by
the tests of every recipe in `builders/` and, for a built folder, when a run reads them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from .core.errors import RecipeError
from .core.flags import DeclaredFlag, declared_flags, option_flag


@dataclass(frozen=True)
class ScoringFlags:
    """The scoring flags of `probes run`, declared once (`promptgen.core.flags`): the command line's flags
    (`probes.cli.options.SCORING`), the keywords of `runners.scoring.settings.scoring_settings` and what a
    protocol may set (`SCORING_KEYS`) are these fields, a test ties the three. None is "not given": the
    dataset's declared protocol decides, then the project's defaults."""

    scoring: str | None = option_flag(
        "sentence (choice: option texts' log-probabilities), letter (choice: the label token), or "
        "generate (generate text and parse the answer). Number items are read exactly in the first two. "
        "Default: the dataset's declared protocol (its paper's scoring)."
    )
    length_normalize: bool | None = option_flag(
        "sentence: softmax over the options' MEAN token log-probabilities (cappr's default, which the "
        "Talent-or-Luck release used) or over their sums. Default: the dataset's protocol.",
        flag="--length-normalize/--no-length-normalize",
    )
    tokenization: str | None = option_flag(
        "sentence: joint (prompt + option encoded as one string, cut at the boundary) or separate (each "
        "encoded on its own, the prompt with the tokenizer's BOS, the option with none: what cappr and the "
        "Talent-or-Luck release did). Default: the dataset's protocol, else joint."
    )
    number_mode: str | None = option_flag(
        "Number items: exact (the digit trie: every number's full probability) or first-token (the "
        "next-token distribution after the prompt; only where every number in range is one token). "
        "Default: the dataset's protocol, else exact."
    )
    number_tolerance: float | None = option_flag(
        "Exact number items: 0 computes every node of the digit trie; EPS in (0, 1) expands the trie only "
        "until a certified bound on the L1 distance between the reported and the exact number distribution is at "
        "most EPS (relative to the resolved mass; each row records number_bound and trie_positions). Part of the "
        "result key. Default: 0.",
        metavar="EPS",
    )
    temperature: float | None = option_flag("generate: 0 is greedy; above 0 samples (at least 0; default 0).")
    top_p: float | None = option_flag("generate: nucleus sampling mass, above 0 and at most 1 (default 1).")
    max_new_tokens: int | None = option_flag(
        "generate: most tokens generated per item (default: the protocol's, else 16).", min=1
    )
    seed: int | None = option_flag("generate: base seed (each item's is derived from its id; default 0).")
    number_parser: str | None = option_flag(
        "generate, number items: first-integer (the empathy authors' released rule: the first integer, or the "
        "second where the first is outside 0-100; 0-100 on every scale; answers starting 'I cannot', 'I can't' or "
        "'I'm not rating' refused) or scale-aware (the project's: restated scales such as 'from 0 to 100' set "
        "aside, then the first integer, checked against the item's scale). Part of the result key. "
        "Default: the dataset's protocol, else scale-aware."
    )


def scoring_flags() -> list[DeclaredFlag]:
    """`ScoringFlags`' fields as flags, in their order (the command line's)."""
    return declared_flags("scoring", ScoringFlags)


#: the flags a protocol may not set: the number tolerance is the user's trade-off of time for a bound, no paper's
NOT_A_PROTOCOL_FLAG = frozenset({"number_tolerance"})
#: the `probes run` flags a protocol may set, as `scoring_settings` keywords, and their types (a float flag takes
#: an integer: a recipe's `temperature: 0`)
SCORING_KEYS: dict[str, type | tuple[type, ...]] = {
    flag.name: (int, float) if flag.kind is float else flag.kind
    for flag in scoring_flags()
    if flag.name not in NOT_A_PROTOCOL_FLAG
}
_ENTRY_KEYS = {"configs", "name", "description", "chat", "where", *SCORING_KEYS}


@dataclass(frozen=True)
class Protocol:
    """How a paper scored a config: `scoring_settings` keywords, the prompt form, a name and why."""

    name: str
    description: str
    scoring: Mapping[str, Any]
    #: True: the chat template; False: the plain prompt; None: the tokenizer decides (has a template)
    chat: bool | None = None
    #: the rows the paper scored, as column -> allowed values (`probes run --where`); None: all rows
    where: Mapping[str, tuple[str, ...]] | None = None

    def as_manifest(self) -> dict[str, Any]:
        """The build manifest's entry for one config (plain JSON)."""
        entry = {"name": self.name, "description": self.description, "scoring": dict(self.scoring), "chat": self.chat}
        if self.where:
            entry["where"] = {column: list(values) for column, values in self.where.items()}
        return entry

    @classmethod
    def from_manifest(cls, entry: Mapping[str, Any], where: str) -> Protocol:
        """A manifest entry back to a `Protocol`; a malformed one is one `RecipeError` naming `where`."""
        if not isinstance(entry, Mapping):
            raise RecipeError(f"{where}: a protocol must be a mapping, got {type(entry).__name__}")
        scoring = entry.get("scoring", {})
        if not isinstance(scoring, Mapping):
            raise RecipeError(f"{where}.scoring must be a mapping of `probes run` scoring flags")
        _check_values(where + ".scoring", scoring)
        chat = entry.get("chat")
        if chat is not None and not isinstance(chat, bool):
            raise RecipeError(f"{where}.chat must be true, false or null, got {chat!r}")
        rows = check_where(entry.get("where"), f"{where}.where")
        return cls(str(entry.get("name", "")), str(entry.get("description", "")), dict(scoring), chat, rows)


def check_where(raw: Any, where: str) -> dict[str, tuple[str, ...]] | None:
    """A row selection (column -> the values to keep), checked: None, or non-empty lists of strings."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or not raw:
        raise RecipeError(f"{where} must map column names to lists of values")
    out = {}
    for column, values in raw.items():
        if not isinstance(values, list | tuple) or not values or not all(isinstance(v, str) for v in values):
            raise RecipeError(f"{where}.{column} must be a non-empty list of strings")
        out[str(column)] = tuple(values)
    return out


@dataclass(frozen=True)
class ProtocolRule:
    """One entry of a recipe's `protocols:` list: the configs (glob patterns) it covers and its protocol."""

    configs: tuple[str, ...]
    protocol: Protocol

    def matches(self, config: str) -> bool:
        return any(fnmatchcase(config, pattern) for pattern in self.configs)


def _check_values(where: str, values: Mapping[str, Any]) -> None:
    for key, value in values.items():
        if key not in SCORING_KEYS:
            raise RecipeError(f"{where}: unknown scoring flag {key!r}; known: {', '.join(SCORING_KEYS)}")
        wanted = SCORING_KEYS[key]
        # a bool is an int in Python: a `max_new_tokens: true` is a mistake, not 1
        if not isinstance(value, wanted) or (isinstance(value, bool) and wanted is not bool):
            raise RecipeError(f"{where}.{key}: {value!r} is not a {getattr(wanted, '__name__', 'number')}")


def parse_protocols(raw: Any, where: str) -> tuple[ProtocolRule, ...]:
    """A recipe's `protocols:` list, checked; each mistake is one `RecipeError` naming the entry and field."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RecipeError(f"{where}: `protocols` must be a list of entries")
    rules = []
    for i, entry in enumerate(raw):
        at = f"{where}: protocols[{i}]"
        if not isinstance(entry, dict):
            raise RecipeError(f"{at} must be a mapping")
        unknown = sorted(set(entry) - _ENTRY_KEYS)
        if unknown:
            raise RecipeError(f"{at}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_ENTRY_KEYS))}")
        configs = entry.get("configs")
        if not isinstance(configs, list) or not configs or not all(isinstance(c, str) and c for c in configs):
            raise RecipeError(f"{at}.configs must be a non-empty list of config names or glob patterns")
        for key in ("name", "description"):
            if not isinstance(entry.get(key), str) or not entry[key].strip():
                raise RecipeError(f"{at}.{key} must be a non-empty string")
        scoring = {k: v for k, v in entry.items() if k in SCORING_KEYS}
        declared = {"name": entry["name"].strip(), "description": " ".join(entry["description"].split())}
        declared.update(scoring=scoring, chat=entry.get("chat"), where=entry.get("where"))
        protocol = Protocol.from_manifest(declared, at)
        rules.append(ProtocolRule(tuple(configs), protocol))
    return tuple(rules)


def protocols_by_config(rules: Iterable[ProtocolRule], configs: Iterable[str]) -> dict[str, Protocol]:
    """Each config's protocol: the first rule whose patterns match it (configs no rule matches have none)."""
    rules = list(rules)
    out = {}
    for config in configs:
        rule = next((r for r in rules if r.matches(config)), None)
        if rule is not None:
            out[config] = rule.protocol
    return out


def manifest_protocol(manifest: Mapping[str, Any], config: str, where: str) -> Protocol | None:
    """The protocol a build manifest declares for `config` (None: built before protocols, or a side config)."""
    entries = manifest.get("protocols") or {}
    if not isinstance(entries, Mapping):
        raise RecipeError(f"{where}: `protocols` must map config names to protocols")
    entry = entries.get(config)
    return None if entry is None else Protocol.from_manifest(entry, f"{where}: protocols.{config}")
