"""The positions a run's items need, for an engine that sizes its context to them.

`load_backend` takes `needs_of(...)` as its `needed_tokens`: once the tokenizer is known, the
longest of the run's selected items (`runners.prompts.rows_of`) are tokenised exactly as the
runners tokenise them; `runners.model.context_length` caps that by the model's position limit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from runners.model import context_length
from runners.prompts import PromptConfig, chat_for, rows_of
from runners.rows import prepare_request, render_context
from runners.scoring.settings import ScoringSettings
from runners.scoring.tokenize import digit_start_ids, encode_context
from runners.selection.select import EVERY_ROW, Selection


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
    rows: Selection = EVERY_ROW,
) -> Callable[[Any], int]:
    """`needed_tokens` for `load_backend`: the positions the longest items `rows` keeps need, once the tokenizer is
    known (a resolved run's config holds only its rows: `rows` is its request's `selection`)."""

    def needed(tokenizer: Any) -> int:
        use_chat = chat_for(tokenizer, chat)
        return tokens_needed(prompts.dataset, rows_of(prompts, rows).rows, tokenizer, use_chat, settings)

    return needed
