"""The positions a run's items need, for an engine that sizes its context to them.

`load_backend` takes `needs_of(...)` as its `needed_tokens`: once the tokenizer is known, the
longest of the run's selected items (`runners.run.session.select_rows`) are tokenised exactly as the
runners tokenise them; `runners.model.context_length` caps that by the model's position limit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from runners.model import context_length
from runners.prompts import PromptConfig, chat_for
from runners.results import resume
from runners.rows import prepare_request, render_context
from runners.run.session import select_rows
from runners.scoring.settings import ScoringSettings
from runners.scoring.tokenize import digit_start_ids, encode_context


def tokens_needed(dataset: Any, rows: Sequence[int], tokenizer: Any, chat: bool, settings: Any) -> int:
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
        use_chat = chat_for(tokenizer, chat)
        rows = select_rows(resume.id_column(prompts.dataset), shard, limit)
        return tokens_needed(prompts.dataset, rows, tokenizer, use_chat, settings)

    return needed
