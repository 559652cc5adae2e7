"""`--format empathy-authors`: the intergroup-empathy authors' generation files -> result rows.

The authors' release (houyu0930/intergroup-empathy-bias, cdfd1a6; docs/DESIGN.md section 4)
generates with `batch_pred_emotion.py`, which writes `<exp_id>/<group>_<variation>_batch-<k>.tsv`
with the columns `idx, system_prompt, user_input, response`. Their group is `ethnicity`,
`nationality` or `religion` (our categories `race`, `nationality`, `religion`), their variation
one of `origin`, `persona-1`, `persona-2`, `persona-3`, `10-scale`, `1-person`, `3-person` (our
settings P0S0T0, P1S0T0, P2S0T0, P3S0T0, P0S1T0, P0S0T1, P0S0T2); a file answers the config
`<category>_<setting>` (e.g. `race_P0S0T0`).

Each file is read as their `process_exp_results.py` reads it, `pandas.read_csv(path, sep='\\t')`
with pandas' defaults, and each answer as `str(response)` (an empty answer is the text "nan").
A file is read once, as a stream, in the blocks of rows pandas' reader infers a column's type over
(`_block_rows`: 131,072 rows of their 4 columns), so each answer reads as in their whole-file read
while memory holds one block; the prompts are compared with each block's cells column-wise in Arrow.
A row joins the prompt row whose `authors_index` is its `idx`, and its `system_prompt` and
`user_input` must be that item's system and user messages byte for byte: anything else is one
line naming the file and the idx, before anything is written. The answer is read by their rule
(`runners.scoring.parse.read_number` with the `first-integer` parser) into the row a
`--scoring generate` run writes (`runners.rows.generated_row`: `generated_text`, `parsed_value`,
`parse_status`, `refused`), under the scoring key of their protocol: greedy generation
(temperature 0) of at most 128 new tokens on the chat form, the `first-integer` parser. What the
files do not say is left empty: `context_tokens`, `finish_reason`.
"""

from __future__ import annotations

import io
import re
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pandas.core.dtypes.concat import concat_compat

from probes.importer.common import (
    ParsedFile,
    SourceFile,
    first,
    first_difference,
    layout_files,
    need_columns,
    prompt_rows,
    row_error,
    rows_to_arrow,
)
from promptgen.core.contract import arrow_table
from promptgen.core.errors import ProbeError
from promptgen.core.memory import resident_columns
from promptgen.core.secrets import known_secrets
from promptgen.empathy.prompts import AUTHORS_GROUPS, AUTHORS_VARIATIONS
from runners.exchange import GenerateRequest, Generation
from runners.prompts import PromptConfig
from runners.rows import generated_row
from runners.scoring.settings import ScoringSettings, scoring_settings

NAME = "empathy-authors"
#: the authors' group (`--group_option`) -> our category; variation (`--prompt_variation`) -> our setting
GROUPS, VARIATIONS = AUTHORS_GROUPS, AUTHORS_VARIATIONS
LAYOUT = (
    "the authors' generation folder (batch_pred_emotion.py's <exp_id>/): <group>_<variation>_batch-<k>.tsv with "
    f"columns idx, system_prompt, user_input, response; group {', '.join(GROUPS)}; "
    f"variation {', '.join(VARIATIONS)}"
)
_GROUP = "|".join(GROUPS)
_VARIATION = "|".join(map(re.escape, VARIATIONS))
_FILE = re.compile(rf"^(?P<group>{_GROUP})_(?P<variation>{_VARIATION})_batch-(?P<batch>[0-9]+)\.tsv$")
COLUMNS = ("idx", "system_prompt", "user_input", "response")
#: the authors' generation settings (`vllm_inference`) and their parser (`extract_numbers`)
TEMPERATURE = 0.0
MAX_NEW_TOKENS = 128
NUMBER_PARSER = "first-integer"
#: rows of a block whose prompts are read and compared, and whose rows are made, at a time
SLICE_ROWS = 16_384


def config_name(group: str, variation: str) -> str:
    """Our config for the authors' group and variation (`ethnicity`, `origin` -> `race_P0S0T0`)."""
    return f"{GROUPS[group]}_{VARIATIONS[variation]}"


class EmpathyAuthors:
    """The authors' `batch_pred_emotion.py` output files (module docstring)."""

    name = NAME
    backend = f"import:{NAME}"
    layout = LAYOUT

    def scoring(self) -> tuple[ScoringSettings, bool]:
        """Their vLLM call: the chat template, greedy, at most 128 new tokens; their parser."""
        settings = scoring_settings(
            "generate", temperature=TEMPERATURE, max_new_tokens=MAX_NEW_TOKENS, number_parser=NUMBER_PARSER
        )
        return settings, True

    def configs(self) -> Collection[str]:
        return tuple(config_name(g, v) for g in GROUPS for v in VARIATIONS)

    def discover(self, folder: Path, source_model: str | None) -> list[SourceFile]:
        if source_model is not None:
            raise ProbeError(
                f"--source-model picks a model folder in a layout that has several; --format {NAME} has none"
            )
        found = []
        for path in layout_files(folder, ".tsv", recursive=False, fmt=NAME):
            m = _FILE.match(path.name)
            if m is None:
                raise ProbeError(f"{path.name}: not one of the authors' files (--format {NAME} reads {LAYOUT})")
            meta = {"group": m["group"], "variation": m["variation"], "batch": m["batch"]}
            found.append(SourceFile(path, path.name, config_name(m["group"], m["variation"]), meta))
        if not found:
            raise ProbeError(f"{folder}: no .tsv files (--format {NAME} reads {LAYOUT})")
        return found

    def prepare(self, prompts: PromptConfig) -> tuple[np.ndarray, np.ndarray]:
        """(sorted authors_index, the prompt position of each): their `idx` looked up by binary search."""
        need_columns(
            prompts,
            ("authors_index", "messages", "task", "number_min", "number_max"),
            f"--format {NAME} (its idx joins authors_index; rebuild the dataset if it predates that column)",
        )
        # copied a slice at a time (`resident_columns`): read whole from the mapped config, its pages stay resident
        column = resident_columns(prompts.dataset, ["authors_index"], arrow_table(prompts.dataset))["authors_index"]
        if column.null_count:
            raise ProbeError(f"{prompts.path} config {prompts.config!r}: authors_index is null in some rows")
        values = np.asarray(column.to_numpy(), dtype=np.int64)
        order = np.argsort(values, kind="stable")
        ordered = values[order]
        del values
        if len(ordered) > 1 and (repeat := first(ordered[1:] == ordered[:-1])) is not None:
            raise ProbeError(
                f"{prompts.path} config {prompts.config!r}: authors_index {int(ordered[repeat])} is in two rows"
            )
        return ordered, order

    def parse(
        self, source: SourceFile, data: bytes, prompts: PromptConfig, index: tuple[np.ndarray, np.ndarray]
    ) -> ParsedFile:
        """The whole file's bytes as one chunk (`read`)."""
        chunks = [(c.positions, c.rows()) for c in self.read(source, io.BytesIO(data), prompts, index)]
        positions = np.concatenate([p for p, _ in chunks]) if chunks else np.zeros(0, dtype=np.int64)
        table = pa.concat_tables([t for _, t in chunks]) if chunks else rows_to_arrow([])
        return ParsedFile(positions, lambda: table)

    def read(
        self, source: SourceFile, stream: BinaryIO, prompts: PromptConfig, index: tuple[np.ndarray, np.ndarray]
    ) -> Iterator[ParsedFile]:
        """The file as their `pandas.read_csv(path, sep='\\t')` reads it, in the blocks of rows that reader infers
        each column's type over (`_block_rows`), each block checked as it is read (`_Chunk`). A block whose answers
        all read as integers gives its rows at the end of the file: their text is what the whole file's answer
        column makes of them (an integer 70 is "70.0" when the column is all numbers and some are not integers)."""
        try:  # as their process_exp_results.py reads it: pandas' defaults, tab-separated
            reader = pd.read_csv(stream, sep="\t", iterator=True)
        except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
            raise _unreadable(source, exc) from exc
        with reader:
            block = _block_rows(getattr(getattr(reader._engine, "_reader", None), "table_width", 0) or len(COLUMNS))
            seen = _Seen()
            secrets = known_secrets()  # read once per file, not once per answer
            held: list[tuple[_Chunk, np.ndarray]] = []  # integer answers, made at the end
            samples: list[Any] = []  # one answer of each block: the whole column's type, as pandas concatenates
            offset = 0
            while True:
                try:
                    frame = reader.get_chunk(block)
                except StopIteration:
                    break
                except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
                    raise _unreadable(source, exc) from exc
                chunk = _Chunk.check(source, frame, offset, prompts, index, seen)
                offset += len(frame)
                if not len(frame):
                    continue
                column = frame["response"]  # as pandas' reader holds a block's column: numpy, or its string array
                answers = (
                    column.array if isinstance(column.dtype, pd.api.extensions.ExtensionDtype) else column.to_numpy()
                )
                samples.append(answers.take([0]))  # a copy: a slice would keep the block
                if answers.dtype.kind in "iu":
                    held.append((chunk, answers.copy()))
                    continue
                frame = column = None  # the block is not kept while its rows are made and the next is read
                yield chunk.parsed(self.backend, answers, secrets)
                del chunk, answers  # neither is kept while the next block is read
            for chunk, answers in held:
                others = [sample for sample in samples if sample.dtype != answers.dtype]
                yield chunk.parsed(self.backend, concat_compat([answers, *others])[: len(answers)], secrets)


def _unreadable(source: SourceFile, exc: Exception) -> ProbeError:
    return ProbeError(f"{source.name}: cannot read it as their TSV ({' '.join(str(exc).split())})")


def _block_rows(width: int) -> int:
    """The rows pandas' C reader (`read_csv(low_memory=True)`, its default) infers each column's type over at a
    time for a file of `width` columns: the greatest power of two below 2**20 / width (131,072 rows for their 4);
    a whole file's column joins its blocks' types. Read in these blocks, each has the type it had in the whole."""
    limit = 2**20 // max(width, 1)
    rows = 1
    while rows * 2 < limit:
        rows *= 2
    return rows


class _Seen:
    """The idx values of a file's rows read so far (sorted) and the row of each: a repeat is refused."""

    def __init__(self) -> None:
        self.idx = np.zeros(0, dtype=np.int64)
        self.row = np.zeros(0, dtype=np.int64)

    def first_repeat(self, idx: np.ndarray, offset: int) -> tuple[int, int] | None:
        """(row, earlier row) of the first row of this block whose idx an earlier row has; then this block is seen."""
        rows = offset + np.arange(len(idx), dtype=np.int64)
        earlier = np.full(len(idx), -1, dtype=np.int64)
        at = np.searchsorted(self.idx, idx)
        before = (at < len(self.idx)) & (self.idx[np.minimum(at, len(self.idx) - 1)] == idx) if len(self.idx) else None
        if before is not None:
            earlier[before] = self.row[at[before]]
        order = np.argsort(idx, kind="stable")
        ordered = idx[order]
        starts = np.r_[True, ordered[1:] != ordered[:-1]] if len(idx) else np.zeros(0, dtype=bool)
        first_of_run = order[np.maximum.accumulate(np.where(starts, np.arange(len(idx)), 0))]
        again = ~starts & (earlier[order] < 0)
        earlier[order[again]] = rows[first_of_run[again]]
        if (hit := first(earlier >= 0)) is not None:
            return int(rows[hit]), int(earlier[hit])
        merged = np.concatenate([self.idx, idx])
        keep = np.argsort(merged, kind="stable")
        self.idx, self.row = merged[keep], np.concatenate([self.row, rows])[keep]
        return None


class _Chunk:
    """A block of a file's rows, checked: their prompt positions and items' ids; `parsed` makes their rows."""

    def __init__(self, positions: np.ndarray, prompts: PromptConfig) -> None:
        self.positions = positions
        self.prompts = prompts

    @classmethod
    def check(
        cls,
        source: SourceFile,
        frame: pd.DataFrame,
        offset: int,
        prompts: PromptConfig,
        index: tuple[np.ndarray, np.ndarray],
        seen: _Seen,
    ) -> _Chunk:
        """The block's idx (integers, each a prompt's authors_index, none twice in the file) and its system_prompt
        and user_input (each its prompt's message, compared column-wise in Arrow): anything else is one line naming
        the file's row."""
        missing = [c for c in COLUMNS if c not in frame.columns]
        if missing:
            names = ", ".join(map(repr, missing))
            raise ProbeError(f"{source.name}: no column(s) {names} (their files have {', '.join(COLUMNS)})")
        raw = frame["idx"]
        numbers = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
        with np.errstate(invalid="ignore"):
            bad = first(~np.isfinite(numbers) | (numbers != np.round(numbers)))
        if bad is not None:
            raise row_error(source, offset + bad, "idx", f"{raw.iloc[bad]!r} is not an integer")
        idx = numbers.astype(np.int64)
        ordered, order = index
        at = np.searchsorted(ordered, idx)
        found = (at < len(ordered)) & (ordered[np.minimum(at, len(ordered) - 1)] == idx) if len(ordered) else at < 0
        if (bad := first(~found)) is not None:
            raise row_error(
                source,
                offset + bad,
                "idx",
                f"idx {int(idx[bad])} is no prompt's authors_index in {prompts.path} config {prompts.config!r}",
            )
        if (repeat := seen.first_repeat(idx, offset)) is not None:
            row, earlier = repeat
            raise row_error(source, row, "idx", f"idx {int(idx[row - offset])} again (row {earlier + 1} has it)")
        positions = order[at]
        later = None  # the first user_input that differs: refused once no system_prompt of the block differs
        for start in range(0, len(frame), SLICE_ROWS):
            items = prompt_rows(prompts, positions[start : start + SLICE_ROWS], ["id", "messages"])
            for column, role in (("system_prompt", "system"), ("user_input", "user")):
                given = frame[column].iloc[start : start + SLICE_ROWS]
                wanted = _contents(items["messages"], role)
                if (at_row := _first_mismatch(given, wanted)) is None:
                    continue
                cell, text = given.iloc[at_row], wanted[at_row].as_py()
                where = first_difference(str(cell), str(text)) if isinstance(cell, str) and text else ""
                error = ProbeError(
                    f"{source.name}: idx {int(idx[start + at_row])} (row {offset + start + at_row + 1}): {column} is "
                    f"not the {role} message of its prompt {items['id'][at_row].as_py()!r}"
                    + (f" ({where})" if where else "")
                )
                if role == "system":
                    raise error
                later = later or error
        if later is not None:
            raise later
        return cls(positions, prompts)

    def parsed(self, backend: str, answers: Any, secrets: Sequence[str]) -> ParsedFile:
        """The block's rows: each answer as their `str(response)` (NaN is "nan"), read by their rule."""
        positions, prompts = self.positions, self.prompts
        texts = [str(response) for response in answers.tolist()]

        def rows() -> pa.Table:
            # the request is generated_row's record of the context; an import has none (context_tokens stays empty)
            request = GenerateRequest(context=(0,), max_tokens=MAX_NEW_TOKENS, temperature=TEMPERATURE)
            columns = ["id", "task", "number_min", "number_max"]

            def made() -> Iterator[dict[str, Any]]:
                for start in range(0, len(positions), SLICE_ROWS):
                    items = prompt_rows(prompts, positions[start : start + SLICE_ROWS], columns).to_pydict()
                    answered = texts[start : start + SLICE_ROWS]
                    for *values, text in zip(*(items[c] for c in columns), answered, strict=True):
                        item = dict(zip(columns, values, strict=True))
                        row = generated_row(item, request, Generation(text, (), ""), NUMBER_PARSER, secrets)
                        row.update(id=item["id"], backend=backend, context_tokens=None, finish_reason=None)
                        yield row

            return rows_to_arrow(made())

        return ParsedFile(positions, rows)


def _contents(messages: pa.ChunkedArray, role: str) -> pa.Array:
    """The content of each row's first message of `role` (null where it has none), as one Arrow array."""
    array = messages.combine_chunks() if isinstance(messages, pa.ChunkedArray) else messages
    flat = pc.list_flatten(array)
    parents = pc.list_parent_indices(array).to_numpy()
    hits = np.flatnonzero(
        pc.fill_null(pc.equal(pc.struct_field(flat, "role"), role), False).to_numpy(zero_copy_only=False)
    )
    rows, at = np.unique(parents[hits], return_index=True)
    take = np.full(len(array), -1, dtype=np.int64)
    take[rows] = hits[at]
    return pc.struct_field(flat, "content").take(pa.array(take, mask=take < 0))


def _first_mismatch(given: pd.Series, wanted: pa.Array) -> int | None:
    """The first row whose cell is not `wanted`'s text (a missing cell, or a missing message, never matches)."""
    if isinstance(given.dtype, pd.StringDtype):
        cells = pa.array(given.array).cast(pa.large_string())
        same = pc.fill_null(pc.equal(cells, wanted.cast(pa.large_string())), False).to_numpy(zero_copy_only=False)
        return first(~same)
    texts = wanted.to_pylist()  # not a text column (a block of numbers): compared as their code compares cells
    return first(np.array([g != w for g, w in zip(given.tolist(), texts, strict=True)], dtype=bool))


FORMAT = EmpathyAuthors()
