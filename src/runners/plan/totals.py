"""A plan's totals: each backend's sums per number mode and for generation, over the configs it priced.

Apart from `make` so that `budget` (which prices one sample size after another) and `make` share one sum.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from runners.backends import backend_spec, priced_backends
from runners.plan.count import GENERATE

#: the figures a number mode's totals sum (and, for a backend priced in hours, its FLOPs and hours)
NUMBER_TOTALS = (
    "items",
    "context_tokens",
    "computed_context_tokens",
    "shared_prefix_saved",
    "continuation_positions",
    "computed_tokens",
    "prefix_trie_minimum",
)
GENERATE_TOTALS = ("items", "prompt_tokens", "decoded_tokens")
GENERATE_PRICED = ("computed_prompt_tokens", "decode_positions", "decode_steps", "decode_s")
HOURS = ("flops", "gpu_hours", "fixed_hours", "hours")
GENERATE_HOURS = ("prefill_flops", "decode_flops", "prefill_hours", "decode_hours")


def plan_totals(
    per_config: Mapping[str, Any], configs: list[str], modes: tuple[str, ...], *, tokens_per_s: bool
) -> dict[str, Any]:
    """Each backend's totals per mode over the configs priced in it (number modes; `GENERATE`)."""
    totals: dict[str, Any] = {}
    for backend in priced_backends():
        served = backend_spec(backend).served
        for mode in modes:
            cells = [per_config[c][backend][mode] for c in configs if mode in per_config[c][backend]]
            if not cells:
                continue
            missing = sorted({cell["unavailable"] for cell in cells if "unavailable" in cell})
            if missing:
                totals.setdefault(backend, {})[mode] = {
                    "items": sum(cell["items"] for cell in cells),
                    "unavailable": missing[0],
                }
                continue
            generated = mode == GENERATE
            keys: tuple[str, ...] = GENERATE_TOTALS if generated else NUMBER_TOTALS
            if served:
                keys += ("prompts",)
            else:
                keys += (GENERATE_PRICED + GENERATE_HOURS if generated else ()) + HOURS
                keys += ("hours_at_tokens_per_s",) if tokens_per_s else ()
            total = {k: sum(cell[k] for cell in cells) for k in keys}
            n = max(total["items"], 1)
            if generated:
                total["prompt_tokens_se"] = math.sqrt(sum(cell["prompt_tokens_se"] ** 2 for cell in cells))
                for k in ("prompt_tokens", "decoded_tokens", *(() if served else ("computed_prompt_tokens",))):
                    total[f"{k}_per_item"] = total[k] / n
            else:
                total["computed_tokens_se"] = math.sqrt(
                    sum(
                        cell["computed_context_tokens_se"] ** 2 + cell["continuation_positions_se"] ** 2
                        for cell in cells
                    )
                )
                for k in ("context_tokens", "computed_context_tokens", "prefix_trie_minimum", "continuation_positions"):
                    total[f"{k}_per_item"] = total[k] / n
            totals.setdefault(backend, {})[mode] = total
    return totals
