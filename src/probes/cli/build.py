"""`probes build`, `probes lint`, `probes recipes`: a recipe and its sources -> a dataset, a lint report; the list."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from promptgen.core.build_options import MAX_EVENTS
from promptgen.probe_registry import probes

from . import options as opt
from .groups import takes
from .shared import err, out

if TYPE_CHECKING:
    from rich.progress import TaskID

#: the registered probes whose datasets are built from events (they take `--max-events`)
EVENT_PROBES = ", ".join(spec.name for spec in probes().values() if MAX_EVENTS in spec.build_options)


@takes(opt.SOURCES)
def build(
    name: opt.Recipe,
    out_dir: Annotated[
        str, typer.Option("--out", help="Parent folder; the dataset is written to OUT/<name>/.", metavar="DIR")
    ] = "datasets",
    sources: Any = None,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="Build the full cross product of every setting (OUT/<name>-full); "
            "the default recipe samples to the paper's scale.",
        ),
    ] = False,
    max_events: Annotated[
        int | None,
        typer.Option(
            "--max-events",
            min=1,
            help=f"Event-based datasets ({EVENT_PROBES}): build from N source events drawn evenly across "
            "emotions (seeded), same structure; written to OUT/<name>-eventsN.",
        ),
    ] = None,
    configs: Annotated[
        list[str] | None,
        typer.Option(
            "--config",
            "-c",
            help="Build only this config (repeatable; default: every config of the recipe); written to "
            "OUT/<name>-<config>... so it is never taken for the whole dataset.",
        ),
    ] = None,
    overwrite: opt.OverwriteDataset = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar or summary.")] = False,
) -> None:
    """Build a Hub-ready prompt dataset folder from its recipe and sources.

    Deterministic: the same recipe and sources give byte-identical parquet files and the
    same fingerprint. Atomic: OUT/<name> appears complete or not at all.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from probes import api

    started = time.perf_counter()
    progress = Progress(
        TextColumn("[bold]{task.description:<16}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=quiet,
        transient=False,
    )
    tasks: dict[str, TaskID] = {}

    def on_draft(draft) -> None:
        for config in draft.configs:
            tasks[config.name] = progress.add_task(config.name, total=config.expected_rows)

    def on_rows(config: str, n: int) -> None:
        progress.advance(tasks[config], n)

    with progress:
        result = api.build(
            name,
            out_dir=Path(out_dir),
            sources=sources,
            full=full,
            max_events=max_events,
            configs=configs,
            overwrite=overwrite,
            on_rows=on_rows,
            on_draft=on_draft,
        )
    if not quiet:
        m = result.manifest
        table = Table(title=f"{m['name']} {m['version']} -> {result.path}")
        table.add_column("config")
        table.add_column("rows", justify="right")
        table.add_column("shards", justify="right")
        for config, info in m["configs"].items():
            table.add_row(config, f"{info['rows']:,}", str(len(info["files"])))
        out.print(table)
        out.print(f"fingerprint {m['fingerprint']}  ({time.perf_counter() - started:.1f} s)")


@takes(opt.SOURCES)
def lint(
    name: opt.Recipe,
    sources: Any = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON instead of tables.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Exit with code 2 when there is any warning.")] = False,
) -> None:
    """Lint a recipe's sources (labels, pronouns, option balance, applied corrections)."""
    from probes import api

    linted = api.lint(name, sources=sources)
    recipe, report = linted.recipe, linted.report
    if as_json:
        out.print_json(json.dumps(report))
    else:
        table = Table(title=f"lint: {recipe.name} ({len(report['findings'])} findings)")
        for col in ("check", "severity", "where", "finding"):
            table.add_column(col, overflow="fold")
        for f in report["findings"]:
            table.add_row(f["check"], f["severity"], f["where"], f["message"])
        out.print(table)
        bal = Table(title="option length balance (longest / shortest option)")
        for col in ("setting", "templates", "mean ratio", "max ratio", "share > 2"):
            bal.add_column(col)
        for setting, b in report["option_length_balance"].items():
            bal.add_row(
                setting,
                str(b["templates"]),
                str(b["mean_length_ratio"]),
                str(b["max_length_ratio"]),
                str(b["share_over_2"]),
            )
        out.print(bal)
        for a in report["text_corrections_applied"]:
            out.print(
                f"corrected: {a['file']}: {a['rule']['find']!r} -> {a['rule']['replace']!r} "
                f"({a['strings_changed']} strings): {a['rule']['reason']}"
            )
        for f in report["label_corrections"]:
            out.print(f"corrected label: {f['dimension']}: {f['original']!r} -> {f['corrected']!r}: {f['reason']}")
    if strict and any(f["severity"] == "warning" for f in report["findings"]):
        raise typer.Exit(code=2)


def list_recipes_cmd() -> None:
    """List the dataset recipes found in builders/."""
    from probes import api

    table = Table()
    for col in ("name", "version", "builder", "recipe"):
        table.add_column(col)
    for entry in api.recipes():
        if entry.recipe is not None:
            table.add_row(entry.name, entry.recipe.version, entry.recipe.builder, str(entry.path))
        else:
            table.add_row(entry.name, "?", "?", f"{entry.path} (invalid: {entry.error})")
    out.print(table)
