"""What a resumed run still has to score, hashing only the prompts whose rows it cannot trust.

Resume is exact (docs/DESIGN.md section 7: no stale reuse): an item is skipped only when its id is under the key
AND its stored `prompt_sha256` is the hash of its prompt now (`results.prompt_sha256`), so a
rebuilt dataset with changed prompts is rescored; so is an item whose stored row breaks the rule
of a row's numbers (`runners.results.rules`: e.g. a NaN distribution not refused, from a broken
server before rows were checked): the rerun's row replaces it, where refusing the folder would
make the user delete a whole part by hand. Hashing every selected prompt to decide that
costs minutes on a config of millions of rows, at every start; instead the content is checked
once, and rows are trusted by the content they were scored on:

- `PromptContent` names what a config's rows are, checked when it loads
  (`prompts.load_prompt_config`): a digest of its data files, whose bytes were hashed and
  matched against the folder's build_manifest.json, or a Hub commit (immutable). Ids are
  unique in a config (the item contract), so the same content asks the same prompt of every id.
- Every part records the content its rows were scored on (`results.PART_CONTENT`). A done row
  of a part scored on the current content is current, unhashed; the items still to score (their
  rows need the hash) and the done rows of other parts (an older runner, another build of the
  dataset, a config of unknown content) are hashed, as before.
- The rows a run hashed and found current (its selection's, in parts of another content) join
  the current content's part when it finishes, having rescored the stale ones
  (`results.compact_key`), so the next start trusts them. Rows outside the run's selection
  (another shard, past `--limit`, outside a protocol's `where`) were not checked by it and keep
  their label; rows whose id the config no longer has are never skipped, so any label will do.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from promptgen.core.contract import arrow_table
from promptgen.core.memory import release_mapped
from runners import results as res
from runners.results.rules import RULE_COLUMNS, valid_rows

#: prompts read per batch when hashing
HASH_BATCH = 4096


@dataclass(frozen=True)
class PromptContent:
    """What a prompt config's rows are, checked when it loaded: the same digest asks the same prompt of every id."""

    sha256: str
    #: the config's rows, all of them (a run may select fewer)
    rows: int


def _digest(payload: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def local_content(
    config: str, files: Mapping[str, tuple[int, str | None]], manifest: Mapping[str, Any], rows: int
) -> PromptContent | None:
    """The content of a local config, from its data files `files` ({path: (size, sha256)}, hashed from their bytes).

    Only for files `promptgen.hub.read.check_data_files` matched against `manifest` (the folder's
    build manifest), and when the config loaded with the rows the manifest lists; else None
    (its rows are checked by hashing).
    """
    listed = (manifest.get("configs") or {}).get(config)
    if not files or any(sha is None for _, sha in files.values()) or not isinstance(listed, dict):
        return None
    if listed.get("rows") != rows:
        return None
    return PromptContent(files_digest(config, files), rows)


def files_digest(config: str, files: Mapping[str, tuple[int, str | None]]) -> str:
    """sha256 over a local config's data files ({path under the folder: (size, sha256)}): its rows, by their bytes.

    A build's identity when its build_manifest.json has no fingerprint (`runners.results.check.prompt_identity`),
    and its `PromptContent` when the manifest lists these files: no path, so the same data anywhere is one build.
    """
    return _digest({"config": config, "files": sorted((p, sha) for p, (_, sha) in files.items())})


def hub_content(repo_id: str, revision: str | None, config: str, rows: int) -> PromptContent | None:
    """The content of a Hub config at a commit (a 40-hex revision: immutable); None at a branch or tag, which move."""
    if revision is None or not re.fullmatch(r"[0-9a-f]{40}", revision):
        return None
    return PromptContent(_digest({"repo": repo_id, "revision": revision, "config": config}), rows)


def id_column(dataset: Any) -> pa.ChunkedArray:
    """The dataset's ids, in its row order (a selection's too), as Arrow: no Python list of millions of strings."""
    return arrow_table(dataset.select_columns(["id"]))["id"]


def prompt_hashes(dataset: Any, rows: list[int]) -> list[str]:
    """`results.prompt_sha256` of the dataset rows `rows`, read in batches of the hashed columns only."""
    columns = [c for c in res.PROMPT_FIELDS if c in dataset.column_names]  # those a config lacks are None
    out: list[str] = []
    for start in range(0, len(rows), HASH_BATCH):
        batch = dataset.select(rows[start : start + HASH_BATCH]).select_columns(columns).to_list()
        out.extend(res.prompt_sha256(item) for item in batch)
        release_mapped(dataset)  # a batch's pages, not the config's, stay resident (`promptgen.core.memory`)
    return out


@dataclass(frozen=True)
class Checked:
    """The stored rows a run hashed under its prompt content `content`: those of `parts` whose id is in `ids`.

    `ids` None: every row of `parts` (the run selected the whole config). Once the run has
    rescored the stale ones, all are current, and `results.compact_key` moves them into the
    content's part.
    """

    content: str | None = None
    parts: frozenset[str] = frozenset()
    ids: pa.Array | None = None


@dataclass(frozen=True)
class Resume:
    """What `plan` decided for a run's selection."""

    #: dataset rows still to score, in selection order (an array when the plan hashed none of them)
    todo: Sequence[int] | npt.NDArray[np.int64]
    #: id -> prompt hash of each item to score
    hashes: dict[str, str]
    #: items to score whose stored row was scored on another prompt
    rescored: int
    #: the prompt content the run's rows are scored on (None: unknown), and the rows it checked
    checked: Checked


@dataclass(frozen=True)
class _Done:
    """A key folder's rows (newest per id) and, for each, the part it comes from."""

    rows: pa.Table  # id, prompt_sha256
    part: np.ndarray  # index into `names`
    names: list[str]
    contents: list[str | None]


def _read_done(folder: Path) -> _Done:
    """The rows a run may skip: newest per id, less those breaking `rules` (a NaN or off-sum distribution, a
    `chosen_index` not its argmax, e.g. from a broken server before rows were checked), which are scored again
    like an item never scored; the new row's part is newer, so it wins, and compaction drops the old one."""
    columns = list(dict.fromkeys(["id", "prompt_sha256", *RULE_COLUMNS]))
    # one listing, read again if a concurrent run merges a listed part away meanwhile
    paths, tables = res.read_listed(folder, lambda listed: (listed, [res.read_part(p, columns) for p in listed]))
    contents = [res.part_content(t.schema) for t in tables]
    if not tables:
        return _Done(res.RESULT_SCHEMA.empty_table().select(["id", "prompt_sha256"]), np.zeros(0, np.int64), [], [])
    rows = pa.concat_tables(tables, promote_options="default")
    part = np.repeat(np.arange(len(tables)), [len(t) for t in tables])
    keep = res.newest_rows(rows["id"])
    if keep is not None:
        rows, part = rows.take(keep), part[keep.to_numpy()]
    valid = valid_rows(rows)
    if not valid.all():
        rows, part = rows.filter(pa.array(valid)), part[valid]
    rows = rows.select(["id", "prompt_sha256"])
    return _Done(rows, part, [p.name for p in paths], contents)


def plan(
    dataset: Any,
    ids: pa.ChunkedArray,
    selected: Sequence[int],
    folder: Path,
    content: PromptContent | None,
    *,
    hash_todo: bool = True,
) -> Resume:
    """Which of the `selected` rows of `dataset` (whose ids are `ids`) are done under the key folder `folder`.

    `hash_todo` False: the items never scored under the key are not hashed here (their rows are, as they are
    added: `runners.run.session.Session.add_table`), only the stored rows to check; `hashes` is then empty and `todo`
    an array, so a config of millions of rows costs no Python object per row.
    """
    done = _read_done(folder)
    current = None if content is None else content.sha256
    sel = np.asarray(selected, dtype=np.int64)
    if not hash_todo and not len(done.rows):  # nothing stored: every selected row is to score
        return Resume(sel, {}, 0, Checked(current))
    trusted_part = np.array([c is not None and c == current for c in done.contents], dtype=bool)
    every = len(sel) == len(ids) and bool(np.array_equal(sel, np.arange(len(ids))))
    sel_ids = (ids if every else ids.take(pa.array(sel))).cast(pa.string())
    done_ids = done.rows["id"].combine_chunks()
    pos = pc.fill_null(pc.index_in(sel_ids, value_set=done_ids), -1).to_numpy().astype(np.int64)
    was_done = pos >= 0
    trusted = np.zeros(len(sel), dtype=bool)
    trusted[was_done] = trusted_part[done.part[pos[was_done]]]
    check = np.flatnonzero(~trusted)
    if not hash_todo:
        again = check[was_done[check]]  # stored rows of another content: current only if their prompt is the same
        digests = prompt_hashes(dataset, sel[again].tolist())
        stored = done.rows["prompt_sha256"].take(pa.array(pos[again])).to_pylist()
        stale = np.array([d != s for d, s in zip(digests, stored, strict=True)], dtype=bool)
        keep = np.zeros(len(sel), dtype=bool)
        keep[check] = True
        keep[again[~stale]] = False
        return Resume(sel[keep], {}, int(stale.sum()), _checked(done, trusted_part, content, ids, sel, sel_ids))
    rows, row_ids, had = sel[check].tolist(), sel_ids.take(pa.array(check)).to_pylist(), was_done[check].tolist()
    digests = prompt_hashes(dataset, rows)
    stored = done.rows["prompt_sha256"].take(pa.array(pos[check], mask=~was_done[check])).to_pylist()
    todo: list[int] = []
    hashes: dict[str, str] = {}
    rescored = 0
    for k, item_id, digest, before, under_key in zip(rows, row_ids, digests, stored, had, strict=True):
        if under_key and before == digest:
            continue
        rescored += under_key
        todo.append(k)
        hashes[item_id] = digest
    return Resume(todo, hashes, rescored, _checked(done, trusted_part, content, ids, sel, sel_ids))


def _checked(
    done: _Done,
    trusted_part: np.ndarray,
    content: PromptContent | None,
    ids: pa.ChunkedArray,
    sel: np.ndarray,
    sel_ids: pa.ChunkedArray,
) -> Checked:
    """The stored rows the run checked: those of the parts of another content (`Checked`)."""
    untrusted = frozenset(name for name, trust in zip(done.names, trusted_part, strict=True) if not trust)
    if content is None or not untrusted:
        return Checked(None if content is None else content.sha256)
    # rows whose id the whole config lacks are no item's (a later build dropped it): nothing skips them
    whole = len(ids) == content.rows == len(sel)
    return Checked(content.sha256, untrusted, None if whole else sel_ids.combine_chunks())
