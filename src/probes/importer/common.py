"""What the import formats share: the files found, a file's checked rows, the row template, cell errors.

A format (`ImportFormat`) finds its files in the folder it is given (`discover`), says how
their answers were scored (the scoring settings, chat or plain), prepares a lookup per prompt
config (`prepare`), and turns one file's bytes into checked result rows (`parse`), raising one
`ProbeError` line naming the file, the row and the field for anything it cannot take.
`probes.importer.import_results` calls them twice per file: once to check everything before
anything is written, once to write.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from promptgen.core.errors import ProbeError
from runners.prompts import PromptConfig
from runners.results import RESULT_SCHEMA
from runners.scoring.settings import ScoringSettings


@dataclass(frozen=True)
class SourceFile:
    """One file of an import: where it is here, its name relative to the imported folder, its config."""

    path: Path
    #: the posix path relative to the imported folder: what the manifest records (never a local path)
    name: str
    config: str
    #: what the file's path says of its rows (the release's outcome and dimension, the authors' group)
    meta: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ParsedFile:
    """A file's rows, checked against its prompt config: the prompt rows they answer, and the result rows."""

    #: each file row's position in the prompt config, in file order
    positions: np.ndarray
    #: the result rows, in file order (made on demand: the check pass does not need them)
    rows: Callable[[], list[dict[str, Any]]]


class ImportFormat(Protocol):
    """One `probes import --format`: its files, how their answers were scored, their rows."""

    name: str
    #: the `backend` the rows and the key record: `import:<format>`
    backend: str
    #: one line for --help and errors: the layout this format reads
    layout: str

    def scoring(self) -> tuple[ScoringSettings, bool]:
        """The scoring settings and chat form the format's answers were produced with (the key's)."""
        ...

    def configs(self) -> Collection[str]:
        """Every prompt config the format can hold (what `--config` may name)."""
        ...

    def discover(self, folder: Path, source_model: str | None) -> list[SourceFile]:
        """The format's files in `folder`, sorted by name; a file that breaks the layout is an error."""
        ...

    def prepare(self, prompts: PromptConfig) -> Any:
        """What `parse` looks items up in, made once per prompt config; missing columns are an error."""
        ...

    def parse(self, source: SourceFile, data: bytes, prompts: PromptConfig, index: Any) -> ParsedFile:
        """The checked rows of one file's bytes; anything wrong is one `ProbeError` line."""
        ...


def empty_row(item_id: str, backend: str) -> dict[str, Any]:
    """A result row with every column of the schema empty but the id and backend (the session stamps the key)."""
    row: dict[str, Any] = dict.fromkeys(RESULT_SCHEMA.names)
    row.update(id=item_id, backend=backend, valid_mass=math.nan, refused=False)
    return row


def row_error(source: SourceFile, row: int, column: str, problem: str) -> ProbeError:
    """`<file>: row <n>, column <name>: <problem>`; rows count from 1 after the header."""
    return ProbeError(f"{source.name}: row {row + 1}, column {column!r}: {problem}")


def first(mask: np.ndarray) -> int | None:
    """The first True position of a boolean mask, or None."""
    hits = np.flatnonzero(mask)
    return int(hits[0]) if len(hits) else None


def need_columns(prompts: PromptConfig, columns: Sequence[str], why: str) -> None:
    """Refuse a prompt config that lacks a column the format joins or checks on."""
    missing = [c for c in columns if c not in prompts.dataset.column_names]
    if missing:
        raise ProbeError(
            f"{prompts.path} config {prompts.config!r} has no column(s) {', '.join(missing)}, which {why} needs"
        )


def first_difference(a: str, b: str) -> str:
    """Where two texts first differ, shown short: `at character 12: '...x' vs '...y'`."""
    k = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    lo = max(0, k - 20)
    return f"at character {k}: {a[lo : k + 20]!r} vs {b[lo : k + 20]!r}"
