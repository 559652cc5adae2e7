"""How many positions a run needs: vLLM's `max_model_len` from the items, capped by the model.

vLLM reserves KV-cache room for at least one sequence of `max_model_len` tokens and refuses to
start when it exceeds the model's position limit. A fixed default is wrong both ways: 4096 does
not load a 2048-position model (GPT-2, Phi-2, Falcon-7B), and a 128k-context model's own limit
asks for a KV cache most GPUs cannot hold. The probes' prompts are short, so the default is
what the items need: the longest context plus its longest continuation (or the generation
budget), rounded up to a multiple of 256 for headroom, never above the model's limit. An
explicit `--max-model-len` above the limit, or items longer than it, is an error before the
engine starts.

The longest items are found by the characters of their prompt (or messages), then tokenised
exactly as the runners tokenise them; `SAMPLE` of them suffice, since token counts follow
character counts closely within one config.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from promptgen.core.errors import ProbeError

#: config.json keys that hold a model's position limit, in the order transformers' configs use them
POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "max_sequence_length", "n_ctx")
#: the longest items (by characters) tokenised to find what a run needs
SAMPLE = 64
#: what the default rounds up to
ROUND = 256


def position_limit(config: Mapping[str, Any]) -> int | None:
    """A model's position limit from its config (a nested `text_config` counts too); None if it states none."""
    for source in (config, config.get("text_config") or {}):
        for key in POSITION_KEYS:
            value = source.get(key)
            if isinstance(value, int) and value > 0:
                return value
    return None


def text_chars(item: Mapping[str, Any]) -> int:
    messages = item.get("messages") or []
    return max(len(item.get("prompt") or ""), sum(len(m.get("content") or "") for m in messages))


def choose_max_model_len(asked: int | None, needed: int, limit: int | None, model: str) -> int:
    """`--max-model-len`: as asked (checked against the limit), else what the items need, rounded up, capped."""
    if asked is not None:
        if limit is not None and asked > limit:
            raise ProbeError(
                f"--max-model-len {asked} is above the {limit} positions of {model}; "
                f"leave it out (the items need {needed}) or give at most {limit}"
            )
        if asked < needed:
            raise ProbeError(f"--max-model-len {asked} is below the {needed} positions the longest items need")
        return asked
    if limit is not None and needed > limit:
        raise ProbeError(f"the longest items need {needed} positions, more than the {limit} of {model}")
    rounded = -(-needed // ROUND) * ROUND
    return min(rounded, limit) if limit is not None else rounded
