"""What a sweep is about to score, priced before it scores: a `Quote` per config (`probes sweep`).

`probes plan` prices whole datasets for a model it does not load. A sweep knows more: each
config's rows after its protocol's selection, the shard and `--limit-per-config`, the scoring
settings and prompt form each config resolves to, and the loaded tokenizer. So it builds the
backend requests of a sample of those rows as the run will (`rows.prepare_request`), counts
their positions with the backend's own accounting (its spec's `token_counts`), and scales
to the rows selected. Generation items cost their context plus `max_new_tokens` (a ceiling: a
greedy answer that stops early costs less). Hours are FLOPs over the GPU's peak x MFU
(`pricing.hours`), or, on a CPU, computed tokens over the rate this machine's CPU measures on
the loaded model (`cpu_tokens_per_s`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from runners.backends import backend_spec
from runners.plan.pricing import GPUS, ModelShape, fixed_hours, flops
from runners.prompts import PromptConfig, chat_for, check_chat_template
from runners.request import RunRequest
from runners.results.resume import id_column
from runners.rows import cached_digit_start_ids, prepare_request, render_context
from runners.scoring.settings import ScoringSettings
from runners.scoring.tokenize import encode_context
from runners.session import select_rows

#: rows per config whose requests are built to estimate its tokens
QUOTE_SAMPLE = 64


@dataclass(frozen=True)
class Quote:
    """One config of a sweep: the rows it will score and their estimated computed tokens."""

    config: str
    items: int
    computed_tokens: float
    context_tokens_per_item: float
    #: how the config is scored, for the table: `choice`/`number` read by the backend, or `generate`
    scoring: str
    #: backend calls the run makes (its items over the batch size): each costs `pricing.FIXED_COST["per_call_s"]`
    calls: int = 0
    #: prompts a served model is sent (`BackendSpec.served`: priced by tokens and prompts); 0 for the others
    prompts: float = 0.0

    def hours(self, shape: ModelShape, *, gpu: str | None, mfu: float, tokens_per_s: float | None) -> float | None:
        """On `gpu` (a `pricing.GPUS` name) at `mfu`; else at `tokens_per_s`; None when neither is known.

        Both add what the config costs besides the model's work (`pricing.fixed_hours`).
        """
        if gpu is not None:
            spent = flops(shape, self.computed_tokens, self.context_tokens_per_item + 1)
            return spent / (GPUS[gpu].bf16_tflops * 1e12 * mfu) / 3600 + fixed_hours(self.calls)
        return None if not tokens_per_s else self.computed_tokens / tokens_per_s / 3600 + fixed_hours(self.calls)


def quote_config(
    prompts: PromptConfig,
    request: RunRequest,
    tokenizer: Any,
    *,
    sample: int = QUOTE_SAMPLE,
    items_per_call: int | None = None,
) -> Quote:
    """The rows `request` will select of `prompts` (shard, limit) and their computed tokens, from a spread sample.

    `items_per_call`: the run's batch size (`request.batch_size`, else the loaded backend's default), for its calls.
    """

    settings = request.settings if isinstance(request.settings, ScoringSettings) else ScoringSettings()
    chat = chat_for(tokenizer, request.chat)
    check_chat_template(prompts.config, tokenizer, chat)
    rows = select_rows(id_column(prompts.dataset), request.shard_range, request.limit)
    if not rows:
        return Quote(prompts.config, 0, 0.0, 0.0, settings.mode)
    step = max(len(rows) / min(sample, len(rows)), 1.0)
    picked = sorted({rows[int(k * step)] for k in range(min(sample, len(rows)))})
    items = prompts.dataset.select(picked).to_list()
    contexts = [len(encode_context(tokenizer, render_context(tokenizer, item, chat))) for item in items]
    spec = backend_spec(request.load.backend)
    if settings.mode == "generate":
        computed = sum(contexts) + settings.max_new_tokens * len(items)
        sent = len(items)
        kind = "generate"
    else:
        digits = cached_digit_start_ids(tokenizer)
        requests = [prepare_request(item, tokenizer, chat, settings, digits) for item in items]
        counted = spec.function("token_counts")(requests, items_per_call=None)
        computed, sent = counted.computed_tokens, counted.prompts
        kind = "/".join(sorted({str(item["task"]) for item in items}))
    scale = len(rows) / len(items)
    per_call = request.batch_size or items_per_call or len(rows)
    calls = -(-len(rows) // per_call)
    sent = sent * scale if spec.served else 0.0
    return Quote(prompts.config, len(rows), computed * scale, sum(contexts) / len(items), kind, calls, sent)


def cpu_tokens_per_s(model: Any, length: int, *, rows: int = 8, seconds: float = 2.0) -> float:
    """Computed tokens/s of a plain batched forward pass on the CPU (every position's logits), as the plan counts them.

    `benchmarks/plan_accuracy.py` measures how far such a rate predicts the hf backend's time.
    """
    import torch

    ids = torch.randint(0, int(model.config.vocab_size), (rows, max(int(length), 1)))
    with torch.inference_mode():
        model(input_ids=ids)  # warm-up
        start, done = time.perf_counter(), 0
        while time.perf_counter() - start < seconds:
            model(input_ids=ids)
            done += ids.numel()
    return done / (time.perf_counter() - start)
