"""Items -> result rows (docs/DESIGN.md section 2), for choice and number items. No I/O.

The first step of the run loop: text is rendered (chat template or plain prompt) and
tokenised here, once, by `runners.scoring.tokenize`; the backend only sees token ids; the numbers
it returns become probabilities in `runners.scoring.distributions`. Sharding, resume and the result
writer come next (docs/DESIGN.md section 7).

Rows keep the raw measurements next to the derived values: per-option log-probabilities
and token counts, the context length and the valid mass, so analysis can renormalise or
re-threshold from the released data alone. Fields that do not apply to an item's task are
None; values that apply but cannot be computed are NaN (e.g. `valid_mass` in sentence
mode, where the options do not cover the output space).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from promptgen.core.secrets import scrub
from promptgen.seeding import hash_int
from runners.backends.protocol import Backend, GeneratingBackend
from runners.exchange import GenerateRequest, Generation, NumberBound, ScoreRequest, ScoreResult
from runners.results.rules import check_rows
from runners.scoring.distributions import (
    NumberTrie,
    build_number_trie,
    first_token_distribution,
    first_token_ids,
    first_token_request,
    letter_distribution,
    letter_request,
    number_distribution,
    number_request,
    refused_by_mass,
    sentence_choice_probs,
)
from runners.scoring.number_bound import bounded_number_distribution, trie_size
from runners.scoring.parse import parse_choice, parse_text, read_number
from runners.scoring.settings import ScoringSettings
from runners.scoring.tokenize import (
    Tokenizer,
    digit_start_ids,
    encode_context,
    encode_continuations,
    encode_separately,
    end_of_turn_ids,
    label_token_ids,
    number_paths,
    render_chat,
)


@dataclass
class _Prepared:
    item: Mapping[str, Any]
    request: ScoreRequest
    label_ids: list[tuple[int, ...]] | None = None
    trie: NumberTrie | None = None
    #: first-token number items: {n: its one-token ids}
    first_ids: dict[int, tuple[int, ...]] | None = None


def render_context(tokenizer: Tokenizer, item: Mapping[str, Any], chat: bool) -> str:
    """The text the answer follows: the chat template up to the assistant turn, or the plain prompt."""
    if chat and not item.get("messages"):
        raise ValueError(
            f"item {item.get('id')!r} has no chat messages (a base-model prompt): score it with --no-chat, "
            "or pick the config's chat variant"
        )
    return render_chat(tokenizer, item["messages"]) if chat else item["prompt"]


def _prepare(
    item: Mapping[str, Any], tokenizer: Tokenizer, chat: bool, settings: ScoringSettings, digits: tuple[int, ...]
) -> _Prepared:
    context = render_context(tokenizer, item, chat)
    task = item.get("task")
    where = f"item {item.get('id')!r}"
    if task == "choice":
        if not item.get("choices"):
            raise ValueError(f"{where}: a choice item needs `choices`")
        if settings.choice_mode == "sentence":
            encode = encode_separately if settings.tokenization == "separate" else encode_continuations
            ctx, conts = encode(tokenizer, context, item["choices"])
            return _Prepared(item, ScoreRequest(ctx, tuple(conts)))
        labels = item.get("choice_labels") or []
        if len(labels) != len(item["choices"]):
            raise ValueError(f"{where}: letter mode needs one label per choice, got {labels}")
        ctx, label_ids = label_token_ids(tokenizer, context, labels, settings.label_prefixes)
        return _Prepared(item, letter_request(ctx, label_ids), label_ids=label_ids)
    if task == "number":
        lo, hi = item.get("number_min"), item.get("number_max")
        if not isinstance(lo, int) or not isinstance(hi, int):
            raise ValueError(f"{where}: a number item needs integer `number_min` and `number_max`")
        ctx, paths = number_paths(tokenizer, context, lo, hi, settings.number_prefixes)
        if settings.number_mode == "first-token":
            ids = first_token_ids(paths)
            return _Prepared(item, first_token_request(ctx, ids), first_ids=ids)
        trie = build_number_trie(paths)
        request = number_request(ctx, trie, digits)
        if settings.number_tolerance > 0:
            request = replace(request, bound=NumberBound(settings.number_tolerance, tuple(dict.fromkeys(trie.forms))))
        return _Prepared(item, request, trie=trie)
    if task == "text":
        raise ValueError(f"{where}: a free-text item (task `text`) can only be generated: use --scoring generate")
    raise ValueError(f"{where}: task must be `choice` or `number`, got {task!r}")


def prepare_request(
    item: Mapping[str, Any], tokenizer: Tokenizer, chat: bool, settings: ScoringSettings, digits: tuple[int, ...]
) -> ScoreRequest:
    """The backend request of a choice or number item, tokenised exactly as `run_items` tokenises it."""
    return _prepare(item, tokenizer, chat, settings, digits).request


def _empty_row(context_tokens: int) -> dict[str, Any]:
    return {
        "choice_logprobs": None,
        "choice_probs": None,
        "choice_tokens": None,
        "chosen_index": None,
        "number_probs": None,
        "expected_value": None,
        "argmax_value": None,
        "valid_mass": math.nan,
        "refused": False,
        "context_tokens": context_tokens,
        "generated_text": None,
        "parsed_value": None,
        "parse_status": None,
        "finish_reason": None,
        "number_bound": None,
        "trie_positions": None,
    }


def _row(prepared: _Prepared, result: ScoreResult, settings: ScoringSettings) -> dict[str, Any]:
    row = _empty_row(result.context_tokens)
    if prepared.trie is not None or prepared.first_ids is not None:
        if prepared.trie is not None and prepared.request.bound is not None:
            dist, bound, positions = bounded_number_distribution(prepared.trie, result)
            row.update(number_bound=bound, trie_positions=positions)
        elif prepared.trie is not None:
            dist = number_distribution(prepared.trie, result)
            row.update(number_bound=0.0, trie_positions=trie_size(prepared.trie))
        else:
            assert prepared.first_ids is not None  # no trie: the first-token mode's ids
            dist = first_token_distribution(prepared.first_ids, result)
        row.update(
            number_probs=dist.probs.tolist(),
            expected_value=dist.expected_value,
            argmax_value=dist.argmax_value,
            valid_mass=dist.valid_mass,
        )
    elif prepared.label_ids is not None:
        letter = letter_distribution(prepared.label_ids, result)
        with np.errstate(divide="ignore"):
            label_logprobs = np.log(letter.probs * letter.valid_mass)
        row.update(
            choice_logprobs=label_logprobs.tolist(),
            choice_probs=letter.probs.tolist(),
            choice_tokens=[1] * len(prepared.label_ids),
            chosen_index=int(np.argmax(letter.probs)) if letter.valid_mass > 0 else None,
            valid_mass=letter.valid_mass,
        )
    else:
        logprobs = [c.logprob for c in result.continuations]
        counts = [c.n_tokens for c in result.continuations]
        probs = sentence_choice_probs(logprobs, counts, length_normalize=settings.length_normalize)
        row.update(
            choice_logprobs=logprobs,
            choice_probs=probs.tolist(),
            choice_tokens=counts,
            chosen_index=int(np.argmax(probs)),
        )
    if not math.isnan(row["valid_mass"]):
        row["refused"] = refused_by_mass(row["valid_mass"], settings.refusal_threshold, row["number_bound"] or 0.0)
    return row


def generation_request(
    item: Mapping[str, Any], tokenizer: Tokenizer, chat: bool, settings: ScoringSettings
) -> GenerateRequest:
    """The generation request of an item: its rendered context, and a seed derived from the item id."""
    context = encode_context(tokenizer, render_context(tokenizer, item, chat))
    return GenerateRequest(
        context=context,
        max_tokens=settings.max_new_tokens,
        temperature=settings.temperature,
        top_p=settings.top_p,
        seed=hash_int(settings.seed, str(item["id"])) % (2**31) if settings.temperature > 0 else settings.seed,
        stop=tuple(item.get("stop") or ()),
        stop_token_ids=end_of_turn_ids(tokenizer),
        messages=tuple(item["messages"]) if chat else (),
    )


def generated_row(
    item: Mapping[str, Any],
    request: GenerateRequest,
    gen: Generation,
    number_parser: str = "scale-aware",
    secrets: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The result row of a generated answer: its text, parsed value, parse status; refused unless parsed.

    A number item's answer is read by `number_parser` (`runners.scoring.parse.read_number`). The
    text is kept as generated except for secrets (`promptgen.core.secrets.scrub`; `secrets`, else
    the known ones): an answer that repeats a token must not carry it into a result part, a
    report's refusal table or a published dataset. The answer is parsed as stored, so every
    row is read again from itself alone."""
    text = scrub(gen.text, secrets)
    row = _empty_row(len(request.context))
    row.update(generated_text=text, finish_reason=gen.finish_reason, valid_mass=math.nan)
    task = item.get("task")
    if task == "number":
        value, status = read_number(text, item["number_min"], item["number_max"], number_parser)
        row.update(parsed_value=value)
    elif task == "choice":
        value, status = parse_choice(text, item.get("choice_labels") or [], item.get("choices") or [])
        row.update(parsed_value=value, chosen_index=value)
    elif task == "text":
        # the answer itself is `generated_text` cut at the stop string (`parse.parse_text`);
        # the row keeps the raw text and the status, so the result schema stays the same
        _, status = parse_text(text, item.get("stop") or (), gen.finish_reason)
    else:
        raise ValueError(f"item {item.get('id')!r}: task must be `choice`, `number` or `text`, got {task!r}")
    row.update(parse_status=status, refused=status != "ok")
    return row


#: digit-starting token ids per tokenizer object (and vocabulary size, should tokens be added)
_DIGITS: weakref.WeakKeyDictionary[Any, tuple[int, tuple[int, ...]]] = weakref.WeakKeyDictionary()


def cached_digit_start_ids(tokenizer: Tokenizer) -> tuple[int, ...]:
    """`digit_start_ids(tokenizer)`, computed once per tokenizer (object) and vocabulary size.

    It decodes the whole vocabulary (a tenth of a second to a third for 49k tokens, more for
    Llama-3's 128k), and a run calls `run_items` once per batch with the same tokenizer.
    """
    size = len(tokenizer)
    try:
        cached = _DIGITS.get(tokenizer)
    except TypeError:  # an object that cannot be weakly referenced: no cache
        return digit_start_ids(tokenizer)
    if cached is None or cached[0] != size:
        cached = (size, digit_start_ids(tokenizer))
        _DIGITS[tokenizer] = cached
    return cached[1]


def run_items(
    items: Sequence[Mapping[str, Any]],
    backend: Backend,
    tokenizer: Tokenizer,
    chat: bool,
    *,
    settings: ScoringSettings | None = None,
    batch_items: int = 64,
) -> list[dict[str, Any]]:
    """One result row per item, in item order (see docs/DESIGN.md section 2 for the columns).

    `chat` picks the item's `messages` through the tokenizer's chat template (instruction-
    tuned models) or its plain `prompt` (base models). Items are sent to the backend
    `batch_items` at a time; the backend orders and batches them itself.
    """
    batches = [items[start : start + batch_items] for start in range(0, len(items), batch_items)]
    loads = [lambda batch=batch: batch for batch in batches]
    return [row for _, rows in scored_batches(loads, backend, tokenizer, chat, settings=settings) for row in rows]


def scored_batches(
    loads: Iterable[Callable[[], Sequence[Mapping[str, Any]]]],
    backend: Backend,
    tokenizer: Tokenizer,
    chat: bool,
    *,
    settings: ScoringSettings | None = None,
) -> Iterator[tuple[Sequence[Mapping[str, Any]], list[dict[str, Any]]]]:
    """(items, rows) of each batch that `loads` reads, in order: one backend call per batch.

    In score mode the next batch is read and prepared (`_prepare`: the tokenization, the number
    tries) on a background thread while the backend scores the current one, so the model
    never waits for Python: the backend gets token ids only and releases the GIL while it
    computes, and the tokenizer is used by that one thread. Generation decodes with the
    tokenizer on the calling thread, so it prepares in turn. An error of a batch's
    preparation is raised when that batch's turn comes, after the batches before it.
    """
    settings = settings or ScoringSettings()
    provenance = {
        "model": backend.model_id,
        "model_revision": backend.model_revision,
        "backend": backend.name,
        "dtype": backend.dtype,
        "device": backend.device,
        "scoring": settings.key(),
    }
    if settings.mode == "generate":
        if not isinstance(backend, GeneratingBackend):
            raise ValueError(f"backend {backend.name} cannot generate (generation mode)")
        for load in loads:
            batch = load()
            requests = [generation_request(item, tokenizer, chat, settings) for item in batch]
            generations = backend.generate(requests)
            if len(generations) != len(requests):
                raise RuntimeError(f"{backend.name} returned {len(generations)} texts for {len(requests)} items")
            yield (
                batch,
                [
                    {"id": item["id"], **provenance, **generated_row(item, request, gen, settings.number_parser)}
                    for item, request, gen in zip(batch, requests, generations, strict=True)
                ],
            )
        return

    def prepare(load: Callable[[], Sequence[Mapping[str, Any]]]) -> tuple[Sequence[Mapping[str, Any]], list[_Prepared]]:
        batch = load()
        digits = cached_digit_start_ids(tokenizer) if any(item.get("task") == "number" for item in batch) else ()
        return batch, [_prepare(item, tokenizer, chat, settings, digits) for item in batch]

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="probes-prepare") as pool:
        pending = iter(loads)
        first = next(pending, None)
        ahead = None if first is None else pool.submit(prepare, first)
        while ahead is not None:
            batch, prepared = ahead.result()
            following = next(pending, None)
            ahead = None if following is None else pool.submit(prepare, following)
            results = backend.score([p.request for p in prepared])
            if len(results) != len(prepared):
                got = f"{len(results)} results for {len(prepared)} requests"
                raise RuntimeError(f"backend {backend.name} returned {got}")
            pairs = zip(prepared, results, strict=True)
            rows = [_scored_row(p, result, settings, provenance) for p, result in pairs]
            check_rows(rows)  # a row breaking the rule (`runners.results.rules`) is never written
            yield batch, rows


def _scored_row(
    prepared: _Prepared, result: ScoreResult, settings: ScoringSettings, provenance: Mapping[str, Any]
) -> dict[str, Any]:
    """A scored item's result row, with its `computed_tokens` (not a result column: the session sums it)."""
    row = {"id": prepared.item["id"], **provenance, **_row(prepared, result, settings)}
    return {**row, "computed_tokens": result.computed_tokens}
