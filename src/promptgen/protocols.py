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

#: the `probes run` flags a protocol may set, as `scoring_settings` keywords, and their types
SCORING_KEYS: dict[str, type | tuple[type, ...]] = {
    "scoring": str,
    "length_normalize": bool,
    "number_mode": str,
    "temperature": (int, float),
    "top_p": (int, float),
    "max_new_tokens": int,
    "seed": int,
    "tokenization": str,
    "number_parser": str,
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
