"""What every `probes` command shares: the app, its consoles, the one-line error, progress bars, `entry`.

Errors caused by input (`ProbeError`) are printed as one clear message with exit code 1;
anything else is a bug and keeps its traceback. Everything printed on stdout and stderr,
tracebacks included, is scrubbed of Hub tokens first (`promptgen.core.secrets`).
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import sys
import time
from collections.abc import Callable
from typing import IO, Annotated, Any, NoReturn, TypeVar, cast

import typer
from rich.console import Console
from rich.markup import escape

from probes.probe_part import resolve_parts
from promptgen.core.errors import ProbeError
from promptgen.core.plugins import load_extensions
from promptgen.core.secrets import ScrubbedStream, install_log_scrubber, scrub, scrubbed_traceback

F = TypeVar("F", bound=Callable[..., Any])

app = typer.Typer(
    name="probes",
    help="Build, run, analyse and publish the social-bias probe datasets (see README.md).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class _ScrubbingConsole(Console):
    """A console of the CLI: every text it prints (results, tables, errors, warnings, progress lines) is scrubbed.

    Those texts repeat exception messages, library output (which may echo a Hub request with its
    `Authorization` header) and what a user typed or a model answered: masking here covers every
    command, present and future. Strings are scrubbed before rich lays them out (a token wrapped
    over two lines of a table would escape a mask), and what rich writes passes the scrubber again
    (`ScrubbedStream`: a table cell, a renderable).
    """

    def __init__(self, stream: str) -> None:
        # rich writes, flushes and asks isatty/fileno of its file: what ScrubbedStream provides of IO[str]
        super().__init__(file=cast("IO[str]", ScrubbedStream(stream)), stderr=stream == "stderr")

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*(scrub(o) if isinstance(o, str) else o for o in objects), **kwargs)


err = _ScrubbingConsole("stderr")
out = _ScrubbingConsole("stdout")

#: set once a vLLM engine has run in this process (see `entry`)
_ENGINE_THREADS = {"started": False}


def _fail(exc: Exception) -> NoReturn:
    """One line on stderr; exit 1, or the error's own `exit_code` (2 for a missing extra)."""
    # escaped: a message's own brackets (`pip install -e ".[hf]"`, a path) are text, not rich markup
    err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(code=getattr(exc, "exit_code", 1))


def load_extensions_or_exit() -> None:
    """Load the plugins (`promptgen.core.plugins.load_extensions`: installed entry points, then `PROBES_PLUGINS`);
    one that fails is one scrubbed line on stderr, exit code 2.

    Called when `probes.cli` is imported, before the commands are built (their `--help` lists the
    plugins' backends and probes), so outside `entry`: this is that boundary for plugins. Any
    exception a plugin raises is one line; one of another kind here is a bug of ours, still one
    scrubbed line, never a traceback holding the environment.
    """
    try:
        load_extensions()
        resolve_parts()  # the probes' parts (`ProbeSpec.analysis`, `.commands`): checked before a command lists them
    except Exception as exc:
        plugin_failed(exc)


def plugin_failed(exc: Exception) -> NoReturn:
    """What a plugin broke while the command line is put together: one scrubbed line on stderr, exit code 2."""
    text = str(exc) if isinstance(exc, ProbeError) else f"PROBES_PLUGINS: {type(exc).__name__}: {exc}"
    err.print(f"error: {' '.join(text.split())}", highlight=False, markup=False, soft_wrap=True)
    raise SystemExit(2) from None


def one_line_errors(command: F) -> F:
    """Every command's error boundary: a `ProbeError` (bad input) is one line and exit 1 (`_fail`).

    Applied where the commands are registered (`probes.cli`), so no command repeats it; any
    other exception is a bug and keeps its traceback (`entry`).
    """

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except ProbeError as exc:
            _fail(exc)

    return wrapper  # type: ignore[return-value]


def reflowed_help(doc: str | None) -> str:
    """A command's docstring as its `--help`: each paragraph one line, for the terminal to wrap.

    typer's rich help keeps a docstring's single line breaks within a paragraph, so a paragraph
    wrapped at the source's width broke again at the terminal's (a line of a word or two, each).
    """
    paragraphs = inspect.cleandoc(doc or "").split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def _warn(message: str) -> None:
    """A runner's warning (e.g. a GPU-sized model on the CPU): one line on stderr."""
    err.print(f"warning: {message}", highlight=False, soft_wrap=True)


def _progress(quiet: bool) -> Any:
    """The progress bar of a run: items done of total, items/s of this run, elapsed and ETA (on stderr)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]{task.description:<16}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=quiet,
    )


def _progress_hooks(progress: Any, label: str) -> tuple[Any, Any]:
    """(on_start, on_advance) callbacks of a run that drive `progress`, with items/s over this run's items."""
    state = {"task": 0, "started": 0.0, "scored": 0}

    def on_start(total: int, done: int) -> None:
        state["task"] = progress.add_task(label, total=total, completed=done, rate="")
        state["started"] = time.perf_counter()

    def on_advance(n: int) -> None:
        state["scored"] += n
        elapsed = time.perf_counter() - state["started"]
        progress.update(state["task"], advance=n, rate=f"{state['scored'] / elapsed:.2f} items/s" if elapsed else "")

    return on_start, on_advance


@app.callback()
def main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log debug messages.")] = False,
) -> None:
    """Social-bias probes: build prompt datasets, score models, recompute the papers' metrics."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    install_log_scrubber()  # libraries' DEBUG lines may carry the Hub token


def entry() -> None:
    """The `probes` command: `app()`, with an exit status that vLLM's threads cannot change,
    and a bug's traceback printed scrubbed of Hub tokens (`promptgen.core.secrets`).

    A vLLM engine leaves C++ threads behind that can abort the interpreter at exit (`terminate
    called without an active exception`, status 134) after the results were written and the
    engine shut down. Once an engine has run, the process flushes its output and ends with the
    command's own status, skipping the interpreter teardown those threads break.
    """
    try:
        app()
        code: Any = 0
    except SystemExit as exc:
        code = exc.code
    except Exception as exc:  # a bug: keep its traceback, but a library's text in it may echo the Hub token
        sys.stderr.write(scrubbed_traceback(exc))
        code = 1
    if _ENGINE_THREADS["started"]:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else (0 if code is None else 1))
    raise SystemExit(code)


def parse_where(specs: list[str] | None) -> dict[str, list[str]] | None:
    """`--where COLUMN=V1,V2` (repeatable) -> {column: values}; a malformed one is one `ProbeError` line."""
    if not specs:
        return None
    out: dict[str, list[str]] = {}
    for spec in specs:
        column, sep, values = spec.partition("=")
        picked = [v for v in values.split(",") if v]
        if not sep or not column.strip() or not picked:
            raise ProbeError(f"--where {spec!r}: expected COLUMN=VALUE[,VALUE...], e.g. --where variant=base,inst")
        out.setdefault(column.strip(), []).extend(picked)
    return out
