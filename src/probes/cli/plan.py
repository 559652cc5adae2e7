"""`probes plan`: price a sweep without running the model (`probes.api.plan`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from promptgen.core.errors import ProbeError

from . import options as opt
from .shared import err, out


def plan_cmd(
    dataset: Annotated[Path, typer.Argument(help="Prompt dataset folder (Hub-ready).")],
    model: Annotated[str, typer.Option("--model", "-m", help="Model folder (or Hub id): tokenizer and config.json.")],
    model_revision: opt.ModelRevision = None,
    configs: Annotated[
        list[str] | None, typer.Option("--config", "-c", help="Config to price (repeatable; default: all).")
    ] = None,
    gpu: Annotated[str, typer.Option("--gpu", help="h100, h200, a100, a6000 or l40s (dense bf16 peak).")] = "h100",
    mfu: Annotated[float, typer.Option("--mfu", help="Model FLOPs utilisation, above 0 and at most 1.")] = 0.5,
    chat: opt.Chat = None,
    items_per_call: Annotated[
        int | None, typer.Option("--items-per-call", help="Items per backend call (default: the GPU run's 1024).")
    ] = None,
    max_batch_tokens: Annotated[
        int | None, typer.Option("--max-batch-tokens", help="hf token budget (default: from the GPU's memory).")
    ] = None,
    block_size: Annotated[int, typer.Option("--block-size", help="vLLM prefix-cache block size.")] = 16,
    sample_calls: Annotated[
        int, typer.Option("--sample-calls", help="Calls counted per config; one with more is estimated from these.")
    ] = 4,
    trie_items: Annotated[
        int, typer.Option("--trie-items", help="Number items per sampled call whose trie is built.")
    ] = 16,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the sampled calls.")] = 0,
    tokens_per_s: Annotated[
        float | None, typer.Option("--tokens-per-s", help="Also give hours at this measured computed-tokens/s.")
    ] = None,
    json_out: Annotated[
        str | None,
        typer.Option(
            "--json", help="Write the full plan as JSON to this file (a new file or an earlier plan).", metavar="FILE"
        ),
    ] = None,
    number_tolerance: Annotated[
        float,
        typer.Option(
            "--number-tolerance",
            metavar="EPS",
            help="Also price a bounded run (`probes run --number-tolerance EPS`): number items computed to a certified "
            "L1 bound EPS, at the trie positions per item of --profile or --trie-positions. Default 0: not priced.",
        ),
    ] = 0.0,
    profile: Annotated[
        Path | None,
        typer.Option(
            "--profile",
            metavar="RESULTS",
            help="Results folder of a sample run (`probes run ... --limit N`): the tokens its generated answers took "
            "price the generated configs' decoding (without it every answer runs to --max-new-tokens, a ceiling); "
            "with --number-tolerance EPS, its mean trie_positions per number item scored at EPS price the bounded "
            "run. Both depend on the model and prompt: measure them.",
        ),
    ] = None,
    trie_positions: Annotated[
        float | None,
        typer.Option(
            "--trie-positions",
            metavar="N",
            help="Instead of --profile: N trie positions per number item (an exact 0-100 trie has ~203).",
        ),
    ] = None,
    scoring: Annotated[
        str | None,
        typer.Option(
            "--scoring",
            help="Price every config as `probes run --scoring` scores it: sentence or letter (choice items read "
            "from the logits; number items as exact numbers: the exact and first-token modes) or generate (prompt "
            "tokens, then decoded tokens). Default: each config's declared protocol, as a run without flags.",
        ),
    ] = None,
    max_new_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-new-tokens",
            min=1,
            help="Generated configs: most tokens per answer (default: the protocol's, else 16), as `probes run`.",
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=1, help="Price only the first N rows of each config, as `probes run --limit N`."),
    ] = None,
    decode_tokens_per_s: Annotated[
        float | None,
        typer.Option(
            "--decode-tokens-per-s",
            help="With --tokens-per-s: a measured decode rate (generated tokens/s) for the generated configs' "
            "answers (default: --tokens-per-s).",
        ),
    ] = None,
    sample: opt.SampleSize = None,
    sample_seed: opt.SampleSeed = 0,
    budget_hours: Annotated[
        float | None,
        opt.budget_hours(
            "Price the largest --sample (units per config, the same for every config) whose hours on --backend "
            "fit H, found by bisection; prints each config's units, items and hours. Then `probes run --sample N` "
            "(or --budget-hours H) scores it."
        ),
    ] = None,
    backend: Annotated[
        str, typer.Option("--backend", help="The backend whose hours --budget-hours fits: vllm or hf.")
    ] = "vllm",
    precision: Annotated[
        float | None,
        typer.Option(
            "--precision",
            metavar="EPS",
            help="Instead of --sample: the smallest sample at which every headline number's 95% sampling interval "
            "has a half-width (high - low) / 2 of at most EPS, sized from --pilot's intervals (half-widths fall as "
            "sqrt(1/n - 1/N)); prints N and prices it.",
        ),
    ] = None,
    pilot: Annotated[
        Path | None,
        typer.Option(
            "--pilot",
            metavar="RESULTS",
            help="With --precision: results folder of a small `probes run --sample n` of this model (kept: the "
            "larger sample resumes it).",
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines.")] = False,
) -> None:
    """Price a sweep without running the model: tokens per backend and mode, FLOPs, GPU hours.

    Each config is priced the way `probes run` without flags scores it (its declared protocol):
    read from the logits (mode exact, first-token, bounded: context and continuation positions) or
    generated (mode generate: prompt tokens, prefilled, then decoded tokens, each decode step priced
    at its own cost on the GPU, under each backend's batching: vLLM's continuous batching, hf's
    padded batches).
    """
    from probes import api

    if precision is not None:
        if pilot is None:
            raise ProbeError("--precision EPS sizes the sample from a pilot's intervals: give --pilot RESULTS")
        if sample is not None or budget_hours is not None:
            raise ProbeError("give one of --sample N, --budget-hours H or --precision EPS (each picks N)")
        sized = api.sample_for_precision(dataset, pilot, precision, configs=configs)
        err.print(sized.line(), highlight=False)
        sample = sized.size
    elif pilot is not None:
        raise ProbeError("--pilot RESULTS is read with --precision EPS")
    request = api.PlanRequest(
        dataset=dataset,
        model=model,
        model_revision=model_revision,
        configs=tuple(configs or ()),
        gpu=gpu,
        mfu=mfu,
        chat=chat,
        items_per_call=items_per_call,
        max_batch_tokens=max_batch_tokens,
        block_size=block_size,
        sample_calls=sample_calls,
        trie_items=trie_items,
        seed=seed,
        tokens_per_s=tokens_per_s,
        json_out=json_out,
        number_tolerance=number_tolerance,
        profile=profile,
        trie_positions=trie_positions,
        scoring=scoring,
        max_new_tokens=max_new_tokens,
        limit=limit,
        decode_tokens_per_s=decode_tokens_per_s,
        sample=sample,
        sample_seed=sample_seed,
        budget_hours=budget_hours,
        backend=backend,
    )
    plan = api.plan(request, progress=None if quiet else lambda line: err.print(line, highlight=False))
    table = Table(title=f"plan: {model} on {gpu} at MFU {mfu}")
    headers = ("config", "backend", "mode", "items", "prompt/item", "computed prompt/item", "saved/item")
    for header in (*headers, "trie min/item", "cont./item", "decoded/item", "GPU hours"):
        table.add_column(header)
    for row in api.plan_rows(plan):
        table.add_row(*(escape(cell) for cell in row))
    out.print(table)
    if plan["sample"] is not None:
        out.print(_sample_table(plan, backend))


def _sample_table(plan: dict, backend: str) -> Table:
    """Each config's sample: units of how many, items, and hours on `backend` (the budget's, else vllm's)."""
    from runners.plan.budget import run_hours

    sample = plan["sample"]
    fitted = f", the largest within {sample['budget_hours']:g} h on {backend}" if sample["budget_hours"] else ""
    hours = run_hours(plan["totals"], backend, tuple(m for m in plan["totals"].get(backend, {}) if m != "generate"))
    title = f"sample of {sample['size']:,} units per config (seed {sample['seed']}{fitted}): {hours:.3g} h on {backend}"
    table = Table(title=title)
    for header in ("config", "unit", "units", "of", "items", f"hours ({backend})"):
        table.add_column(header)
    for name, counts in plan["configs"].items():
        drawn = counts.get("sample") or {}
        one = {"totals": {backend: counts.get(backend, {})}}
        config_hours = run_hours(one["totals"], backend, tuple(m for m in counts.get(backend, {}) if m != "generate"))
        table.add_row(
            escape(name),
            escape(drawn.get("unit") or "(whole)"),
            f"{drawn.get('size', 0):,}",
            f"{drawn.get('population', 0):,}",
            f"{counts['items']:,}",
            f"{config_hours:.3g}",
        )
    return table
