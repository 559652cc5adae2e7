"""How items are scored (`probes run --scoring`, `--number-mode`, ...): `ScoringSettings`, its key, its flags.

One home for the settings every row records (`scoring`) and every result key includes, so
the CLI, both drivers, `probes plan` and the analysis read one definition. The maths they
select is in `runners.scoring.distributions`; the row building that applies them is `runners.rows`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from promptgen.core.errors import ProbeError
from promptgen.protocols import Protocol
from runners.scoring.distributions import NUMBER_MODES
from runners.scoring.number_bound import FLOAT_FLOOR, check_tolerance
from runners.scoring.parse import NUMBER_PARSER, NUMBER_PARSERS

CHOICE_MODES = ("sentence", "letter")
MODES = ("score", "generate")
#: the settings that only matter in generation mode (left out of the key in score mode)
GENERATION_FIELDS = ("temperature", "top_p", "max_new_tokens", "seed", "number_parser")
#: settings that change only how the items of one task are read: for a config without such items
#: they change nothing, so they are ignored there (`ignored_fields`), with the same key and label
TASK_FIELDS: dict[str, tuple[str, ...]] = {
    "number": ("number_mode", "number_tolerance", "number_prefixes", "number_parser"),
    "choice": ("length_normalize", "label_prefixes", "tokenization"),
}
#: how a choice item's prompt and option become token ids (`runners.scoring.tokenize`): "joint" encodes
#: `prompt + option` once and cuts it at the boundary; "separate" encodes each on its own (the
#: prompt with the tokenizer's BOS policy, the option with none), as cappr and the Talent-or-Luck
#: release's scorer did
TOKENIZATIONS = ("joint", "separate")


def ignored_fields(settings: ScoringSettings, tasks: Iterable[str]) -> list[str]:
    """The settings that cannot change the scores of items of `tasks`: one rule for every flag.

    Number settings on a config without number items, choice settings on one without choice
    items, and the sampling settings when nothing is generated. `resolve_scoring` sets them to
    the protocol's values, so `--number-tolerance` on a choice config and `--temperature` in
    score mode alike leave the key and the paper's label as they are.
    """
    tasks = set(tasks)
    out = [name for task, names in TASK_FIELDS.items() if task not in tasks for name in names]
    return out + (list(GENERATION_FIELDS) if settings.mode == "score" else [])


@dataclass(frozen=True)
class ScoringSettings:
    """How items are scored; recorded in every row (`scoring`), and part of a result's key."""

    #: choice items: "sentence" (option texts as continuations) or "letter" (label next-token)
    choice_mode: str = "sentence"
    #: sentence mode: softmax over mean instead of summed token log-probabilities
    length_normalize: bool = False
    #: surface forms a label may take as the next token (letter mode)
    label_prefixes: tuple[str, ...] = ("", " ")
    #: surface forms of a number: `42` and ` 42`
    number_prefixes: tuple[str, ...] = ("", " ")
    #: number items: "exact" (the digit trie) or "first-token" (the next-token distribution
    #: after the context, over the numbers' one-token forms; `runners.scoring.distributions`)
    number_mode: str = "exact"
    #: exact number items: 0 computes every trie node; above 0, the trie is expanded only until
    #: the certified L1 bound on `number_probs` is at most this (`runners.scoring.number_bound`)
    number_tolerance: float = 0.0
    #: an item is refused when the valid mass (letter and number modes) is below this
    refusal_threshold: float = 0.5
    #: sentence mode: how prompt and option become token ids (`TOKENIZATIONS`)
    tokenization: str = "joint"
    #: "score" reads probabilities; "generate" generates text and parses the answer from it
    mode: str = "score"
    #: generation mode: 0 is greedy; above 0, sampling with top_p and a per-item seed
    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = 16
    #: generation mode: each item samples with a seed derived from this and its id, so its
    #: text does not depend on batching, sharding or order
    seed: int = 0
    #: generation mode: how a number item's answer is read (`runners.scoring.parse.NUMBER_PARSERS`)
    number_parser: str = "scale-aware"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.temperature < 0 or not 0 < self.top_p <= 1 or self.max_new_tokens < 1:
            raise ValueError("need temperature >= 0, 0 < top_p <= 1 and max_new_tokens >= 1")
        if self.choice_mode not in CHOICE_MODES:
            raise ValueError(f"choice_mode must be one of {CHOICE_MODES}, got {self.choice_mode!r}")
        if not 0.0 <= self.refusal_threshold <= 1.0:
            raise ValueError(f"refusal_threshold must be in [0, 1], got {self.refusal_threshold}")
        if self.number_mode not in NUMBER_MODES:
            raise ValueError(f"number_mode must be one of {', '.join(NUMBER_MODES)}, got {self.number_mode!r}")
        if self.tokenization not in TOKENIZATIONS:
            raise ValueError(f"tokenization must be one of {', '.join(TOKENIZATIONS)}, got {self.tokenization!r}")
        if self.number_parser not in NUMBER_PARSERS:
            raise ValueError(f"number_parser must be one of {', '.join(NUMBER_PARSERS)}, got {self.number_parser!r}")
        check_tolerance(self.number_tolerance)
        if self.number_tolerance > 0 and (self.mode != "score" or self.number_mode != "exact"):
            raise ValueError("a number tolerance applies to the exact number mode only")
        if not self.label_prefixes or not self.number_prefixes:
            raise ValueError("label_prefixes and number_prefixes must not be empty")

    def key(self) -> str:
        """A canonical string of the settings (sorted JSON), stored as the rows' `scoring`.

        In score mode the generation settings change nothing and are left out (so are the
        score-mode settings in generation mode, but for the choice mode, which picks how a
        choice answer is parsed only through the labels and options, and is kept for clarity).
        """
        values = asdict(self)
        # the number mode is in the key only when it is not the default: keys of exact runs made
        # before the mode existed stay valid, and a first-token key never equals an exact one
        if self.number_mode == "exact" or self.mode != "score":
            values.pop("number_mode")
        # likewise the tolerance: 0 (exact) keeps the keys of runs made before it existed
        if not self.number_tolerance:
            values.pop("number_tolerance")
        # and the joint tokenization, which every run made before the field had
        if self.tokenization == "joint" or self.mode != "score":
            values.pop("tokenization")
        if self.mode == "score":
            for name in (*GENERATION_FIELDS, "mode"):
                values.pop(name)
        else:
            for name in ("length_normalize", "label_prefixes", "number_prefixes", "refusal_threshold", "choice_mode"):
                values.pop(name)
            # the parse rule of generated numbers: rows parsed by another rule, or an earlier version of
            # this one, are another key (the scale-aware rule keeps its version number, as before)
            if self.number_parser == "scale-aware":
                values["number_parser"] = NUMBER_PARSER
        return json.dumps(values, sort_keys=True, separators=(",", ":"))


#: the `--scoring` names: two ways of reading probabilities, and generation
SCORING_NAMES = ("sentence", "letter", "generate")


def check_sampling(*, temperature: float, top_p: float, max_new_tokens: int) -> None:
    """The sampling flags' ranges as one `ProbeError` line naming the flag, before a model loads.

    `ScoringSettings` refuses the same values with a ValueError, which is a bug's traceback
    when it comes from a flag; nan passes a `min=0` range check, so finiteness is checked here.
    """
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ProbeError(f"--temperature must be a finite number of at least 0 (0 is greedy), got {temperature}")
    if not (math.isfinite(top_p) and 0 < top_p <= 1):
        raise ProbeError(f"--top-p must be above 0 and at most 1 (the nucleus's probability mass), got {top_p}")
    if max_new_tokens < 1:
        raise ProbeError(f"--max-new-tokens must be at least 1, got {max_new_tokens}")


def check_number_tolerance(number_tolerance: float) -> None:
    """`--number-tolerance`'s range (`number_bound.check_tolerance`) as one `ProbeError` line naming the flag."""
    try:
        check_tolerance(number_tolerance)
    except ValueError:
        raise ProbeError(
            f"--number-tolerance must be at least 0 and below 1 (0 is exact; above, an L1 bound on the number "
            f"distribution of at least {FLOAT_FLOOR:g}: a smaller one is under the float error of the "
            f"log-probabilities), got {number_tolerance}"
        ) from None


def scoring_settings(
    scoring: str = "sentence",
    *,
    length_normalize: bool = False,
    temperature: float = 0.0,
    top_p: float = 1.0,
    max_new_tokens: int = 16,
    seed: int = 0,
    number_mode: str = "exact",
    number_tolerance: float = 0.0,
    tokenization: str = "joint",
    number_parser: str = "scale-aware",
) -> ScoringSettings:
    """The settings of `probes run --scoring NAME`: `sentence`, `letter` read probabilities; `generate` generates."""
    if scoring not in SCORING_NAMES:
        raise ProbeError(f"--scoring must be sentence, letter or generate, got {scoring!r}")
    check_sampling(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens)
    check_number_tolerance(number_tolerance)
    if number_tolerance and scoring == "generate":
        raise ProbeError("--number-tolerance bounds a scored number distribution: not for --scoring generate")
    if number_parser not in NUMBER_PARSERS:
        raise ProbeError(f"--number-parser must be one of {', '.join(NUMBER_PARSERS)}, got {number_parser!r}")
    if scoring == "generate":
        # floats as floats: a protocol's `temperature: 0` and the flag's 0.0 must make one key
        return ScoringSettings(
            mode="generate",
            temperature=float(temperature),
            top_p=float(top_p),
            max_new_tokens=max_new_tokens,
            seed=seed,
            number_parser=number_parser,
        )
    if number_mode not in NUMBER_MODES:
        raise ProbeError(f"--number-mode must be one of {', '.join(NUMBER_MODES)}, got {number_mode!r}")
    if tokenization not in TOKENIZATIONS:
        raise ProbeError(f"--tokenization must be one of {', '.join(TOKENIZATIONS)}, got {tokenization!r}")
    if number_tolerance and number_mode != "exact":
        raise ProbeError(
            f"--number-tolerance bounds the exact trie; --number-mode {number_mode} reads no trie: drop one of the two"
        )
    return ScoringSettings(
        choice_mode=scoring,
        length_normalize=length_normalize,
        number_mode=number_mode,
        number_tolerance=float(number_tolerance),
        tokenization=tokenization,
    )


@dataclass(frozen=True)
class ResolvedScoring:
    """What a run scores with once the dataset's protocol and the user's flags are combined."""

    settings: ScoringSettings
    #: None: the tokenizer decides (the chat template when it has one)
    chat: bool | None
    #: the rows scored, column -> values (None: every row)
    where: Mapping[str, tuple[str, ...]] | None
    #: one line for the run summary: the paper's protocol, or how this run differs from it
    label: str


def resolve_scoring(
    protocol: Protocol | None,
    settings: ScoringSettings | Mapping[str, Any] | None,
    chat: bool | None,
    where: Mapping[str, Sequence[str]] | None = None,
    tasks: Iterable[str] | None = None,
) -> ResolvedScoring:
    """The dataset's declared protocol (docs/DESIGN.md section 6) with each setting the user gave laid over it.

    `settings` is a complete `ScoringSettings` (used as it is), a mapping of `scoring_settings`
    keywords (the flags given; the protocol supplies the rest), or None (the protocol's). `chat`
    and `where` left as None are the protocol's too. A dataset without a protocol (built before
    protocols, or a side config) gets the project's defaults. A protocol value this version
    does not know is one `ProbeError` naming it, before a model loads. With the config's item
    `tasks`, settings that do not apply to them are the protocol's (`ignored_fields`), and the
    label names the flags given that were ignored.
    """
    given = dict(settings) if isinstance(settings, Mapping) else {}
    declared = dict(protocol.scoring) if protocol is not None else {}
    try:
        paper = scoring_settings(**declared)
    except (ProbeError, TypeError) as exc:
        assert protocol is not None  # the defaults (no protocol) always make valid settings
        raise ProbeError(f"the dataset's protocol {protocol.name!r} is not one this version can run: {exc}") from exc
    resolved = settings if isinstance(settings, ScoringSettings) else scoring_settings(**{**declared, **given})
    ignored: list[str] = []
    if tasks is not None:
        unused = ignored_fields(resolved, tasks)
        changed = [f for f in unused if getattr(resolved, f) != getattr(paper, f)]
        resolved = replace(resolved, **{f: getattr(paper, f) for f in changed})
        # named: what differed, and the flags given for them (score mode keeps no sampling values to compare)
        ignored = [f for f in unused if f in changed or (f in given and given[f] != getattr(paper, f))]
    chat = chat if chat is not None else (protocol.chat if protocol is not None else None)
    rows = {k: tuple(v) for k, v in where.items()} if where is not None else (protocol.where if protocol else None)
    if protocol is None:
        label = "protocol: none declared by the dataset (the project's default scoring)"
    else:
        differs = [f.name for f in fields(ScoringSettings) if getattr(resolved, f.name) != getattr(paper, f.name)]
        differs += ["chat"] * (chat != protocol.chat) + ["where"] * (rows != protocol.where)
        label = (
            f"protocol: {protocol.name} (the paper's)"
            if not differs
            else f"protocol: custom (differs from the paper's {protocol.name} in {', '.join(differs)})"
        )
    if ignored:
        flags = ", ".join("--" + f.replace("_", "-") for f in ignored)
        label += f"; {flags} ignored: not used by this config's items"
    return ResolvedScoring(resolved, chat, rows, label)
