"""The item contract (docs/DESIGN.md section 2): the columns every prompt row carries, and its check.

The builders write it (`item_features`) and the runners check it on load
(`check_prompt_config`): one definition for both sides. Declared as `datasets.Features`
rather than inferred, so every shard of every config has exactly the same Arrow schema and
`load_dataset` gets list-of-struct `messages` right.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from datasets import Features, List, Value

from .errors import ProbeError
from .memory import release_mapped, resident_columns

ITEM_FEATURES: dict = {
    "id": Value("string"),
    "probe": Value("string"),
    "task": Value("string"),
    "prompt": Value("string"),
    "messages": List({"role": Value("string"), "content": Value("string")}),
    "choices": List(Value("string")),
    "choice_labels": List(Value("string")),
    "choice_types": List(Value("string")),
    "number_min": Value("int32"),
    "number_max": Value("int32"),
}

CHOICE_LABELS = ("A", "B", "C", "D", "E", "F", "G", "H")

#: the columns a config must have for a runner to score it
REQUIRED_COLUMNS = ("id", "probe", "task", "prompt", "messages")
#: per task, the columns its items need; `text` items (free generation, e.g. the empathy
#: third-person rewrite) may name `stop` strings and are run with --scoring generate only
TASK_COLUMNS = {"choice": ("choices", "choice_labels"), "number": ("number_min", "number_max"), "text": ()}


#: what a config without rows is called in every message
EMPTY_CONFIG = "the config is empty (0 rows)"


def item_features(extra: dict) -> Features:
    """The item contract followed by a probe's own metadata columns."""
    clash = set(extra) & set(ITEM_FEATURES)
    if clash:
        raise ValueError(f"metadata columns {sorted(clash)} clash with the item contract")
    return Features({**ITEM_FEATURES, **extra})


def contract_row(
    item_id: str,
    probe: str,
    task: str,
    prompt: str | None,
    messages: list[dict[str, str]] | None,
    *,
    choices: Sequence[str] = (),
    choice_labels: Sequence[str] | None = None,
    choice_types: Sequence[str] = (),
    number_range: tuple[int | None, int | None] = (None, None),
) -> dict[str, Any]:
    """The item contract's columns of one row, in `ITEM_FEATURES` order; a probe's own columns follow them.

    Every builder writes its rows through this, so no builder re-types the contract. `choice_labels`
    left out labels the choices A, B, ... (`CHOICE_LABELS`); a number item gives its `number_range`.
    """
    labels = CHOICE_LABELS[: len(choices)] if choice_labels is None else choice_labels
    return {
        "id": item_id,
        "probe": probe,
        "task": task,
        "prompt": prompt,
        "messages": messages,
        "choices": list(choices),
        "choice_labels": list(labels),
        "choice_types": list(choice_types),
        "number_min": number_range[0],
        "number_max": number_range[1],
    }


def slug(text: str) -> str:
    """A lowercase ASCII-ish id fragment: `a white person` -> `white_person`."""
    text = re.sub(r"^(a|an)\s+", "", text.strip(), flags=re.IGNORECASE)
    return re.sub(r"[^0-9a-z]+", "_", text.lower()).strip("_")


def user_messages(prompt: str) -> list[dict[str, str]]:
    """Chat form of a plain prompt: the same text as one user turn."""
    return [{"role": "user", "content": prompt}]


#: the widest number range an item may ask for: `number_max - number_min`. The exact scorer
#: builds a digit trie over every value in range, so one item with a range of 2e9 grew to
#: 19 GB before the OOM killer stopped it; the published probes ask for at most 0-100.
MAX_NUMBER_SPAN = 10_000


def _is_null(t: pa.DataType) -> bool:
    return pa.types.is_null(t)


def _is_string(t: pa.DataType) -> bool:
    return _is_null(t) or pa.types.is_string(t) or pa.types.is_large_string(t)


def _is_integer(t: pa.DataType) -> bool:
    return _is_null(t) or pa.types.is_integer(t)


def _is_list_of(item: Callable[[pa.DataType], bool]) -> Callable[[pa.DataType], bool]:
    def check(t: pa.DataType) -> bool:
        lists = pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
        return _is_null(t) or (lists and item(t.value_type))

    return check


def _is_message(t: pa.DataType) -> bool:
    if _is_null(t):
        return True
    if not pa.types.is_struct(t):
        return False
    fields = {t.field(k).name: t.field(k).type for k in range(t.num_fields)}
    return all(name in fields and _is_string(fields[name]) for name in ("role", "content"))


#: the Arrow type each contract column must have: (how the error names it, the test). A column
#: of another type is refused as a whole, before any row is read: `choices` typed string was
#: scored as 208 one-character options, an integer `id` failed deep inside sharding.
COLUMN_TYPES: dict[str, tuple[str, Callable[[pa.DataType], bool]]] = {
    "id": ("string", _is_string),
    "probe": ("string", _is_string),
    "task": ("string", _is_string),
    "prompt": ("string", _is_string),
    "messages": ("list of {role: string, content: string}", _is_list_of(_is_message)),
    "choices": ("list of strings", _is_list_of(_is_string)),
    "choice_labels": ("list of strings", _is_list_of(_is_string)),
    "choice_types": ("list of strings", _is_list_of(_is_string)),
    "number_min": ("integer", _is_integer),
    "number_max": ("integer", _is_integer),
    "stop": ("list of strings", _is_list_of(_is_string)),
}


def check_prompt_forms(ds: Any, where: str, chat: bool | None) -> None:
    """Every item has the form of its prompt the run reads: `prompt` without chat, `messages` with it.

    `chat=None` (the tokenizer decides once the model loads) needs at least one of the two per
    item; the trust game's rows hold one form each (`base`/`inst` a prompt, `chat` messages), so a
    config that mixes them is refused for a run that reads the other form, before anything loads.
    """
    table = arrow_table(ds)
    if chat is None:
        neither = pc.and_(pc.is_null(table["prompt"]), pc.is_null(table["messages"]))
        _refuse_rows(table, neither, where, "prompt", "and `messages` are both null: nothing to ask the model")
    elif chat:
        _refuse_rows(table, pc.is_null(table["messages"]), where, "messages", "is null (needed with chat)")
    else:
        _refuse_rows(table, pc.is_null(table["prompt"]), where, "prompt", "is null (needed without chat, --no-chat)")


def check_prompt_config(ds: Any, where: str, *, chat: bool | None = None) -> None:
    """The item contract, checked on the whole config before any model loads.

    Column presence and Arrow types (`COLUMN_TYPES`) come first, then vectorised checks of the
    values each task needs: ids present and unique, the prompt form the run reads (`check_prompt_forms`)
    present, options and labels present and of one length, number ranges present, ordered and at
    most `MAX_NUMBER_SPAN` wide. Each refusal names `where`, the first offending id and the field.
    """
    columns = set(ds.column_names)
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise ProbeError(f"{where}: not a prompt-item config, missing column(s) {', '.join(missing)}")
    if len(ds) == 0:
        raise ProbeError(f"{where}: {EMPTY_CONFIG}")
    table = arrow_table(ds)
    check_column_types(table.schema, where)
    # the columns checked by value, in memory (`resident_columns`): the ids and tasks, then those of the tasks it
    # holds; `prompt` and `messages` are checked for nulls only
    table = resident_columns(ds, ["id", "task"], table)
    ids = table["id"]
    _refuse_rows(table, pc.is_null(ids), where, "id", "is null: every item needs an id")
    _refuse_rows(table, pc.is_null(table["task"]), where, "task", "is null")
    tasks = {str(t) for t in pc.unique(table["task"]).to_pylist()}
    unknown = sorted(tasks - set(TASK_COLUMNS))
    if unknown:
        raise ProbeError(f"{where}: unknown task(s) {', '.join(unknown)}; expected choice, number or text")
    for task in sorted(tasks):
        lacking = [c for c in TASK_COLUMNS[task] if c not in columns]
        if lacking:
            raise ProbeError(f"{where}: has {task} items but no column(s) {', '.join(lacking)}")
    table = resident_columns(ds, [c for task in sorted(tasks) for c in TASK_COLUMNS[task]], table)
    if not ids_unique(ids):
        raise ProbeError(f"{where}: item ids are not unique")
    check_prompt_forms(table, where, chat)
    release_mapped(ds)  # the null bitmaps of `prompt` and `messages` it read
    if "choice" in tasks:
        _check_choice_items(table, pc.equal(table["task"], "choice"), where)
    check_number_ranges(table, where)


def ids_unique(ids: pa.ChunkedArray | pa.Array, step: int = 1 << 16) -> bool:
    """Whether no id (none null) repeats: the ids sorted, each against the next, a slice at a time.

    A hash set of the ids (`count_distinct`) holds a copy of every id and its slots: on a config
    of millions of rows, more memory than anything else that loads it (270 MB at 2.2 M ids). The
    sorted slices are taken from each chunk (`take_chunked`): Arrow's `take` of a chunked column
    joins its chunks first, a copy of every id for each slice (95 MB at 2.2 M ids).
    """
    order = pc.sort_indices(ids).to_numpy()
    for start in range(0, len(order), step):
        ordered = take_chunked(ids, order[start : start + step + 1])
        if len(ordered) > 1 and pc.any(pc.equal(ordered[1:], ordered[:-1])).as_py():
            return False
    return True


def take_chunked(values: Any, positions: np.ndarray) -> Any:
    """`values` (a `pa.ChunkedArray`, an array, or a table) at `positions`, in that order, each taken from the chunk
    (record batch) that holds it: a copy of those rows only.

    Arrow's `take` of a chunked array or a table of many record batches joins every chunk into one first (each
    column's, for a table): a copy of a whole memory-mapped column for a few rows of it.
    """
    positions = np.asarray(positions, dtype=np.int64)
    if isinstance(values, pa.Array):
        return values.take(pa.array(positions))
    table = isinstance(values, pa.Table)
    chunks = values.to_batches() if table else values.chunks
    if not len(positions):
        return values.slice(0, 0) if table else pa.array([], type=values.type)
    starts = np.cumsum([0, *(len(c) for c in chunks)])
    order = np.argsort(positions, kind="stable")
    ordered = positions[order]
    owner = np.searchsorted(starts, ordered, side="right") - 1
    cuts = np.flatnonzero(np.diff(owner)) + 1
    parts = [
        chunks[int(owner[group[0]])].take(pa.array(ordered[group] - starts[owner[group[0]]]))
        for group in np.split(np.arange(len(ordered)), cuts)
    ]
    taken = pa.Table.from_batches(parts, schema=values.schema) if table else pa.concat_arrays(parts)
    if (order == np.arange(len(order))).all():  # in the values' order already
        return taken
    back = np.empty_like(order)
    back[order] = np.arange(len(order))
    return (taken.combine_chunks() if table else taken).take(pa.array(back))


def check_number_ranges(table: pa.Table, where: str) -> None:
    """The number-range part of the contract alone, on a table of `id`, `task`, `number_min`, `number_max`.

    What a reader that never holds whole items (`probes plan` on millions of rows) can check
    cheaply: the ranges it would build a digit trie over are present, ordered and bounded.
    """
    if "task" in table.column_names and "number" in set(pc.unique(table["task"]).to_pylist()):
        lacking = [c for c in TASK_COLUMNS["number"] if c not in table.column_names]
        if lacking:
            raise ProbeError(f"{where}: has number items but no column(s) {', '.join(lacking)}")
        _check_number_items(table, pc.equal(table["task"], "number"), where)


def arrow_table(ds: Any) -> pa.Table:
    """The Arrow table of a `datasets.Dataset` (or a table), its rows in the dataset's order."""
    if isinstance(ds, pa.Table):
        return ds
    if getattr(ds, "_indices", None) is None:
        return ds.data.table
    return ds.with_format("arrow")[:]


def check_column_types(schema: pa.Schema, where: str) -> None:
    """Refuse a contract column whose Arrow type is not the contract's (`COLUMN_TYPES`), naming it."""
    for name, (wanted, ok) in COLUMN_TYPES.items():
        if name in schema.names and not ok(schema.field(name).type):
            raise ProbeError(
                f"{where}: column {name!r} has type {schema.field(name).type}; the item contract needs {wanted}"
            )


def _check_choice_items(table: pa.Table, rows: Any, where: str) -> None:
    for name in TASK_COLUMNS["choice"]:
        _refuse_rows(table, pc.and_(rows, pc.is_null(table[name])), where, name, "is null on a choice item")
    n_choices = pc.list_value_length(table["choices"])
    _refuse_rows(table, pc.and_(rows, pc.equal(n_choices, 0)), where, "choices", "is empty")
    differ = pc.not_equal(n_choices, pc.list_value_length(table["choice_labels"]))
    _refuse_rows(table, pc.and_(rows, differ), where, "choice_labels", "has another length than `choices`")


#: rows a value check holds its intermediate columns for at a time (`_check_number_items`)
CHECK_SLICE_ROWS = 1 << 17


def _check_number_items(table: pa.Table, rows: Any, where: str) -> None:
    for name in TASK_COLUMNS["number"]:
        _refuse_rows(table, pc.and_(rows, pc.is_null(table[name])), where, name, "is null on a number item")
    # compared as float64 (unsafe cast: precision above 2**53 does not matter here): a difference cannot wrap;
    # a slice at a time, so the float columns are a slice's (the masks are bits: 0.3 MB at 2.2 M rows)
    below, wide = [], []
    for start in range(0, len(table), CHECK_SLICE_ROWS):
        low = pc.cast(table["number_min"].slice(start, CHECK_SLICE_ROWS), pa.float64(), safe=False)
        high = pc.cast(table["number_max"].slice(start, CHECK_SLICE_ROWS), pa.float64(), safe=False)
        below.append(pc.greater(low, high))
        wide.append(pc.greater(pc.subtract(high, low), MAX_NUMBER_SPAN))
        del low, high
    below, wide = pa.chunked_array(below, pa.bool_()), pa.chunked_array(wide, pa.bool_())
    _refuse_rows(table, pc.and_(rows, below), where, "number_max", "is below `number_min`")
    _refuse_rows(
        table,
        pc.and_(rows, wide),
        where,
        "number_max",
        f"is more than {MAX_NUMBER_SPAN:,} above `number_min` (the scorer holds every value of the range)",
    )


def _refuse_rows(table: pa.Table, mask: Any, where: str, field: str, problem: str) -> None:
    """Raise for the first row where `mask` is true (nulls in `mask` count as false), naming its id and `field`."""
    mask = pc.fill_null(mask, False)
    count = pc.sum(mask).as_py() or 0
    if not count:
        return
    row = pc.index(mask, True).as_py()
    item = table["id"][row].as_py()
    name = f"id {item!r}" if item is not None else f"row {row}"
    more = f" ({count} such rows)" if count > 1 else ""
    raise ProbeError(f"{where}: {name}, field {field!r} {problem}{more}")
