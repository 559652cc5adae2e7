"""The local driver (docs/DESIGN.md section 7): a prompt config + a model -> result parts, resumable and shardable.

1. The prompt config was loaded and checked before the model loaded (`runners.run.runner.resolve_protocol`:
   the item contract, the protocol, the results folder); the session checks what needs the tokenizer.
2. `runners.run.session` selects the shard's items and those still to score under the
   `ResultKey` (same id and same prompt hash are done). A served model resumed scores one
   done item again first (`runners.run.served_recheck`): other weights behind its name are refused.
3. The rest is scored `batch_size` items at a time by `runners.rows.run_items`; the session
   flushes rows as an atomically written part every `flush_every` rows and at the end. A
   killed run loses at most the rows since its last flush; rerunning the same command resumes.
4. When the config is done, the session compacts the key folder and refreshes
   results_manifest.json and README.md (atomically, under a lock).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from promptgen.core.errors import ProbeError
from runners.backends.protocol import Backend
from runners.model.device import default_batch_size
from runners.prompts import PromptConfig
from runners.results.summary import RunSummary
from runners.rows import scored_batches
from runners.run.request import RunRequest
from runners.run.served_recheck import check_served_unchanged
from runners.run.session import Session

__all__ = ["RunRequest", "RunSummary", "run_config"]


def run_config(
    prompts: PromptConfig,
    backend: Backend,
    tokenizer: Any,
    request: RunRequest,
    *,
    model_revision: str,
    on_start: Callable[[int, int], None] | None = None,
    on_advance: Callable[[int], None] | None = None,
) -> RunSummary:
    """Score the not-yet-done items of one shard of `prompts` into `request.results` (see the module docstring).

    `backend` and `tokenizer` are `request.model` loaded with `request.load`, whose revision for
    the key is `model_revision`. `request.model_name` names the model in every file written
    (default: the portable name of `backend.model_id`, see `session.model_name_for`).
    `request.chat=None` uses the chat template when the tokenizer has one; `batch_size=None` is
    `runners.model.device.default_batch_size`. The key's dtype is the one the backend loaded
    (`request.load.dtype` is only a fallback for backends that do not say).
    `on_start(total, done)` and `on_advance(n)` report progress.
    """
    started = time.perf_counter()
    settings = request.scoring  # the protocol's as resolved, else (called directly) the request's or the defaults
    batch_size = default_batch_size(backend.device) if request.batch_size is None else request.batch_size
    dtype = backend.dtype or request.load.dtype  # what the backend loaded; what was asked when it does not say
    session = Session.start(
        prompts,
        request,
        tokenizer,
        model_id=backend.model_id,
        revision=model_revision,
        dtype=dtype,
        backend=backend.name,
        batch_size=batch_size,
        started=started,
    )
    chat = session.chat
    # a served model's rows are keyed by what the server says: one done item scored again shows other weights
    check_served_unchanged(
        prompts.dataset, session.selected, session.todo, session.folder, backend, tokenizer, chat, settings
    )
    if on_start is not None:
        on_start(len(session.selected), len(session.selected) - len(session.todo))
    todo = session.todo
    # each batch is read and tokenised on a background thread while the backend scores the one before
    loads = (
        lambda start=start: prompts.dataset.select(todo[start : start + batch_size]).to_list()
        for start in range(0, len(todo), batch_size)
    )
    try:
        for items, rows in scored_batches(loads, backend, tokenizer, chat, settings=settings):
            session.add(rows)
            if on_advance is not None:
                on_advance(len(items))
    except ValueError as exc:
        session.flush()
        raise ProbeError(f"{prompts.path} config {prompts.config!r}: {exc}") from exc
    extra = {"batch_size": batch_size, "device": backend.device}
    return session.finish(backend=backend.name, dtype=dtype, hardware=backend.hardware().manifest(), extra=extra)
