"""One resumable run of one prompt config under one result key: what both drivers share.

`probes run` scores in this process (`runners.run.local_driver`) or on a Ray actor pool
(`runners.run.ray_driver`); either way the same session decides what to score and records it:

1. selection: the rows of its `Selection` (`runners.selection.select`: where, sample, shard, limit), which
   a resolved run's config already holds (`runners.run.runner.resolve_protocol` selected them once);
2. resume: an item is skipped only when its id is already under the key AND its stored
   `prompt_sha256` equals the current item's (`results.prompt_sha256`), so a rebuilt dataset
   with changed prompts is rescored, never served stale rows; rows scored on the prompt
   content the config has now are trusted without hashing their prompts (`runners.results.resume`);
3. rows get the key's fields (portable model name, revision, scoring JSON, chat) and their
   prompt hash, and are flushed as an atomically written part (labelled with the prompt
   content) every `flush_every` rows;
4. at the end the key folder is compacted to one row per id (one part per prompt content),
   and the run's manifest entry (provenance, throughput, hardware) and the card are written
   under the manifest's lock.

Drivers only load models and move items to scorers and rows back. What a run returns is
`runners.results.summary.RunSummary`; the `--out` guard checked before the model loads is `runners.results.out_folder`;
the positions the selected items need, for an engine sized to them, are `runners.run.sizing`.
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from promptgen.core.errors import ProbeError
from promptgen.core.memory import release_mapped
from promptgen.core.version import __version__
from runners import results as res
from runners.model import identity as model_identity
from runners.prompts import PromptConfig, chat_for, check_chat_form, check_chat_template, check_number_mode, rows_of
from runners.results import resume
from runners.results.summary import REFUSED_EXAMPLES, RunSummary, refused_answer
from runners.run.request import RunRequest
from runners.scoring.settings import ScoringSettings
from runners.selection.select import EVERY_ROW, Selection


def result_key(
    model_name: str,
    model_revision: str,
    settings: ScoringSettings,
    chat: bool,
    *,
    dtype: str | None,
    backend: str,
) -> res.ResultKey:
    """The result key: model content revision + everything else that changes the numbers, under a portable name."""
    scoring = {**json.loads(settings.key()), "chat": chat, "dtype": dtype, "backend": backend}
    return res.ResultKey(model_name, model_revision, json.dumps(scoring, sort_keys=True, separators=(",", ":")))


def model_name_for(model: str, model_name: str | None) -> str:
    """`--model-name`, checked, else the portable default for `model` (`model_identity.default_model_name`), checked
    alike (`model_identity.check_model_name`): a local folder's own name becomes the key's name, so it is the
    name checked, never the path to it."""
    if model_name is not None:
        return model_identity.check_model_name(model_name)
    model_identity.refuse_spoofed_name(model, "--model")
    name = model_identity.default_model_name(model, local=Path(model).expanduser().exists())
    return model_identity.check_model_name(
        name, "the model name taken from --model", fix="; name the results with --model-name ORG/MODEL"
    )


def keep_one_name(results: Path, key: res.ResultKey, *, name_given: bool) -> res.ResultKey:
    """One model keeps one name in a results folder (`results.named_elsewhere`).

    When this model and settings already have results under another name, a default name
    (the folder's name, for a copy of the model elsewhere) gives way to the recorded one, and
    an explicit `--model-name` that differs is refused: adding its rows would show one model
    as two, and publishing refuses such a folder.
    """
    clash = res.named_elsewhere(results, key)
    if clash is None:
        return key
    where, name = clash
    if not name_given:
        return replace(key, model=name)
    raise ProbeError(
        f"{where}: this model, at these settings, already has results here under the model name {name!r}, "
        f"not {key.model!r}; rerun with --model-name {name!r} (one model keeps one name in a results folder), "
        "or write to another --out"
    )


@dataclass
class Session:
    """The state of one run (module docstring); `open` it, `add` rows, `finish` it."""

    prompts: PromptConfig
    results: Path
    key: res.ResultKey
    chat: bool
    shard: tuple[int, int]
    limit: int | None
    flush_every: int
    folder: Path
    selected: Sequence[int]
    #: dataset rows still to score, in selection order (an array when the plan hashed none: `resume.Resume.todo`)
    todo: Sequence[int] | npt.NDArray[np.int64]
    rescored: int
    hashes: dict[str, str]  # id -> prompt hash of the items to score (empty when `hash_later`)
    started: float
    #: the prompt content this run's rows are scored on, and the stored rows it checked (`runners.results.resume`)
    checked: resume.Checked = field(default_factory=resume.Checked)
    scoring_started: float = 0.0
    pending: list[dict[str, Any]] = field(default_factory=list)
    parts: int = 0
    refusals: int = 0
    refused_examples: list[str] = field(default_factory=list)
    tokens: int = 0
    prompt_tokens: int = 0
    #: scored rows whose backend did not report computed tokens (their prompt tokens are counted)
    uncounted: int = 0
    scored: int = 0
    #: the rows' prompts are hashed as they are added (`add_table`), not when the session opens (`open`)
    hash_later: bool = False
    #: `finish` merges the parts this session wrote into one, a row group at a time (`open`'s `merge_parts`)
    merge_parts: bool = False
    #: the parts this session wrote
    written: list[Path] = field(default_factory=list)
    pending_tables: list[pa.Table] = field(default_factory=list)

    @classmethod
    def start(
        cls,
        prompts: PromptConfig,
        request: RunRequest,
        tokenizer: Any,
        *,
        model_id: str,
        revision: str,
        dtype: str | None,
        backend: str,
        batch_size: int | None,
        started: float,
    ) -> Session:
        """The one way a driver starts a config: its settings (`RunRequest.scoring`), the chat default, the
        checks that need the tokenizer, the model's name and the result key, then `open`.

        `model_id` is what names the model when `request.model_name` does not (`model_name_for`),
        `revision` and `dtype` what the key records; the checks that need no model ran before the load
        (`runners.run.runner.resolve_protocol`).
        """
        settings, chat = request.scoring, chat_for(tokenizer, request.chat)
        if request.chat is None:  # decided by the tokenizer just now; a form decided before the load was checked then
            check_chat_form(prompts, chat)
        check_chat_template(prompts.config, tokenizer, chat)
        check_number_mode(prompts, settings, tokenizer, chat)
        name = model_name_for(model_id, request.model_name)
        key = result_key(name, revision, settings, chat, dtype=dtype, backend=backend)
        return cls.open(
            prompts,
            Path(request.results),
            key,
            chat=chat,
            rows=request.selection,
            batch_size=batch_size,
            flush_every=request.flush_every,
            started=started,
            name_given=request.model_name is not None,
        )

    @classmethod
    def open(
        cls,
        prompts: PromptConfig,
        results: Path,
        key: res.ResultKey,
        *,
        chat: bool,
        rows: Selection = EVERY_ROW,
        batch_size: int | None = 16,
        flush_every: int = 64,
        started: float | None = None,
        name_given: bool = True,
        hash_later: bool = False,
        merge_parts: bool = False,
    ) -> Session:
        """Select the items `rows` keeps (`runners.prompts.rows_of`: all of them when `prompts` already holds
        exactly those, as a resolved run's does) and those still to score (`batch_size` None: the driver's).
        Its shard names the parts written; it and its limit are recorded in the manifest entry.

        The checks that need no model ran before it, once: the counts as the `RunRequest` was made,
        the results folder (`runners.results.out_folder.check_out_folder`) and its prompt build
        (`runners.results.check.check_same_prompts`) in `runners.run.runner.resolve_protocol`, or in the
        importer for the rows it writes. `name_given`: the key's model name is the user's
        `--model-name`, not a default (`keep_one_name`).

        A writer of millions of rows (`probes import`) passes `hash_later` (no prompt is hashed now
        but the stored rows' to check: each row's is hashed as `add_table` adds it, by its dataset
        position) and `merge_parts` (its rows are new and each id once: `finish` merges the parts it
        wrote into one, a row group at a time, where compaction would read them back whole).
        """
        results = Path(results)
        key = keep_one_name(results, key, name_given=name_given)
        folder = res.key_dir(results, prompts.config, key)
        remove_stale_temp_files(folder)
        picked = rows_of(prompts, rows)
        if picked.draw is not None:  # the sample drawn here, for the manifest entry (a resolved run's is drawn)
            prompts = replace(prompts, sample=picked.draw.record())
        selected = picked.rows
        ids = resume.id_column(prompts.dataset)
        plan = resume.plan(prompts.dataset, ids, selected, folder, prompts.content, hash_todo=not hash_later)
        del ids
        release_mapped(prompts.dataset)  # the ids and stored rows' prompts it read (`promptgen.core.memory`)
        return cls(
            prompts=prompts,
            results=results,
            key=key,
            chat=chat,
            shard=rows.shard,
            limit=rows.limit,
            flush_every=flush_every,
            folder=folder,
            selected=selected,
            todo=plan.todo,
            rescored=plan.rescored,
            hashes=plan.hashes,
            started=time.perf_counter() if started is None else started,
            scoring_started=time.perf_counter(),
            checked=plan.checked,
            hash_later=hash_later,
            merge_parts=merge_parts,
        )

    def add(self, rows: Iterable[dict[str, Any]]) -> int:
        """Stamp scored rows with the key and their prompt hash; flush when enough are pending."""
        n = 0
        for row in rows:
            row.update(
                model=self.key.model,
                model_revision=self.key.model_revision,
                scoring=self.key.scoring,
                chat=self.chat,
                prompt_sha256=self.hashes[row["id"]],
            )
            if row["refused"]:
                self.refusals += 1
                if len(self.refused_examples) < REFUSED_EXAMPLES:
                    self.refused_examples.append(refused_answer(row))
            prompt = int(row["context_tokens"] or 0) + sum(row["choice_tokens"] or ())
            computed = row.pop("computed_tokens", None)
            self.prompt_tokens += prompt
            self.tokens += prompt if computed is None else int(computed)
            self.uncounted += computed is None
            self.pending.append(row)
            n += 1
        self.scored += n
        if len(self.pending) >= self.flush_every:
            self.flush()
        return n

    def add_table(self, rows: pa.Table, positions: Sequence[int] | np.ndarray) -> int:
        """`add` for rows as an Arrow table (result columns; those it lacks are null), `positions` their rows in
        `prompts.dataset`: each row's prompt is hashed from there (`hash_later`, else looked up by its id)."""
        n = len(rows)
        if len(positions) != n:
            raise ValueError(f"{n} rows, {len(positions)} positions")
        if not n:
            return 0
        rows = res.rows_table(rows)
        if self.hash_later:
            digests = resume.prompt_hashes(self.prompts.dataset, np.asarray(positions, dtype=np.int64).tolist())
        else:
            digests = [self.hashes[i] for i in rows["id"].to_pylist()]
        column = rows.schema.get_field_index("prompt_sha256")
        rows = rows.set_column(column, "prompt_sha256", pa.array(digests, pa.string()))
        refused = rows["refused"].to_numpy(zero_copy_only=False).astype(bool)
        self.refusals += int(refused.sum())
        if len(self.refused_examples) < REFUSED_EXAMPLES and refused.any():
            more = rows.filter(pa.array(refused)).slice(0, REFUSED_EXAMPLES - len(self.refused_examples))
            self.refused_examples.extend(refused_answer(row) for row in more.to_pylist())
        context = pc.sum(rows["context_tokens"]).as_py() or 0
        prompt = int(context) + int(pc.sum(pc.list_flatten(rows["choice_tokens"])).as_py() or 0)
        self.prompt_tokens += prompt
        self.tokens += prompt  # an added table records no computed tokens: its prompt tokens are counted
        self.uncounted += n
        self.pending_tables.append(rows)
        self.scored += n
        if len(self.pending) + sum(len(t) for t in self.pending_tables) >= self.flush_every:
            self.flush()
        return n

    def flush(self) -> None:
        """Write the pending rows as one part (a killed run loses at most these), or into the session's one part."""
        if not self.pending and not self.pending_tables:
            return
        res.write_key_file(self.folder, self.key)
        tables = [res.rows_table(self.pending)] if self.pending else []
        table = pa.concat_tables([*tables, *self.pending_tables])
        self.pending, self.pending_tables = [], []
        self.written.append(res.write_part(self.folder, self.shard, self._stamped(table), content=self.checked.content))
        self.parts += 1

    def _stamped(self, rows: pa.Table) -> pa.Table:
        """`rows` with the key's columns (model, revision, scoring, chat) set on every row."""
        key = {"model": self.key.model, "model_revision": self.key.model_revision, "scoring": self.key.scoring}
        for name, value in {**key, "chat": self.chat}.items():
            column = pa.repeat(pa.scalar(value, res.RESULT_SCHEMA.field(name).type), len(rows))
            rows = rows.set_column(rows.schema.get_field_index(name), name, column)
        return rows

    def finish(
        self, *, backend: str, dtype: str | None, hardware: Mapping[str, Any], extra: Mapping[str, Any] | None = None
    ) -> RunSummary:
        """Flush, compact the key folder, write the manifest entry and the card; the run's summary."""

        self.flush()
        if self.merge_parts and len(self.written) > 1:
            res.merge_parts(self.folder, self.written, content=self.checked.content)
        # the rows it checked are all current only once every stale one was rescored
        done = self.scored >= len(self.todo)
        checked = self.checked if done else resume.Checked()
        res.compact_key(self.folder, content=checked.content, checked=checked.parts, ids=checked.ids)
        scoring_s = time.perf_counter() - self.scoring_started
        wall_s = time.perf_counter() - self.started
        rate = (lambda n: n / scoring_s) if len(self.todo) and scoring_s > 0 else (lambda n: 0.0)
        summary = RunSummary(
            config=self.prompts.config,
            key=self.key,
            key_dir=self.folder,
            selected=len(self.selected),
            skipped=len(self.selected) - len(self.todo),
            items=len(self.todo),
            refusals=self.refusals,
            parts=self.parts,
            wall_s=wall_s,
            items_per_s=rate(len(self.todo)),
            tokens=self.tokens,
            tokens_per_s=rate(self.tokens),
            rescored=self.rescored,
            prompt_tokens=self.prompt_tokens,
            tokens_counted="prompt" if self.uncounted else "computed",
            refused_examples=tuple(self.refused_examples),
        )
        entry: dict[str, Any] = {
            "prompt_dataset": self.prompts.provenance(),
            "model": self.key.model,
            "model_revision": self.key.model_revision,
            "key": self.folder.name,
            "backend": backend,
            "dtype": dtype,
            "scoring": json.loads(self.key.scoring),
            "runner_version": __version__,
            "shard": f"{self.shard[0]}/{self.shard[1]}",
            "limit": self.limit,
            # the sample the rows are (unit, columns, size, seed, population: `runners.selection.sample`); not in
            # the key
            **({"sample": self.prompts.sample} if getattr(self.prompts, "sample", None) else {}),
            "selected": summary.selected,
            "skipped_done": summary.skipped,
            "rescored": summary.rescored,
            "items": summary.items,
            "refusals": summary.refusals,
            "wall_s": round(wall_s, 3),
            "items_per_s": round(summary.items_per_s, 3),
            "tokens": summary.tokens,
            "tokens_per_s": round(summary.tokens_per_s, 1),
            "tokens_counted": summary.tokens_counted,
            "prompt_tokens": summary.prompt_tokens,
            "hardware": {"platform": platform.platform(), "python": platform.python_version(), **hardware},
            **(extra or {}),
            "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        self.results.mkdir(parents=True, exist_ok=True)
        run_id = f"{self.prompts.config}/{self.folder.name}/shard-{self.shard[0]}of{self.shard[1]}"
        res.update_manifest(self.results, run_id, entry, keep_if=lambda _old: summary.items == 0, after=self._card)
        return summary

    def _card(self, manifest: Mapping[str, Any]) -> None:
        models = sorted({res.short_model_name(str(r.get("model", ""))) for r in manifest["runs"].values()})
        res.write_card(
            self.results,
            manifest,
            pretty_name=f"social-bias-probes results: {', '.join(models)}",
            license=self.prompts.license,
        )


#: a part's hidden temporary file older than this was left by a killed writer (a part takes seconds)
STALE_TEMP_SECONDS = 3600


def remove_stale_temp_files(folder: Path, *, now: float | None = None) -> list[Path]:
    """Remove the hidden `.part-*.tmp` files a killed run left in a key folder (older than an hour)."""
    now = time.time() if now is None else now
    removed = []
    if folder.is_dir():
        for path in folder.glob(".part-*.tmp"):
            try:
                if now - path.stat().st_mtime > STALE_TEMP_SECONDS:
                    path.unlink()
                    removed.append(path)
            except FileNotFoundError:  # another run cleaned it
                pass
    return removed
