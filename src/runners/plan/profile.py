"""Profiles of a sample run, for pricing what it measured (`probes plan --profile RESULTS`).

How many trie positions a bounded number item needs depends on the model (how it spreads its
mass over numbers) and the prompt, not only on the tolerance: measure it on a sample, then price
the sweep with it. The profile is the mean `trie_positions` of a results folder's bounded
number rows at the planned tolerance (`read_profile`, with the results layout's own readers).

Likewise how many tokens a generated answer takes depends on the model (a model that answers
"70" stops after three tokens; one that explains runs to `max_new_tokens`): the generation
profile (`read_generation_profile`) is the distribution of tokens generated per answer of a
results folder's generation rows. Rows keep the answer's text, not its tokens, so each text is
encoded again with the plan's tokenizer, plus one token for the end of turn where the answer
stopped; an answer cut at its `max_new_tokens` counts that ceiling.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.compute as pc

from promptgen.core.errors import ProbeError
from runners.results import MANIFEST_NAME, key_folders, read_key_rows, result_configs
from runners.scoring.generate_accounting import DecodedLengths


@dataclass(frozen=True)
class TrieProfile:
    """Trie positions per number item of a bounded run, and where the figure comes from."""

    trie_positions: float
    #: "RESULTS folder (N rows, tolerance EPS)" or "--trie-positions"
    source: str
    rows: int = 0


def read_profile(results: Path, tolerance: float) -> TrieProfile:
    """The mean `trie_positions` of `results`' number rows scored at `tolerance`; one line naming the folder if none.

    Rows at another tolerance are not a profile of this one (the positions fall as the tolerance
    grows), so they are left out, and named when nothing else is there.
    """
    if not (results / MANIFEST_NAME).is_file():
        raise ProbeError(f"--profile {results}: not a results folder (no {MANIFEST_NAME})")
    total, count, others = 0.0, 0, set()
    for config in result_configs(results):
        for folder in key_folders(results, config):
            table = read_key_rows(folder, ["trie_positions", "scoring"])
            table = table.filter(pc.is_valid(table["trie_positions"]))
            # one scoring per key, in practice: each distinct one parsed once
            sums = table.group_by("scoring").aggregate([("trie_positions", "sum"), ("trie_positions", "count")])
            names = ("scoring", "trie_positions_sum", "trie_positions_count")
            for scoring, positions, rows in zip(*(sums[c].to_pylist() for c in names), strict=True):
                try:
                    eps = float(json.loads(scoring).get("number_tolerance", 0.0))
                except (TypeError, ValueError, AttributeError):
                    raise ProbeError(f"--profile {folder}: a row's `scoring` is not a scoring settings JSON") from None
                if math.isclose(eps, tolerance, rel_tol=1e-9, abs_tol=0.0):
                    total += positions
                    count += rows
                else:
                    others.add(eps)
    if not count:
        seen = f"; it has rows at tolerance {', '.join(map(str, sorted(others)))}" if others else ""
        raise ProbeError(
            f"--profile {results}: no number rows with trie_positions at --number-tolerance {tolerance}{seen} "
            "(results made before the tolerance existed have none): score a sample with "
            f"`probes run ... --number-tolerance {tolerance}` first, or give --trie-positions N"
        )
    return TrieProfile(total / count, f"{results.name} ({count} rows, tolerance {tolerance})", count)


@dataclass(frozen=True)
class GenerationProfile:
    """Tokens generated per answer of a results folder's generation rows, and where they come from."""

    #: (tokens generated, the row's `max_new_tokens`, whether it ran to that ceiling) per answer
    answers: tuple[tuple[int, int, bool], ...]
    #: "RESULTS folder (N generated rows)"
    source: str

    def lengths(self, max_new_tokens: int) -> DecodedLengths:
        """The answers' lengths under `max_new_tokens` (a greedy answer under a lower ceiling is its prefix)."""
        return DecodedLengths(dict(Counter(min(n, max_new_tokens) for n, _, _ in self.answers)))

    def truncated(self, max_new_tokens: int) -> int:
        """Answers cut at a ceiling below `max_new_tokens`: they would have run longer (the profile is then low)."""
        return sum(1 for _, ceiling, cut in self.answers if cut and ceiling < max_new_tokens)


def read_generation_profile(results: Path, tokenizer: Any) -> GenerationProfile:
    """The generated answers' lengths in `results` (module docstring); one line naming the folder if it has none."""
    if not (results / MANIFEST_NAME).is_file():
        raise ProbeError(f"--profile {results}: not a results folder (no {MANIFEST_NAME})")
    answers: list[tuple[int, int, bool]] = []
    for config in result_configs(results):
        for folder in key_folders(results, config):
            table = read_key_rows(folder, ["generated_text", "finish_reason", "scoring"])
            table = table.filter(pc.is_valid(table["generated_text"]))
            if not len(table):
                continue
            ceilings = {}
            for scoring in set(table["scoring"].to_pylist()):
                try:
                    settings = json.loads(scoring)
                    ceilings[scoring] = int(settings["max_new_tokens"]) if settings.get("mode") == "generate" else 0
                except (TypeError, ValueError, KeyError, AttributeError):
                    raise ProbeError(f"--profile {folder}: a row's `scoring` is not a scoring settings JSON") from None
            texts = table["generated_text"].to_pylist()
            ids = tokenizer(texts, add_special_tokens=False)["input_ids"] if texts else []
            rows = zip(ids, table["finish_reason"].to_pylist(), table["scoring"].to_pylist(), strict=True)
            for tokens, reason, scoring in rows:
                ceiling = ceilings[scoring]
                if not ceiling:
                    continue
                cut = reason == "length"
                answers.append((ceiling if cut else min(len(tokens) + 1, ceiling), ceiling, cut))
    if not answers:
        raise ProbeError(
            f"--profile {results}: no generated rows to measure the answers' lengths from: generate a sample "
            "first (`probes run ... --limit N`, the config's generation protocol or --scoring generate), or "
            "plan without --profile (every answer then runs to --max-new-tokens, a ceiling)"
        )
    return GenerationProfile(tuple(answers), f"{results.name} ({len(answers)} generated rows)")
