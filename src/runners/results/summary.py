"""What one run of one config did, and how its refused answers are shown.

`runners.run.session.Session.finish` returns a `RunSummary`; `probes run` prints its `line`, and
`probes.api.run` returns one per config. The refused-answer helpers are shared with the analysis
(`analysis.pipeline`), which shows a config whose every answer was refused the same way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runners import results as res


@dataclass
class RunSummary:
    config: str
    key: res.ResultKey
    key_dir: Path
    selected: int  # items of this shard (after --limit)
    skipped: int  # already done under the key, with the same prompt
    items: int  # scored by this run
    refusals: int  # among the items scored by this run
    parts: int  # parts written by this run
    wall_s: float
    items_per_s: float
    #: token positions computed for the scored items: what the backend reports it ran (the hf
    #: backend: shared context prefixes once, plus continuation and digit-trie positions;
    #: `runners.scoring.token_accounting`), else their prompt tokens (see `tokens_counted`)
    tokens: int = 0
    tokens_per_s: float = 0.0
    #: prompt and answer tokens of the scored items (contexts plus options; for number and
    #: generation items, contexts only), whatever was computed
    prompt_tokens: int = 0
    #: "computed" when every scored row came with the backend's computed count, else "prompt"
    tokens_counted: str = "computed"
    #: items rescored because their prompt changed since they were scored
    rescored: int = 0
    #: which scoring protocol ran: the paper's, or how the run differs from it (`resolve_scoring`)
    protocol: str = ""
    #: the first refused answers of this run, as `refused_answer` shows them (at most `REFUSED_EXAMPLES`)
    refused_examples: tuple[str, ...] = ()

    @property
    def all_refused(self) -> bool:
        """This run scored items and refused every one: its config has no answer to analyse."""
        return self.items > 0 and self.refusals == self.items

    def line(self) -> str:
        again = f", {self.rescored} rescored after a prompt change" if self.rescored else ""
        text = (
            f"{self.config}: {self.items} items scored ({self.skipped} already done{again}), "
            f"{self.refusals} refusals, {self.items_per_s:.2f} items/s, "
            f"{self.tokens_per_s:.0f} {self.tokens_counted} tokens/s, "
            f"{self.wall_s:.1f} s" + (f"; {self.protocol}" if self.protocol else "")
        )
        return text + (f"\n{self.config}: {self.refused_advice()}" if self.all_refused else "")

    def refused_advice(self) -> str:
        """`all_refused_advice` with this run's first refused answers."""
        return all_refused_advice(self.refused_examples, json.loads(self.key.scoring))


#: refused answers a run summary keeps to show (`RunSummary.refused_examples`)
REFUSED_EXAMPLES = 3


def refused_answer(row: Mapping[str, Any], width: int = 80) -> str:
    """How a refused row is shown: its generated answer (shortened), else the valid mass its distribution had."""
    text = row.get("generated_text")
    if isinstance(text, str):
        flat = " ".join(str(text).split())
        return flat if len(flat) <= width else flat[: width - 1] + "…"
    mass = row.get("valid_mass")
    return f"(valid mass {mass:.3g})" if isinstance(mass, float) and not math.isnan(mass) else "(no answer)"


def all_refused_advice(examples: Sequence[str], scoring: Mapping[str, Any]) -> str:
    """The line that says every item was refused, with the first answers and what to do instead.

    `scoring` is the run's key (`ScoringSettings.key()`): `--scoring sentence` is advised only to
    a run that asked for an answer form (generated text, or a letter) and so can gain from it.
    """
    seen = "; ".join(repr(e) for e in examples) or "none kept"
    text = f"EVERY item was refused: no answer to analyse (first answers: {seen}). "
    if scoring.get("mode") == "generate" or scoring.get("choice_mode") == "letter":
        return text + (
            "A model that does not answer in the asked form can still be read by its distribution over the "
            "answers: rerun with --scoring sentence"
        )
    return text + (
        "They were read from the distribution over the answers already, and the model put too little "
        "probability on every asked answer for one to be read"
    )
