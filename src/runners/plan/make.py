"""`probes plan`: the plan of a request, checked before any work, batched as the run would be, counted and priced.

`make_plan` checks the request (`check_request`), reads the model's `config.json` and
tokenizer, resolves each config's scoring as `probes run` does without flags (its protocol, with
`--scoring`/`--max-new-tokens` laid over it: `runners.scoring.settings.resolve_scoring`), counts
every config with the run's own batching defaults on the planned GPU (`default_batching`): a
scored one by number mode (`count.count_config`, priced by `pricing.hours`), a generated one by
prompt and decoded tokens (`count.count_generation`, priced by `pricing.generation_hours`, the
decode at its own cost per backend), and totals them.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptgen.core.errors import ProbeError
from promptgen.core.outputs import Reference, check_output
from promptgen.hub.read import config_files, is_path_like
from runners.backends import backend_spec, priced_backends
from runners.model.device import ITEMS_PER_CALL, MAX_LOGIT_ROWS, cuda_token_budget
from runners.plan.budget import fit_budget, run_hours
from runners.plan.configs import ConfigRows, config_protocols, item_configs
from runners.plan.count import (
    BOUNDED,
    DEFAULT_SAMPLE_CALLS,
    DEFAULT_TRIE_ITEMS,
    GENERATE,
    PlanSettings,
    count_config,
    count_generation,
)
from runners.plan.output import PLAN_OUTPUT
from runners.plan.pricing import (
    DEFAULT_MFU,
    GPUS,
    ModelShape,
    count_params,
    decode_machine,
    decode_seconds,
    generation_hours,
    hours,
    load_model_config,
)
from runners.plan.profile import GenerationProfile, TrieProfile, read_generation_profile, read_profile
from runners.plan.totals import plan_totals
from runners.prompts import chat_for, check_chat_template
from runners.scoring.distributions import NUMBER_MODES
from runners.scoring.generate_accounting import DecodedLengths
from runners.scoring.settings import SCORING_NAMES, check_number_tolerance, resolve_scoring
from runners.scoring.token_accounting import DEFAULT_MAX_BATCH_TOKENS
from runners.selection.sample import Sample


@dataclass(frozen=True)
class PlanRequest:
    """Everything `probes plan` asks (checked by `check_request` before any work)."""

    dataset: Path
    model: str
    configs: tuple[str, ...] = ()
    #: the Hub model's revision (`--model-revision`: branch, tag or commit) whose config and tokenizer are priced
    model_revision: str | None = None
    gpu: str = "h100"
    mfu: float = DEFAULT_MFU
    chat: bool | None = None
    items_per_call: int | None = None
    max_batch_tokens: int | None = None
    block_size: int = 16
    sample_calls: int = DEFAULT_SAMPLE_CALLS
    trie_items: int | None = DEFAULT_TRIE_ITEMS
    seed: int = 0
    tokens_per_s: float | None = None
    modes: tuple[str, ...] = NUMBER_MODES
    #: where `--json` writes the plan (`write_json`), checked with the rest before any counting
    json_out: str | Path | None = None
    #: above 0: also price the bounded mode at this tolerance, from `profile` or `trie_positions`
    number_tolerance: float = 0.0
    #: a results folder of a bounded sample run at `number_tolerance` (`plan.profile.read_profile`)
    profile: Path | None = None
    #: or the trie positions per number item, given directly
    trie_positions: float | None = None
    #: `probes run --scoring`: sentence, letter or generate for every config (None: each config's protocol)
    scoring: str | None = None
    #: `probes run --max-new-tokens` for generated configs (None: the protocol's, else 16)
    max_new_tokens: int | None = None
    #: price only the first N rows of each config (after its protocol's row selection), as `probes run --limit`
    limit: int | None = None
    #: a measured decode rate (generated tokens/s), with `tokens_per_s` pricing a generated config's decode
    decode_tokens_per_s: float | None = None
    #: price the seeded sample of this many units per config (`probes run --sample N`, `runners.selection.sample`)
    sample: int | None = None
    sample_seed: int = 0
    #: instead of `sample`: the largest sample whose hours on `backend` fit (found by bisection)
    budget_hours: float | None = None
    #: the backend whose hours `budget_hours` fits
    backend: str = "vllm"

    @property
    def priced_modes(self) -> tuple[str, ...]:
        """The number modes priced: the run's two (or those asked), and the bounded one with a tolerance."""
        return (*self.modes, BOUNDED) if self.number_tolerance else self.modes

    def __post_init__(self) -> None:
        # `configs` may come as a list (a repeated flag) or None (none given): a tuple either way
        object.__setattr__(self, "configs", tuple(self.configs or ()))


def check_request(req: PlanRequest) -> None:
    """Every input error as one `ProbeError` line, before anything is loaded or written."""
    if req.json_out is not None:
        inputs = [("DATASET", req.dataset), Reference("--model", req.model)]
        check_output(req.json_out, PLAN_OUTPUT, flag="--json", inputs=inputs)
    if req.gpu not in GPUS:
        raise ProbeError(f"--gpu must be one of {', '.join(GPUS)}, got {req.gpu!r}")
    if not (isinstance(req.mfu, int | float) and 0 < req.mfu <= 1):
        raise ProbeError(f"--mfu must be above 0 and at most 1 (a fraction of the GPU's peak), got {req.mfu}")
    if req.tokens_per_s is not None and not req.tokens_per_s > 0:
        raise ProbeError(f"--tokens-per-s must be positive, got {req.tokens_per_s}")
    if req.decode_tokens_per_s is not None and not req.decode_tokens_per_s > 0:
        raise ProbeError(f"--decode-tokens-per-s must be positive, got {req.decode_tokens_per_s}")
    if req.scoring is not None and req.scoring not in SCORING_NAMES:
        raise ProbeError(f"--scoring must be one of {', '.join(SCORING_NAMES)}, got {req.scoring!r}")
    if req.max_new_tokens is not None and req.max_new_tokens < 1:
        raise ProbeError(f"--max-new-tokens must be at least 1, got {req.max_new_tokens}")
    if req.limit is not None and req.limit < 1:
        raise ProbeError(f"--limit must be positive, got {req.limit}")
    if req.sample is not None:
        Sample(req.sample, req.sample_seed)  # N below 1: one line
    if req.budget_hours is not None:
        if not (isinstance(req.budget_hours, int | float) and math.isfinite(req.budget_hours) and req.budget_hours > 0):
            raise ProbeError(f"--budget-hours must be a positive number of hours, got {req.budget_hours}")
        if req.sample is not None:
            raise ProbeError("give --sample N or --budget-hours H (which picks N), not both")
        if req.backend not in priced_backends() or backend_spec(req.backend).served:
            priced = [b for b in priced_backends() if not backend_spec(b).served]
            raise ProbeError(f"--backend must be one priced in hours ({', '.join(priced)}), got {req.backend!r}")
    for name, value in (("--items-per-call", req.items_per_call), ("--max-batch-tokens", req.max_batch_tokens)):
        if value is not None and value < 1:
            raise ProbeError(f"{name} must be positive, got {value}")
    if req.sample_calls < 1 or req.block_size < 1 or (req.trie_items is not None and req.trie_items < 1):
        raise ProbeError("--sample-calls, --trie-items and --block-size must be positive")
    bad = [m for m in req.modes if m not in NUMBER_MODES]
    if bad or not req.modes:
        raise ProbeError(f"--number-mode must be among {', '.join(NUMBER_MODES)}, got {', '.join(bad) or 'none'}")
    check_number_tolerance(req.number_tolerance)
    if req.trie_positions is not None and not (math.isfinite(req.trie_positions) and req.trie_positions > 0):
        raise ProbeError(f"--trie-positions must be a positive number of positions per item, got {req.trie_positions}")
    given = [
        flag for flag, v in (("--profile", req.profile), ("--trie-positions", req.trie_positions)) if v is not None
    ]
    if req.number_tolerance and len(given) != 1:
        raise ProbeError(
            "--number-tolerance prices a bounded run from its trie positions per item: give --profile RESULTS "
            "(a sample run at that tolerance) or --trie-positions N" + (" (not both)" if given else "")
        )
    if req.trie_positions is not None and not req.number_tolerance:
        raise ProbeError("--trie-positions prices a bounded run: give its --number-tolerance too")
    if req.profile is not None and not req.profile.is_dir():
        raise ProbeError(f"--profile {req.profile} is not a results folder")
    if not req.dataset.is_dir():
        raise ProbeError(f"prompt dataset folder {req.dataset} does not exist")
    folder = Path(req.model).expanduser()
    if folder.exists():
        if not folder.is_dir():
            raise ProbeError(f"--model {req.model} is not a model folder")
        if not (folder / "config.json").is_file():
            raise ProbeError(f"model folder {req.model} has no config.json (a plan needs its shape and tokenizer)")
    elif is_path_like(req.model):
        raise ProbeError(f"model folder {req.model} does not exist")


def default_batching(req: PlanRequest, config: Mapping[str, Any], shape: ModelShape) -> PlanSettings:
    """The run's defaults on the planned GPU: 1024 items per call, the token budget its free memory gives.

    The free memory is the GPU's, less the bf16 weights; the budget is the hf backend's own
    (`runners.model.device.cuda_token_budget`). vLLM's block size is its GPU default (16).
    """

    items = req.items_per_call or ITEMS_PER_CALL["cuda"]
    budget = req.max_batch_tokens
    if budget is None:
        try:
            from transformers import AutoConfig

            hf_config = AutoConfig.for_model(**dict(config)) if "model_type" in config else None
        except (ImportError, ValueError, KeyError):
            hf_config = None
        free = int(GPUS[req.gpu].memory_gib * 2**30 - 2 * shape.params)
        if hf_config is not None and free > 0:
            budget = cuda_token_budget(hf_config, "bfloat16", free, MAX_LOGIT_ROWS["cuda"])
        else:
            budget = DEFAULT_MAX_BATCH_TOKENS
    return PlanSettings(
        items_per_call=items,
        max_batch_tokens=budget,
        block_size=req.block_size,
        sample_calls=req.sample_calls,
        trie_items=req.trie_items,
        seed=req.seed,
    )


def make_plan(req: PlanRequest, *, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The plan of `req` as a JSON-ready dict (see the module docstring); writes nothing."""
    check_request(req)
    started = time.perf_counter()
    config = load_model_config(req.model, revision=req.model_revision)
    shape = count_params(config)
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(req.model, revision=req.model_revision)
    except (OSError, ValueError) as exc:
        raise ProbeError(f"cannot load the tokenizer of {req.model!r}: {exc}") from None
    chat = chat_for(tokenizer, req.chat)
    configs = list(req.configs) or item_configs(req.dataset)
    protocols = config_protocols(req.dataset, configs)
    if not configs:
        raise ProbeError(f"{req.dataset} has no config of scorable items")
    files = {c: config_files(req.dataset, c, required=True) for c in configs}  # every name checked before any counting
    settings = default_batching(req, config, shape)
    given = {k: v for k, v in (("scoring", req.scoring), ("max_new_tokens", req.max_new_tokens)) if v is not None}
    # each config's scoring as `probes run` resolves it without flags (those given laid over the protocol)
    resolved = {c: resolve_scoring(protocols.get(c), given or None, req.chat) for c in configs}
    scorings = {c: resolved[c].settings for c in configs}
    generated = [c for c in configs if scorings[c].mode == "generate"]
    profile = None
    if req.number_tolerance:
        profile = (
            read_profile(req.profile, req.number_tolerance)
            if req.profile is not None
            else TrieProfile(float(req.trie_positions or 0), "--trie-positions")
        )
        settings = dataclasses.replace(settings, trie_positions=profile.trie_positions)
    answers = generation_profile(req, tokenizer, generated)
    modes = req.priced_modes
    machine = decode_machine(shape, req.gpu)
    forms = {}
    for name in configs:
        # the form a run without flags scores: --chat/--no-chat, else the protocol's, else the tokenizer's
        forms[name] = chat_for(tokenizer, resolved[name].chat)
        check_chat_template(name, tokenizer, forms[name])
    # the rows a run scores: the protocol's selection, then the sample, then the limit
    base_rows = {
        name: ConfigRows(
            files[name], where=None if protocols.get(name) is None else protocols[name].where, limit=req.limit
        )
        for name in configs
    }

    def price_at(size: int | None) -> dict[str, Any]:
        per_config: dict[str, Any] = {}
        for name in configs:
            rows, draw = base_rows[name], None
            if size is not None:
                rows, draw = rows.sampled(size, req.sample_seed)
            per_config[name] = price_config(name, rows)
            if draw is not None:
                per_config[name]["sample"] = draw.record()
        return per_config

    def price_config(name: str, rows: ConfigRows) -> dict[str, Any]:
        protocol, form = protocols.get(name), forms[name]
        scoring = scorings[name]

        def tick(done: int, total: int) -> None:
            if progress:
                progress(f"{name}: call {done}/{total}")

        if scoring.mode == "generate":
            lengths, source = decoded_lengths(answers, scoring.max_new_tokens)
            counts = count_generation(
                rows,
                tokenizer,
                form,
                settings,
                scoring,
                lengths,
                machine=machine,
                price=lambda groups: decode_seconds(shape, groups, req.gpu, req.mfu),
                on_call=tick,
            )
            counts.update(
                scoring="generate",
                generation={
                    "max_new_tokens": scoring.max_new_tokens,
                    "temperature": scoring.temperature,
                    "decoded_tokens_per_item": lengths.mean,
                    "answers": source,
                },
            )
        else:
            counts = count_config(rows, tokenizer, form, settings, modes=modes, on_call=tick, base=scoring)
            counts.update(scoring=scoring.choice_mode)
        counts.update(chat=form, protocol=None if protocol is None else protocol.name)
        for backend in priced_backends():
            if backend_spec(backend).served:  # its hours are its server's: priced by tokens and prompts
                continue
            for mode, cell in counts[backend].items():
                if "unavailable" in cell:
                    continue
                if mode == GENERATE:
                    priced = generation_hours(
                        shape,
                        cell,
                        req.gpu,
                        req.mfu,
                        req.tokens_per_s,
                        decode_tokens_per_s=req.decode_tokens_per_s,
                        calls=counts["calls"],
                    )
                else:
                    priced = hours(shape, cell, req.gpu, req.mfu, req.tokens_per_s, calls=counts["calls"])
                cell.update(priced)
        return counts

    search: list[tuple[int, float]] = []
    size: int | None
    if req.budget_hours is not None:
        size, per_config, search = fit_budget(req, base_rows, price_at, configs, modes)
    else:
        size = req.sample
        per_config = price_at(size)
    totals = plan_totals(per_config, configs, (*modes, GENERATE), tokens_per_s=bool(req.tokens_per_s))
    return {
        "dataset": str(req.dataset),
        "model": req.model,
        "model_revision": req.model_revision,
        "model_shape": dataclasses.asdict(shape),
        "chat": chat,
        "gpu": {"name": req.gpu, **dataclasses.asdict(GPUS[req.gpu])},
        "mfu": req.mfu,
        "tokens_per_s": req.tokens_per_s,
        "batching": dataclasses.asdict(settings),
        "flops_definition": "2 x params x computed tokens + 4 x layers x attention width x (mean context + 1) "
        "x computed tokens",
        "decode_definition": "generated configs: the prompt is a prefill (flops_definition); an answer of n tokens "
        "then takes n - 1 decode steps; a step over B running sequences takes max((2 x params + B x cached tokens x "
        "KV bytes per token) / memory bandwidth, 2 x params x B / (bf16 peak x mfu)); B and the steps are each "
        "backend's batching (vllm: continuous, up to its max_num_seqs; hf: static padded batches under its token "
        "budget, each decoding until its longest answer stops)",
        "scoring": req.scoring,
        "max_new_tokens": req.max_new_tokens,
        "limit": req.limit,
        "sample": None
        if size is None
        else {
            "size": size,
            "seed": req.sample_seed,
            "budget_hours": req.budget_hours,
            "backend": req.backend if req.budget_hours is not None else None,
            "hours": run_hours(totals, req.backend, modes, measured=bool(req.tokens_per_s))
            if req.budget_hours is not None
            else None,
            "bisection": [{"size": n, "hours": h} for n, h in search],
        },
        "generation_profile": None if answers is None else answers.source,
        "counting": "exact per call where a config has at most sample_calls calls, else a ratio estimate from "
        "sampled calls (each counted exactly), with its standard error (*_se)",
        "bounded": None
        if profile is None
        else {
            "number_tolerance": req.number_tolerance,
            "trie_positions_per_item": profile.trie_positions,
            "profile": profile.source,
        },
        "configs": per_config,
        "totals": totals,
        "wall_s": time.perf_counter() - started,
    }


def generation_profile(req: PlanRequest, tokenizer: Any, generated: list[str]) -> GenerationProfile | None:
    """The `--profile` folder's generated answers when a config is generated (module `plan.profile`).

    A profile with `--number-tolerance` is the bounded run's first: without generated rows the generated
    configs then run to their ceiling. Without a tolerance it is a generation profile, so a plan with
    no generated config, or a folder without generated rows, is one line.
    """
    if req.profile is None:
        return None
    if not generated:
        if req.number_tolerance:
            return None
        raise ProbeError(
            f"--profile {req.profile} measures a bounded run (give its --number-tolerance) or the answers of "
            "generated configs, and none of the configs priced is generated (their protocol, or --scoring generate)"
        )
    try:
        return read_generation_profile(req.profile, tokenizer)
    except ProbeError:
        if req.number_tolerance:
            return None
        raise


def decoded_lengths(answers: GenerationProfile | None, max_new_tokens: int) -> tuple[DecodedLengths, str]:
    """The answers' lengths a generated config is priced with, and where they come from."""
    if answers is None:
        return DecodedLengths.ceiling(max_new_tokens), "max_new_tokens: every answer runs to it (a ceiling)"
    cut = answers.truncated(max_new_tokens)
    note = f"; {cut} of them cut at a lower max_new_tokens (the profile is low)" if cut else ""
    return answers.lengths(max_new_tokens), f"--profile {answers.source}{note}"
