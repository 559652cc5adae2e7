"""Refuse to publish secrets and private paths hidden in a folder's content (`probes publish`).

The structural checks of `publish` say which files go up; this says what is in them. A token
pasted into the card, a manifest field that recorded `/home/<user>/models/...`, or a result
column carrying a path would go public, and stay public in the repo's history. Every file is
read: text files line by line, JSON files value by value (and key by key, named by JSON path),
and every string (also nested: lists, structs) of every parquet column, named by row id.

What counts as a leak (`promptgen.core.secrets.PUBLISH_LEAK_PATTERNS` and the literals below):
a Hugging Face token (user `hf_...` or organisation `api_org_...`), an OpenAI-style key (`sk-...`),
whatever the publishing shell holds, a home-folder path (`/home*/<user>`, `/Users/<user>`,
`/root`, `~/`, `C:\\Users\\`), an absolute path under a data folder (`/tmp`, `/mnt`, `/scratch`,
`/workspace`, ...) or under any other top-level folder of this machine (also glued after a doubled
slash: `models/private//tmp/x`), a `file:` URL, a network share (`//host/share`), the known secret
values (HF_TOKEN, OPENAI_API_KEY, the saved login; each named by where it is held), the current
user's home folder and the absolute path of the folder being published. Prompt text is plain
words, so the patterns are anchored on what only credentials and paths look like. Text is matched
with invisible characters removed (a token split by one reads the same to a person), and
credentials are also looked for across line breaks (a token wrapped over two lines of a card).
Names and metadata (every JSON file, the card, the parquet columns naming a model or run) may not
hold a bidirectional control either: `org/\u202eevil` displays as `org/live`.

A parquet file uploads more than its rows, and all of it is read (`scan_parquet_schema`): the
schema's metadata (`huggingface` written by `datasets`, `pandas`, any other key), every field's
metadata, nested fields' too (a list's element, a struct's fields), every field's name, the
footer's key-value metadata (a key added beside the schema's; the Arrow schema stored there is
decoded and read like the file's own), the physical schema's column paths and the writer's
`created_by`. Each key and value is matched as a name (bidirectional controls refused), a value
that is JSON also string by string (its escapes decoded); one problem per entry, named by file,
`schema metadata`, `field '<path>' metadata` or `file metadata`, and the key. A key or a name that
is itself the leak is named by its position (`key #1`, `field '#2'`), never printed.

Parquet columns are matched with Arrow compute (RE2, vectorised, batch by batch): a result or
prompt folder can hold millions of rows. Python only looks at the rows that matched, to name
the first one and what it holds.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from promptgen.core.secrets import (
    BIDI_CONTROLS_RE,
    INVISIBLE_RE,
    PATH_REST,
    PATH_START,
    PUBLISH_LEAK_PATTERNS,
    SECRET_KINDS,
    named_secrets,
    watch_secret_env,
)

#: rows read at a time from a parquet file (bounded memory on large result parts)
BATCH_ROWS = 65_536
#: a literal shorter than this (e.g. a home folder `/a`) is not searched: it would match ordinary text
_MIN_LITERAL = 4
#: line breaks (and the indentation after them), removed to find a credential wrapped over lines
_LINE_BREAK_RE = r"\r?\n[ \t]*"
#: top-level folders every Unix machine has: a path under them names no person or project
_SYSTEM_ROOTS = frozenset(
    ("bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "run", "sbin", "sys", "usr", "snap")
)
#: what is refused in names only (every JSON and text file, and the parquet columns of `NAME_COLUMNS`): prompt
#: text in a right-to-left script may carry directional marks, a model's or a run's name may not
NAME_PATTERNS = {"a bidirectional control character": BIDI_CONTROLS_RE}
#: the parquet columns that name a model or a run (`runners.results.RESULT_SCHEMA`'s key and load fields)
NAME_COLUMNS = frozenset(("model", "model_revision", "backend", "dtype", "device", "scoring"))


def recorded_key_variables(root: Path) -> list[str]:
    """The variables a results folder's served runs read their server key from (`hardware.api_key_env`).

    A run with `--api-key-env MY_KEY` may have echoed that key into generated text; the variable's
    name is in the manifest (its value never is), so publish looks for what it holds in this shell
    as it does for `OPENAI_API_KEY`. Not a results folder, or a manifest it cannot read: none.
    """
    try:
        runs = json.loads((Path(root) / "results_manifest.json").read_text(encoding="utf-8")).get("runs")
    except (OSError, ValueError, AttributeError):
        return []
    names = [(run.get("hardware") or {}).get("api_key_env") for run in (runs or {}).values() if isinstance(run, dict)]
    return sorted({n for n in names if isinstance(n, str) and n.replace("_", "").isalnum()})


def machine_roots() -> list[str]:
    """This machine's other top-level folders (`/work`, `/nfs`, ...): where its own paths start."""
    import os

    try:
        names = sorted(os.listdir("/"))
    except OSError:
        return []
    return [
        n for n in names if n not in _SYSTEM_ROOTS and re.fullmatch(r"[A-Za-z0-9_-]+", n) and os.path.isdir("/" + n)
    ]


@dataclass(frozen=True)
class Needles:
    """What to look for: named regexes (Python and RE2 alike) and named literal strings."""

    patterns: dict[str, str]
    literals: dict[str, str]

    @classmethod
    def for_folder(cls, root: Path) -> Needles:
        """The leak patterns plus this machine's secrets, home folder and the folder's own path."""
        for variable in recorded_key_variables(root):  # `--api-key-env` of the folder's served runs
            watch_secret_env(variable)
        literals = dict(named_secrets())  # each named by where it is held: "a secret held in $OPENAI_API_KEY"
        literals[str(Path.home()).rstrip("/") + "/"] = "the current user's home folder"
        literals[str(Path(root).resolve())] = "the absolute path of the published folder"
        literals = {text: kind for text, kind in literals.items() if len(text) >= _MIN_LITERAL}
        patterns = dict(PUBLISH_LEAK_PATTERNS)
        roots = machine_roots()
        if roots:
            patterns["an absolute path of this machine"] = PATH_START + "/(?:" + "|".join(roots) + PATH_REST
        return cls(patterns, literals)

    @cached_property
    def _compiled(self) -> list[tuple[str, re.Pattern[str]]]:
        # the literals first: "the absolute path of the published folder" says more than "an absolute local path"
        found = [(kind, re.compile(_re2_escape(text))) for text, kind in self.literals.items()]
        return found + [(kind, re.compile(pattern)) for kind, pattern in self.patterns.items()]

    @property
    def _secrets(self) -> list[tuple[str, str]]:
        """(kind, pattern) of the credentials among the patterns: also looked for across line breaks."""
        return [(kind, self.patterns[kind]) for kind in SECRET_KINDS if kind in self.patterns]

    def find(self, text: str, *, name: bool = False) -> str | None:
        """The kind of the first leak in `text` (None when clean); used on the few matched values.

        Invisible characters are removed first; a credential is also looked for across line breaks.
        `name`: `text` is a name or metadata, where a bidirectional control is refused too.
        """
        raw, text = text, re.sub(INVISIBLE_RE, "", text)
        for kind, regex in self._compiled:
            if regex.search(text):
                return kind
        joined = re.sub(_LINE_BREAK_RE, "", text)
        for kind, pattern in self._secrets:
            if re.search(pattern, joined):
                return f"{kind} split across lines"
        for kind, pattern in NAME_PATTERNS.items() if name else ():
            if re.search(pattern, raw):
                return kind
        return None

    def split_token(self, lines: list[str]) -> str | None:
        """A credential that starts on `lines[0]` and runs on into the lines after it (their indentation dropped)."""
        first = re.sub(INVISIBLE_RE, "", lines[0])
        rest = "".join(re.sub(INVISIBLE_RE, "", line).lstrip(" \t") for line in lines[1:])
        for kind, pattern in self._secrets:
            found = re.search(pattern, first + rest)
            if found and found.start() < len(first) < found.end():
                return f"{kind} split across lines"
        return None

    @cached_property
    def combined(self) -> str:
        """One RE2 alternation of every pattern and literal: one pass over each column, not one per needle."""
        parts = [f"(?:{pattern})" for pattern in self.patterns.values()]
        return "|".join(parts + [_re2_escape(text) for text in self.literals])

    def mask(self, values: pa.Array, *, name: bool = False) -> pa.Array:
        """Boolean array: which strings of `values` hold a leak as `find` sees them (vectorised, no Python per row)."""
        visible = pc.replace_substring_regex(values, INVISIBLE_RE, "")
        hit = pc.match_substring_regex(visible, self.combined)
        if self._secrets:
            joined = pc.replace_substring_regex(visible, _LINE_BREAK_RE, "")
            hit = pc.or_(hit, pc.match_substring_regex(joined, "|".join(f"(?:{p})" for _, p in self._secrets)))
        if name:
            hit = pc.or_(hit, pc.match_substring_regex(values, "|".join(NAME_PATTERNS.values())))
        return pc.fill_null(hit, False)


def _re2_escape(text: str) -> str:
    """`text` as a literal regex that RE2 and Python both accept (`re.escape` writes escapes RE2 refuses)."""
    return "".join(f"\\{ch}" if ch in _REGEX_SPECIAL else ch for ch in text)


_REGEX_SPECIAL = frozenset("\\.^$|?*+()[]{}-")


def scan_folder(root: Path, paths: Iterable[str], *, needles: Needles | None = None) -> list[str]:
    """Every leak in the files `paths` (posix, relative to `root`), one problem line each."""
    needles = needles or Needles.for_folder(root)
    problems: list[str] = []
    for rel in paths:
        path = root / rel
        if rel.endswith(".parquet"):
            problems += scan_parquet(path, rel, needles)
        elif rel.endswith(".json"):
            problems += scan_json(path, rel, needles)
        else:
            problems += scan_text(path, rel, needles)
    return problems


def scan_text(path: Path, rel: str, needles: Needles) -> list[str]:
    """A text file (the dataset card), named by line number; a token wrapped over lines by its first line."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    problems = []
    for number, line in enumerate(lines, start=1):
        kind = needles.find(line, name=True) or needles.split_token(lines[number - 1 : number + 3])
        if kind:
            problems.append(f"{rel} line {number}: {kind}")
    return problems


def scan_json(path: Path, rel: str, needles: Needles) -> list[str]:
    """A JSON file (manifests, key.json): every string value and key, named by JSON path."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return scan_text(path, rel, needles)  # not JSON after all: still not published unread
    problems = []
    for where, text in _json_strings(data, "$"):
        kind = needles.find(text, name=True)
        if kind:
            problems.append(f"{rel} {where}: {kind}")
    return problems


def _json_strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """(JSON path, string) for every string in `value`, keys included (a key can be a path too)."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            inner = f"{where}.{key}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(key)) else f"{where}[{key!r}]"
            yield f"{where} (key {key!r})", str(key)
            yield from _json_strings(item, inner)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _json_strings(item, f"{where}[{i}]")


def scan_parquet(path: Path, rel: str, needles: Needles, *, id_column: str = "id") -> list[str]:
    """Every string of every column, batch by batch; one problem per column: its first row id and a count."""
    try:
        parquet = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        return [f"{rel}: cannot be read as parquet to check its content ({' '.join(str(exc).split())})"]
    problems = scan_parquet_schema(parquet, rel, needles)
    schema = parquet.schema_arrow
    columns = [f.name for f in schema if _has_strings(f.type)]
    if not columns:
        return problems
    read = columns + ([id_column] if id_column in schema.names and id_column not in columns else [])
    first: dict[str, tuple[Any, str]] = {}
    counts: dict[str, int] = {}
    for batch in parquet.iter_batches(batch_size=BATCH_ROWS, columns=read):
        ids = batch.column(id_column) if id_column in batch.schema.names else None
        for name in columns:
            names = name in NAME_COLUMNS
            for field, values, rows in _string_leaves(batch.column(name), name):
                hit = pc.indices_nonzero(needles.mask(values, name=names)).to_numpy()
                if not len(hit):
                    continue
                row_numbers = np.unique(hit if rows is None else rows[hit])
                counts[field] = counts.get(field, 0) + len(row_numbers)
                if field not in first:
                    row = int(row_numbers[0])
                    value = values[int(hit[0])].as_py()
                    first[field] = (
                        ids[row].as_py() if ids is not None else f"#{row}",
                        needles.find(value, name=names) or "a token or a home-folder path",
                    )
    return problems + [
        f"{rel} row id {row_id!r} column {field!r}: {kind}"
        + (f" ({counts[field]:,} rows)" if counts[field] > 1 else "")
        for field, (row_id, kind) in first.items()
    ]


def _has_strings(kind: pa.DataType) -> bool:
    """Whether a column type holds strings anywhere (lists and structs included)."""
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return True
    if pa.types.is_dictionary(kind):
        return _has_strings(kind.value_type)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _has_strings(kind.value_type)
    if pa.types.is_struct(kind):
        return any(_has_strings(kind.field(i).type) for i in range(kind.num_fields))
    return False


def _string_leaves(array: pa.Array, name: str) -> Iterator[tuple[str, pa.Array, np.ndarray | None]]:
    """(column path, string values, row number of each value or None when one per row) of a column.

    Lists are flattened with their parent indices composed, structs split into their fields,
    so a string nested in `messages[].content` is matched and still traced back to its row.
    """
    stack: list[tuple[str, pa.Array, np.ndarray | None]] = [(name, array, None)]
    while stack:
        field, values, rows = stack.pop()
        kind = values.type
        if pa.types.is_dictionary(kind):
            stack.append((field, values.dictionary_decode(), rows))
        elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
            yield field, values, rows
        elif pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
            parents = pc.list_parent_indices(values).to_numpy()
            stack.append((f"{field}[]", pc.list_flatten(values), parents if rows is None else rows[parents]))
        elif pa.types.is_struct(kind):
            for i in range(kind.num_fields):
                if _has_strings(kind.field(i).type):
                    child = pc.struct_field(values, [i])
                    stack.append((f"{field}.{kind.field(i).name}", child, rows))


#: the footer key where Arrow stores the schema it wrote (an IPC message, base64): decoded and read as a schema
ARROW_SCHEMA_KEY = b"ARROW:schema"


def scan_parquet_schema(parquet: pq.ParquetFile, rel: str, needles: Needles) -> list[str]:
    """Every byte of a parquet file that is not a row: metadata (schema, fields, footer) and names.

    The schema as Arrow reads it and the one stored in the footer are both read (they may differ:
    another writer's list element name); a footer entry is read unless the schema holds it as it is.
    One problem per metadata entry or name, each once.
    """
    schema = parquet.schema_arrow
    problems = _schema_problems(schema, needles)
    footer = parquet.metadata
    own = schema.metadata or {}
    stored = None
    for n, (key, value) in enumerate((footer.metadata or {}).items()):
        if key == ARROW_SCHEMA_KEY:
            stored = _stored_schema(value)
            if stored is None:
                problems.append(f"file metadata key {key.decode()!r}: not an Arrow schema, cannot be checked")
            else:
                problems += _schema_problems(stored, needles)
        elif own.get(key) != value:
            problems += _metadata_problems("file metadata", {key: value}, needles, first=n)
    # the physical schema's column paths: the Arrow schema's names (a leak among them is refused above, once),
    # unless another writer named its groups and columns otherwise
    read = [schema] + ([stored] if stored is not None else [])
    if not any(needles.find(field.name, name=True) for arrow in read for field, _ in _fields(arrow, needles)):
        for i in range(len(parquet.schema)):
            kind = needles.find(parquet.schema.column(i).path, name=True)
            if kind:
                problems.append(f"parquet column #{i} path: {kind}")
                break
    kind = needles.find(footer.created_by or "", name=True)
    if kind:
        problems.append(f"file created_by: {kind}")
    return [f"{rel} {problem}" for problem in dict.fromkeys(problems)]


def _stored_schema(value: bytes) -> pa.Schema | None:
    """The Arrow schema a footer's `ARROW:schema` holds (base64, or raw as old writers stored it); None if none."""
    try:
        candidates = [base64.b64decode(value, validate=True), value]
    except (binascii.Error, ValueError):
        candidates = [value]
    for data in candidates:
        try:
            return pa.ipc.read_schema(pa.py_buffer(data))
        except (pa.ArrowException, ValueError):
            continue
    return None


def _schema_problems(schema: pa.Schema, needles: Needles) -> list[str]:
    """The schema's metadata, then each field's name and metadata, nested ones too (named as columns are)."""
    problems = _metadata_problems("schema metadata", schema.metadata, needles)
    for field, path in _fields(schema, needles):
        kind = needles.find(field.name, name=True)
        if kind:
            problems.append(f"field {path!r} name: {kind}")
        problems += _metadata_problems(f"field {path!r} metadata", field.metadata, needles)
    return problems


def _fields(schema: pa.Schema, needles: Needles) -> Iterator[tuple[pa.Field, str]]:
    """(field, its path) of every field, depth first: a struct's or union's by name (`a.b`), a list's or map's
    element as `a[]` (the paths `scan_parquet` names columns by)."""
    stack = [(field, _label(field.name, i, needles)) for i, field in reversed(list(enumerate(schema)))]
    while stack:
        field, path = stack.pop()
        yield field, path
        kind = field.type
        while isinstance(kind, pa.ExtensionType) or pa.types.is_dictionary(kind):
            kind = kind.storage_type if isinstance(kind, pa.ExtensionType) else kind.value_type
        named = pa.types.is_struct(kind) or pa.types.is_union(kind)
        children = [kind.field(i) for i in range(kind.num_fields)]
        stack += reversed(
            [(c, f"{path}.{_label(c.name, i, needles)}" if named else f"{path}[]") for i, c in enumerate(children)]
        )


def _label(name: str, index: int, needles: Needles) -> str:
    """A field's name in a problem line, or its position (`#2`) when the name itself is a leak."""
    return f"#{index}" if needles.find(name, name=True) else name


def _metadata_problems(
    where: str, metadata: Mapping[bytes, bytes] | None, needles: Needles, *, first: int = 0
) -> list[str]:
    """Each leaky key-value entry of `metadata`, named by its key (by position when the key is the leak)."""
    problems = []
    for n, (key, value) in enumerate((metadata or {}).items(), start=first):
        name = key.decode("utf-8", errors="replace")
        kind = needles.find(name, name=True)
        if kind:
            problems.append(f"{where} key #{n} (the key itself): {kind}")
            continue
        kind = _find_in_value(value.decode("utf-8", errors="replace"), needles)
        if kind:
            problems.append(f"{where} key {name!r}: {kind}")
    return problems


def _find_in_value(text: str, needles: Needles) -> str | None:
    """The first leak in a metadata value: as text, and when it is JSON, in each of its strings and keys too."""
    kind = needles.find(text, name=True)
    if kind or not text.lstrip().startswith(("{", "[", '"')):
        return kind
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return next((kind for _, string in _json_strings(data, "$") if (kind := needles.find(string, name=True))), None)
