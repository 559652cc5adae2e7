"""What a sweep is about to score, priced before it scores: a `Quote` per config (`probes sweep`).

`probes plan` prices whole datasets for a model it does not load. A sweep knows more: each
config's rows after its protocol's selection, the shard and `--limit-per-config`, the scoring
settings and prompt form each config resolves to, and the loaded tokenizer. So it builds the
backend requests of a sample of those rows as the run will (`rows.prepare_request`), counts
their positions with the backend's own accounting (its spec's `token_counts`), and scales
to the rows selected. Hours are FLOPs over the GPU's peak x MFU (`pricing.hours`), or, on a
CPU, computed tokens over the rate this machine's CPU measures on the loaded model
(`cpu_tokens_per_s`).

A generated config is priced as `probes plan` prices one: its prompts, prefilled at the FLOPs
rate, then answers of `max_new_tokens` tokens (a ceiling: a greedy answer that stops early
costs less), whose decode steps the backend's own batching counts (its spec's
`generate_counts`, on one call of the run as the sample shows it) and `pricing.decode_seconds`
prices on the GPU; on a CPU at the decode rate measured on the loaded model
(`cpu_decode_tokens_per_s`).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

from runners.backends import backend_spec
from runners.plan.pricing import GPUS, ModelShape, decode_machine, decode_seconds, fixed_hours, flops
from runners.prompts import PromptConfig, chat_for, check_chat_template, rows_of
from runners.rows import cached_digit_start_ids, prepare_request, render_context
from runners.run.request import RunRequest
from runners.scoring.generate_accounting import DecodedLengths, GenerateCall, GenerateCounts
from runners.scoring.settings import ScoringSettings
from runners.scoring.token_accounting import DEFAULT_MAX_BATCH_TOKENS, DEFAULT_VLLM_BLOCK_SIZE
from runners.scoring.tokenize import encode_context

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
    #: generated configs: the tokens their answers take (`max_new_tokens` each), besides `computed_tokens` (the
    #: prompts' prefill positions)
    decoded_tokens: float = 0.0
    #: generated configs: one call of the run as the sample shows it, and the backend whose batching decodes it
    generation: GenerateCall | None = field(default=None, repr=False)
    backend: str | None = None
    #: False: the backend declares no token accounting (`BackendSpec.token_counts`, a plugin's may not), so
    #: `computed_tokens` are only its prompts' tokens and the config is not priced in hours
    priced: bool = True

    def decode(self, shape: ModelShape, gpu: str | None) -> GenerateCounts | None:
        """The decode of one call on `gpu` (None: a CPU), by the backend's own batching; None: nothing decoded here."""
        if self.generation is None or self.backend is None:
            return None
        spec = backend_spec(self.backend)
        if spec.served or spec.generate_counts is None:
            return None
        call = dataclasses.replace(self.generation, machine=decode_machine(shape, gpu))
        return spec.function("generate_counts")(call)

    def hours(
        self,
        shape: ModelShape,
        *,
        gpu: str | None,
        mfu: float,
        tokens_per_s: float | None,
        decode_tokens_per_s: float | None = None,
    ) -> float | None:
        """On `gpu` (a `pricing.GPUS` name) at `mfu`; else at `tokens_per_s`; None when neither is known.

        A generated config adds its decode: on the GPU its steps' `pricing.decode_seconds`, else its
        decode positions at `decode_tokens_per_s` (`tokens_per_s` when not measured). Both add what the
        config costs besides the model's work (`pricing.fixed_hours`).
        """
        if not self.priced:
            return None
        decoded = self.decode(shape, gpu)
        scale = self.items / decoded.items if decoded is not None and decoded.items else 0.0
        if gpu is not None:
            spent = flops(shape, self.computed_tokens, self.context_tokens_per_item + 1)
            seconds = spent / (GPUS[gpu].bf16_tflops * 1e12 * mfu)
            if decoded is not None:
                seconds += scale * decode_seconds(shape, decoded.groups, gpu, mfu)
            return seconds / 3600 + fixed_hours(self.calls)
        if not tokens_per_s:
            return None
        seconds = self.computed_tokens / tokens_per_s
        if decoded is not None:
            seconds += scale * decoded.decode_positions / (decode_tokens_per_s or tokens_per_s)
        return seconds / 3600 + fixed_hours(self.calls)


def quote_config(
    prompts: PromptConfig,
    request: RunRequest,
    tokenizer: Any,
    *,
    sample: int = QUOTE_SAMPLE,
    items_per_call: int | None = None,
    max_batch_tokens: int | None = None,
) -> Quote:
    """The rows `request` will score of `prompts` (its `selection`: all of a resolved run's) and their computed
    tokens, from a spread sample.

    `items_per_call`: the run's batch size (`request.batch_size`, else the loaded backend's default), for its calls;
    `max_batch_tokens`: the loaded hf backend's token budget, which batches its generation.
    """

    settings = request.settings if isinstance(request.settings, ScoringSettings) else ScoringSettings()
    chat = chat_for(tokenizer, request.chat)
    check_chat_template(prompts.config, tokenizer, chat)
    rows = rows_of(prompts, request.selection).rows
    if not rows:
        return Quote(prompts.config, 0, 0.0, 0.0, settings.mode)
    step = max(len(rows) / min(sample, len(rows)), 1.0)
    picked = sorted({rows[int(k * step)] for k in range(min(sample, len(rows)))})
    items = prompts.dataset.select(picked).to_list()
    encoded = [encode_context(tokenizer, render_context(tokenizer, item, chat)) for item in items]
    contexts = [len(ids) for ids in encoded]
    spec = backend_spec(request.load.backend)
    scale = len(rows) / len(items)
    per_call = request.batch_size or items_per_call or len(rows)
    calls = -(-len(rows) // per_call)
    if settings.mode == "generate":
        # batched as the backend's options say (`BackendOptions.size_call`), else by the defaults; the loaded
        # backend's own budget first (after any out-of-memory halving)
        call = request.load.own.size_call(
            GenerateCall(
                encoded,
                settings.max_new_tokens,
                DecodedLengths.ceiling(settings.max_new_tokens),
                max_batch_tokens=DEFAULT_MAX_BATCH_TOKENS,
                block_size=DEFAULT_VLLM_BLOCK_SIZE,
                sampled=settings.temperature > 0,
                items=min(per_call, len(rows)),
            ),
        )
        if max_batch_tokens:
            call = dataclasses.replace(call, max_batch_tokens=max_batch_tokens)
        counted = spec.function("generate_counts")(call) if spec.generate_counts and not spec.served else None
        # the prompts' prefill positions as the backend runs them (padding, cached blocks), per item
        computed = counted.computed_prompt_tokens / counted.items * len(items) if counted else sum(contexts)
        decoded = settings.max_new_tokens * len(rows)
        sent = float(len(rows)) if spec.served else 0.0
        return Quote(
            prompts.config,
            len(rows),
            computed * scale,
            sum(contexts) / len(items),
            "generate",
            calls,
            sent,
            decoded_tokens=decoded,
            generation=call,
            backend=spec.name,
        )
    kind = "/".join(sorted({str(item["task"]) for item in items}))
    if spec.token_counts is None:  # nothing counts its calls' positions: its prompts are counted, not priced
        return Quote(
            prompts.config, len(rows), sum(contexts) * scale, sum(contexts) / len(items), kind, calls, priced=False
        )
    digits = cached_digit_start_ids(tokenizer)
    requests = [prepare_request(item, tokenizer, chat, settings, digits) for item in items]
    counted = spec.function("token_counts")(requests, items_per_call=None)
    computed, sent = counted.computed_tokens, counted.prompts
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


def cpu_decode_tokens_per_s(
    model: Any, length: int, *, rows: int = 8, new_tokens: int = 16, seconds: float = 2.0
) -> float:
    """Decode positions/s of a short greedy `generate` on the CPU: `rows` prompts of `length` tokens, `new_tokens` each.

    The prefill (one forward pass of the prompts, timed on its own) is taken off, so the rate is that
    of the `new_tokens - 1` decode steps per row, the positions `GenerateCounts.decode_positions` counts.
    """
    import torch
    from transformers import GenerationConfig

    new_tokens = max(int(new_tokens), 2)
    ids = torch.randint(0, int(model.config.vocab_size), (rows, max(int(length), 1)))
    mask = torch.ones_like(ids)
    # every field that changes the output stated, and the answers held to `new_tokens` (no early stop)
    config = GenerationConfig(
        max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, num_beams=1, pad_token_id=0
    )
    with torch.inference_mode():
        model(input_ids=ids)  # warm-up
        start = time.perf_counter()
        model(input_ids=ids)
        prefill = time.perf_counter() - start
        model.generate(input_ids=ids, attention_mask=mask, generation_config=config)  # warm-up
        start, runs = time.perf_counter(), 0
        while time.perf_counter() - start < seconds or not runs:
            model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
            runs += 1
        per_run = (time.perf_counter() - start) / runs
    return rows * (new_tokens - 1) / max(per_run - prefill, 1e-9)
