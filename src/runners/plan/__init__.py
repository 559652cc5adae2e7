"""`probes plan`: what a sweep will cost, priced without running the model (issue 19, item 4).

A plan needs only the model's tokenizer and `config.json`. For every config of a prompt
dataset it builds the backend requests exactly as a run does (`runners.rows.prepare_request`),
counts the token positions each backend would compute with the backends' own accounting
(`runners.scoring.token_accounting`: the functions the hf backend plans its passes with, not a copy),
and turns them into FLOPs and hours. Both backends (`hf`, `vllm`) and both number modes
(`exact`: the digit trie; `first-token`: the next-token distribution after the context, only
where every number in range is one token) are priced, with the prefix-trie minimum (every
distinct context prefix once) beside what the backend computes. A config whose protocol (or
`--scoring generate`) generates is priced as generation (mode `generate`): its prompt tokens,
prefilled, and its decoded tokens (`max_new_tokens` each, or a sample's answers), each decode
step at its own cost under the backend's batching (`BackendSpec.generate_counts`).

One job per module:

- `configs`: which configs of the folder hold scorable items, and row access to one by row
  group (`ConfigRows`), so a config of millions of rows is never loaded whole;
- `count`: the token positions of a config, counted call by call or estimated from sampled
  calls with a standard error (`count_config`, `count_call`);
- `pricing`: the model's shape and parameter count from `config.json`, FLOPs, the GPUs and
  the hours (`count_params`, `flops`, `GPUS`, `hours`);
- `profile`: a bounded run's trie positions per number item, read from a sample's results
  (`read_profile`), which price the bounded mode (`--number-tolerance`), and the lengths of a
  sample's generated answers (`read_generation_profile`), which price the decode;
- `make`: the request, checked before any work, and the plan of it (`PlanRequest`, `make_plan`);
- `output`: the `--json` file and the command line's table (`write_json`, `plan_rows`);
- `loaded`: a sweep's price on the model it has loaded, on the device it loaded on (`price_loaded`).
"""

from __future__ import annotations

from runners.plan.configs import ITEM_COLUMNS, ConfigRows, item_configs
from runners.plan.count import (
    BOUNDED,
    DEFAULT_SAMPLE_CALLS,
    DEFAULT_TRIE_ITEMS,
    GENERATE,
    GenerateTally,
    PlanSettings,
    Prepare,
    Tally,
    context_request,
    count_call,
    count_config,
    count_generation,
    run_requests,
)
from runners.plan.make import PlanRequest, check_request, default_batching, make_plan
from runners.plan.output import PLAN_OUTPUT, plan_rows, write_json
from runners.plan.pricing import (
    DEFAULT_MFU,
    GPU,
    GPUS,
    ModelShape,
    count_params,
    decode_machine,
    decode_seconds,
    decode_step_seconds,
    flops,
    generation_hours,
    hours,
    load_model_config,
)
from runners.plan.profile import GenerationProfile, TrieProfile, read_generation_profile, read_profile

__all__ = [
    "BOUNDED",
    "DEFAULT_MFU",
    "DEFAULT_SAMPLE_CALLS",
    "DEFAULT_TRIE_ITEMS",
    "GENERATE",
    "GPU",
    "GPUS",
    "ITEM_COLUMNS",
    "PLAN_OUTPUT",
    "ConfigRows",
    "GenerateTally",
    "GenerationProfile",
    "ModelShape",
    "PlanRequest",
    "PlanSettings",
    "Prepare",
    "Tally",
    "TrieProfile",
    "check_request",
    "context_request",
    "count_call",
    "count_config",
    "count_generation",
    "count_params",
    "decode_machine",
    "decode_seconds",
    "decode_step_seconds",
    "default_batching",
    "flops",
    "generation_hours",
    "hours",
    "item_configs",
    "load_model_config",
    "make_plan",
    "plan_rows",
    "read_generation_profile",
    "read_profile",
    "run_requests",
    "write_json",
]
