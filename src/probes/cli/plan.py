"""`probes plan`: price a sweep without running the model (`probes.api.plan`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from . import options as opt
from .shared import err, out


def plan_cmd(
    dataset: Annotated[Path, typer.Argument(help="Prompt dataset folder (Hub-ready).")],
    model: Annotated[str, typer.Option("--model", "-m", help="Model folder (or Hub id): tokenizer and config.json.")],
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
            help="Results folder of a sample scored at --number-tolerance EPS: its mean trie_positions per number "
            "item prices the bounded run (the positions depend on the model and prompt; measure them).",
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
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines.")] = False,
) -> None:
    """Price a sweep without running the model: tokens per backend and number mode, FLOPs, GPU hours."""
    from probes import api

    request = api.PlanRequest(
        dataset=dataset,
        model=model,
        configs=configs,
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
    )
    plan = api.plan(request, progress=None if quiet else lambda line: err.print(line, highlight=False))
    table = Table(title=f"plan: {model} on {gpu} at MFU {mfu}")
    headers = ("config", "backend", "mode", "items", "ctx/item", "computed ctx/item", "saved/item")
    for header in (*headers, "trie min/item", "cont./item", "GPU hours"):
        table.add_column(header)
    for row in api.plan_rows(plan):
        table.add_row(*(escape(cell) for cell in row))
    out.print(table)
