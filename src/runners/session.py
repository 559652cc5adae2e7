"""One resumable run of one prompt config under one result key: what both drivers share.

`probes run` scores in this process (`runners.local_run`) or on a Ray actor pool
(`runners.ray_run`); either way the same session decides what to score and records it:

1. selection: the shard (a hash of the item id), then `--limit` (the first N of the shard);
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

Drivers only load models and move items to scorers and rows back.
"""

from __future__ import annotations

import json
import math
import platform
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa

from promptgen.core.errors import ProbeError
from promptgen.core.outputs import Input, Output, check_output, visible_entries
from promptgen.core.version import __version__
from runners import results as res
from runners.model import context_length
from runners.model import identity as model_identity
from runners.prompts import PromptConfig
from runners.results import resume
from runners.results.check import check_same_prompts
from runners.rows import prepare_request, render_context
from runners.scoring.settings import ScoringSettings
from runners.scoring.tokenize import digit_start_ids, encode_context


@dataclass
class RunSummary:
    config: str
    key: res.ResultKey
    key_dir: Path
    selected: int  # items of this shard (after --limit)
    skipped: int  # already done under the key, with the same prompt
    items: int  # scored by this run
    refusals: int  # among the items scored by this run
    parts: int  # parts written by this run
    wall_s: float
    items_per_s: float
    #: token positions computed for the scored items: what the backend reports it ran (the hf
    #: backend: shared context prefixes once, plus continuation and digit-trie positions;
    #: `runners.scoring.token_accounting`), else their prompt tokens (see `tokens_counted`)
    tokens: int = 0
    tokens_per_s: float = 0.0
    #: prompt and answer tokens of the scored items (contexts plus options; for number and
    #: generation items, contexts only), whatever was computed
    prompt_tokens: int = 0
    #: "computed" when every scored row came with the backend's computed count, else "prompt"
    tokens_counted: str = "computed"
    #: items rescored because their prompt changed since they were scored
    rescored: int = 0
    #: which scoring protocol ran: the paper's, or how the run differs from it (`resolve_scoring`)
    protocol: str = ""
    #: the first refused answers of this run, as `refused_answer` shows them (at most `REFUSED_EXAMPLES`)
    refused_examples: tuple[str, ...] = ()

    @property
    def all_refused(self) -> bool:
        """This run scored items and refused every one: its config has no answer to analyse."""
        return self.items > 0 and self.refusals == self.items

    def line(self) -> str:
        again = f", {self.rescored} rescored after a prompt change" if self.rescored else ""
        text = (
            f"{self.config}: {self.items} items scored ({self.skipped} already done{again}), "
            f"{self.refusals} refusals, {self.items_per_s:.2f} items/s, "
            f"{self.tokens_per_s:.0f} {self.tokens_counted} tokens/s, "
            f"{self.wall_s:.1f} s" + (f"; {self.protocol}" if self.protocol else "")
        )
        return text + (f"\n{self.config}: {self.refused_advice()}" if self.all_refused else "")

    def refused_advice(self) -> str:
        """`all_refused_advice` with this run's first refused answers."""
        return all_refused_advice(self.refused_examples, json.loads(self.key.scoring))


#: refused answers a run summary keeps to show (`RunSummary.refused_examples`)
REFUSED_EXAMPLES = 3


def refused_answer(row: Mapping[str, Any], width: int = 80) -> str:
    """How a refused row is shown: its generated answer (shortened), else the valid mass its distribution had."""
    text = row.get("generated_text")
    if isinstance(text, str):
        flat = " ".join(str(text).split())
        return flat if len(flat) <= width else flat[: width - 1] + "…"
    mass = row.get("valid_mass")
    return f"(valid mass {mass:.3g})" if isinstance(mass, float) and not math.isnan(mass) else "(no answer)"


def all_refused_advice(examples: Sequence[str], scoring: Mapping[str, Any]) -> str:
    """The line that says every item was refused, with the first answers and what to do instead.

    `scoring` is the run's key (`ScoringSettings.key()`): `--scoring sentence` is advised only to
    a run that asked for an answer form (generated text, or a letter) and so can gain from it.
    """
    seen = "; ".join(repr(e) for e in examples) or "none kept"
    text = f"EVERY item was refused: no answer to analyse (first answers: {seen}). "
    if scoring.get("mode") == "generate" or scoring.get("choice_mode") == "letter":
        return text + (
            "A model that does not answer in the asked form can still be read by its distribution over the "
            "answers: rerun with --scoring sentence"
        )
    return text + (
        "They were read from the distribution over the answers already, and the model put too little "
        "probability on every asked answer for one to be read"
    )


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
    """`--model-name`, checked, else the portable default for `model` (`model_identity.default_model_name`)."""
    if model_name is not None:
        return model_identity.check_model_name(model_name)
    model_identity.refuse_spoofed_name(model, "--model")
    return model_identity.default_model_name(model, local=Path(model).expanduser().exists())


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

    prompts: Any  # prompts.PromptConfig
    results: Path
    key: res.ResultKey
    chat: bool
    shard: tuple[int, int]
    limit: int | None
    flush_every: int
    folder: Path
    selected: list[int]
    todo: list[int]
    rescored: int
    hashes: dict[str, str]  # id -> prompt hash of the items to score
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

    @classmethod
    def open(
        cls,
        prompts: Any,
        results: Path,
        key: res.ResultKey,
        *,
        chat: bool,
        shard: tuple[int, int] = (0, 1),
        limit: int | None = None,
        batch_size: int | None = 16,
        flush_every: int = 64,
        started: float | None = None,
        name_given: bool = True,
        rescore_changed: bool = False,
    ) -> Session:
        """Check the options, select the shard's items and those still to score (`batch_size` None: the driver's).

        `name_given`: the key's model name is the user's `--model-name`, not a default
        (`keep_one_name`). `rescore_changed`: the results folder may hold another build of the
        config's prompts; its stored items this run selects are checked and the changed ones
        rescored (`results_check.check_same_prompts`); else such a run is refused.
        """
        if (batch_size is not None and batch_size < 1) or flush_every < 1:
            raise ProbeError("--batch-size and --flush-every must be positive")
        if limit is not None and limit < 1:
            raise ProbeError(f"--limit must be positive, got {limit}")
        results = Path(results)
        check_out_folder(results)
        check_same_prompts(results, prompts.provenance(), rescore_changed=rescore_changed)
        key = keep_one_name(results, key, name_given=name_given)
        folder = res.key_dir(results, prompts.config, key)
        remove_stale_temp_files(folder)
        ids = resume.id_column(prompts.dataset)
        selected = select_rows(ids, shard, limit)
        plan = resume.plan(prompts.dataset, ids, selected, folder, prompts.content)
        return cls(
            prompts=prompts,
            results=results,
            key=key,
            chat=chat,
            shard=shard,
            limit=limit,
            flush_every=flush_every,
            folder=folder,
            selected=selected,
            todo=plan.todo,
            rescored=plan.rescored,
            hashes=plan.hashes,
            started=time.perf_counter() if started is None else started,
            scoring_started=time.perf_counter(),
            checked=plan.checked,
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

    def flush(self) -> None:
        """Write the pending rows as one part (a killed run loses at most these)."""
        if self.pending:
            res.write_key_file(self.folder, self.key)
            res.write_part(self.folder, self.shard, self.pending, content=self.checked.content)
            self.parts += 1
            self.pending = []

    def finish(
        self, *, backend: str, dtype: str | None, hardware: Mapping[str, Any], extra: Mapping[str, Any] | None = None
    ) -> RunSummary:
        """Flush, compact the key folder, write the manifest entry and the card; the run's summary."""

        self.flush()
        # the rows it checked are all current only once every stale one was rescored
        done = self.scored >= len(self.todo)
        checked = self.checked if done else resume.Checked()
        res.compact_key(self.folder, content=checked.content, checked=checked.parts, ids=checked.ids)
        scoring_s = time.perf_counter() - self.scoring_started
        wall_s = time.perf_counter() - self.started
        rate = (lambda n: n / scoring_s) if self.todo and scoring_s > 0 else (lambda n: 0.0)
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


def select_rows(ids: Sequence[str] | pa.ChunkedArray, shard: tuple[int, int], limit: int | None) -> list[int]:
    """The rows of a shard (a hash of the item id, so shards partition a config in any row order), then --limit."""
    if shard[1] == 1:
        return list(range(len(ids) if limit is None else min(limit, len(ids))))
    values = ids.to_pylist() if isinstance(ids, pa.ChunkedArray | pa.Array) else ids
    selected = [k for k, i in enumerate(values) if res.shard_of(i, shard[1]) == shard[0]]
    return selected if limit is None else selected[:limit]


#: a results folder: `probes run` writes into it only when it holds nothing but what runs write
#: (`results.TOP_ENTRIES`: README.md, results_manifest.json, data/), so a prompt dataset, a report or any
#: other folder is refused
def is_results_folder(folder: Path) -> bool:
    """Whether `folder` holds only what runs write, and a card only beside its manifest (never a project's README)."""
    entries = visible_entries(folder)
    return entries <= set(res.TOP_ENTRIES) and (res.CARD_NAME not in entries or res.MANIFEST_NAME in entries)


RESULTS_OUTPUT = Output("results folder", owns=is_results_folder, replaces=False)


def check_out_folder(results: str | Path, *, inputs: Iterable[Input] = ()) -> Path:
    """`--out` is a results folder or new, and writable: never empty, a file, a prompt dataset or an input.

    Checked before a model loads (`promptgen.core.outputs.check_output`), so an unwritable folder
    or a damaged manifest is one line, not a traceback after minutes of loading and scoring.
    """
    target = check_output(results, RESULTS_OUTPUT, inputs=inputs)
    res.read_manifest(target)  # a manifest of the wrong shape: refused now, not after the scoring
    return target


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


# ----------------------------------------------------------------------------- the positions a run's items need


def tokens_needed(dataset: Any, rows: list[int], tokenizer: Any, chat: bool, settings: Any) -> int:
    """The most positions one of `rows` needs: context + longest continuation, or + the generation budget."""
    columns = [c for c in ("prompt", "messages") if c in dataset.column_names]
    texts = dataset.select(rows).select_columns(columns).to_list()
    longest = sorted(range(len(rows)), key=lambda k: -context_length.text_chars(texts[k]))[: context_length.SAMPLE]
    items = dataset.select([rows[k] for k in longest]).to_list()
    digits = digit_start_ids(tokenizer)
    need = 1
    for item in items:
        if settings.mode == "generate" or item.get("task") == "text":
            context = encode_context(tokenizer, render_context(tokenizer, item, chat))
            need = max(need, len(context) + settings.max_new_tokens)
        else:
            request = prepare_request(item, tokenizer, chat, settings, digits)
            need = max(need, len(request.context) + max((len(c) for c in request.continuations), default=0) + 1)
    return need


def needs_of(
    prompts: PromptConfig,
    settings: ScoringSettings,
    chat: bool | None,
    *,
    shard: tuple[int, int] = (0, 1),
    limit: int | None = None,
) -> Callable[[Any], int]:
    """`needed_tokens` for `load_backend`: the positions the run's longest items need, once the tokenizer is known."""

    def needed(tokenizer: Any) -> int:
        use_chat = bool(getattr(tokenizer, "chat_template", None)) if chat is None else chat
        rows = select_rows(resume.id_column(prompts.dataset), shard, limit)
        return tokens_needed(prompts.dataset, rows, tokenizer, use_chat, settings)

    return needed
