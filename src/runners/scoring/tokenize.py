"""The one place where text becomes token ids (docs/DESIGN.md section 6).

Every backend receives token ids made here, so all backends score exactly the same tokens.

The split rule. A (context, continuation) pair is encoded as ONE string, `context +
continuation`, and the token list is cut at the character boundary `len(context)` using the
fast tokenizer's offsets:

- a token that ends at or before the boundary belongs to the context;
- every token from the first one that ends after the boundary on belongs to the continuation.

So leading whitespace of the continuation belongs to the continuation, and a token that
straddles the boundary (for example `"Hello "` + `"world"`, tokenised `Hello`, ` world`)
belongs to the continuation: the continuation's log-probability then also covers the
context characters inside that token, and its context ids are shorter than those of the
context alone. `Encoded.straddles` records that this happened. Encoding the two halves
separately instead would score token sequences the model never sees in running text.

The BOS policy. Text is always encoded with `add_special_tokens=False`; then the ids the
tokenizer itself puts before any text (`bos_ids`: `[<s>]` for Llama-2/3, nothing for
SmolLM2 or GPT-2) are prepended unless the ids already start with them. A chat template
that writes the BOS text itself (Llama-3's `<|begin_of_text|>`) therefore yields exactly
one BOS, never two; a plain prompt gets the BOS the model was trained with; and tokenizers
that add none get none. End-of-sequence ids the tokenizer may append are never added: the
scored text continues after the continuation.
"""

from __future__ import annotations

import contextlib
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Tokenizer = Any  # a transformers fast tokenizer; not imported here so `import runners` needs no transformers


@dataclass(frozen=True)
class Encoded:
    """Token ids of one (context, continuation) pair, split by the rule in the module docstring."""

    context_ids: tuple[int, ...]
    continuation_ids: tuple[int, ...]
    #: the boundary fell inside a token, which went to the continuation
    straddles: bool


#: `bos_ids` per tokenizer object: a number item encodes ~200 texts, and asking the tokenizer
#: twice per text cost more than the encoding itself (the policy is fixed once it is loaded)
_BOS: weakref.WeakKeyDictionary[Any, tuple[int, ...]] = weakref.WeakKeyDictionary()


def bos_ids(tokenizer: Tokenizer) -> tuple[int, ...]:
    """The special ids the tokenizer adds before any text when asked to (its own BOS policy)."""
    try:
        return _BOS[tokenizer]
    except (KeyError, TypeError):  # TypeError: an object that takes no weak reference
        pass
    found = _find_bos(tokenizer)
    with contextlib.suppress(TypeError):
        _BOS[tokenizer] = found
    return found


def _find_bos(tokenizer: Tokenizer) -> tuple[int, ...]:
    plain = list(tokenizer("x", add_special_tokens=False)["input_ids"])
    full = list(tokenizer("x", add_special_tokens=True)["input_ids"])
    for start in range(len(full) - len(plain) + 1):
        if full[start : start + len(plain)] == plain:
            return tuple(full[:start])
    raise ValueError(f"cannot find the plain encoding {plain} inside the special-token encoding {full}")


def _with_bos(tokenizer: Tokenizer, ids: list[int]) -> list[int]:
    prefix = list(bos_ids(tokenizer))
    if prefix and ids[: len(prefix)] != prefix:
        return prefix + ids
    return ids


def _encode_with_offsets(tokenizer: Tokenizer, texts: list[str]) -> list[tuple[list[int], list[tuple[int, int]]]]:
    """(ids, character offsets) of each text, from one batched call (no padding: each text as if alone)."""
    if not getattr(tokenizer, "is_fast", False):
        raise TypeError(
            f"{type(tokenizer).__name__} is not a fast tokenizer; the context/continuation split needs offsets"
        )
    encoding = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    return [
        (list(ids), [tuple(pair) for pair in offsets])
        for ids, offsets in zip(encoding["input_ids"], encoding["offset_mapping"], strict=True)
    ]


def encode_context(tokenizer: Tokenizer, context: str) -> tuple[int, ...]:
    """Ids of a context scored on its own (its next-token distribution), BOS policy applied."""
    ids = _with_bos(tokenizer, list(tokenizer(context, add_special_tokens=False)["input_ids"]))
    if not ids:
        raise ValueError("empty context: there is nothing to condition the first token on")
    return tuple(ids)


def encode_pair(tokenizer: Tokenizer, context: str, continuation: str) -> Encoded:
    """Encode `context + continuation` once and split it at `len(context)` (see module docstring)."""
    return encode_pairs(tokenizer, context, [continuation])[0]


def encode_pairs(tokenizer: Tokenizer, context: str, continuations: Sequence[str]) -> list[Encoded]:
    """`encode_pair` of each continuation after one context, with one batched tokenizer call.

    A 0-100 item has ~200 surface forms; one call per form spent more time in Python than
    in the tokenizer. The ids are those of separate calls: the batch is not padded.
    """
    if not all(continuations):
        raise ValueError("empty continuation")
    encoded = _encode_with_offsets(tokenizer, [context + text for text in continuations])
    pairs = zip(continuations, encoded, strict=True)
    return [_split(tokenizer, context, text, ids, offsets) for text, (ids, offsets) in pairs]


def _split(
    tokenizer: Tokenizer, context: str, continuation: str, ids: list[int], offsets: list[tuple[int, int]]
) -> Encoded:
    boundary = len(context)
    cut = next((i for i, (_, end) in enumerate(offsets) if end > boundary), len(ids))
    if cut == len(ids):
        raise ValueError(f"no token of {context + continuation!r} lies after the context boundary {boundary}")
    straddles = offsets[cut][0] < boundary
    head = _with_bos(tokenizer, ids[:cut])
    if not head:
        raise ValueError("empty context: there is nothing to condition the first continuation token on")
    return Encoded(tuple(head), tuple(ids[cut:]), straddles)


def encode_continuations(
    tokenizer: Tokenizer, context: str, continuations: Sequence[str]
) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """(shared context ids, continuation ids) for several continuations of one context.

    Backends reuse one forward pass of the context for all its continuations, so they need
    one context. When a continuation straddles the boundary (its first token also holds the
    end of the context, e.g. a prompt ending in a blank line before `True`), the shared
    context is cut back to the longest token prefix that every `context + continuation`
    encoding starts with, and each continuation gets the rest of its own encoding. Every
    option is then scored on exactly the tokens of its full text (the straddle rule of the
    module docstring, applied to all options alike), and all options cover the same context
    characters, so their log-probabilities stay comparable.
    """
    encoded = encode_pairs(tokenizer, context, continuations)
    shared = encode_context(tokenizer, context)
    if all(enc.context_ids == shared for enc in encoded):
        return shared, [enc.continuation_ids for enc in encoded]
    full = [enc.context_ids + enc.continuation_ids for enc in encoded]
    n = min(len(enc.context_ids) for enc in encoded)
    while n > 0 and any(f[:n] != full[0][:n] for f in full):
        n -= 1
    if n == 0:
        raise ValueError(f"the continuations {list(continuations)!r} share no context token")
    return full[0][:n], [f[n:] for f in full]


def encode_separately(
    tokenizer: Tokenizer, context: str, continuations: Sequence[str]
) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """(context ids, continuation ids) with each text encoded on its own: the "separate" tokenization.

    The context gets the tokenizer's BOS policy (`encode_context`); each continuation is
    encoded alone with no special tokens, so a SentencePiece tokenizer gives it its word-start
    `▁` and a BPE tokenizer keeps a token such as `>The` whole in the context. This is how cappr
    (the Talent-or-Luck release's scorer, `end_of_prompt=""`) tokenises a prompt and its
    completions: the model is scored on ids it might not produce for the running text, which is
    the release's choice, kept for its configs (the joint split is the project's default).
    """
    shared = encode_context(tokenizer, context)
    conts = [tuple(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in continuations]
    empty = [text for text, ids in zip(continuations, conts, strict=True) if not ids]
    if empty:
        raise ValueError(f"continuation(s) {empty!r} encode to no token")
    return shared, conts


def render_chat(tokenizer: Tokenizer, messages: Sequence[Mapping[str, str]]) -> str:
    """The chat-template text up to the start of the assistant's answer.

    The text is then encoded like any context (`add_special_tokens=False` + BOS policy), so a
    template that already writes the BOS token does not get a second one.
    """
    if not getattr(tokenizer, "chat_template", None):
        raise ValueError(f"{getattr(tokenizer, 'name_or_path', 'tokenizer')} has no chat template")
    text = tokenizer.apply_chat_template(
        [dict(message) for message in messages], add_generation_prompt=True, tokenize=False
    )
    if not isinstance(text, str):
        raise TypeError(f"apply_chat_template returned {type(text).__name__}, expected str")
    return text


#: the Llama-3 end-of-turn token the empathy authors stop at besides EOS (`batch_pred_emotion.py`)
EOT_TOKEN = "<|eot_id|>"
_TURN_MARK = "\u2063turn-end-probe\u2063"


_END_OF_TURN: weakref.WeakKeyDictionary[Any, tuple[int, ...]] = weakref.WeakKeyDictionary()


def end_of_turn_ids(tokenizer: Tokenizer) -> tuple[int, ...]:
    """`find_end_of_turn_ids`, once per tokenizer object (it renders a template and reads the vocabulary)."""
    try:
        return _END_OF_TURN[tokenizer]
    except (KeyError, TypeError):
        pass
    ids = find_end_of_turn_ids(tokenizer)
    with contextlib.suppress(TypeError):  # an object that takes no weak reference is computed each time
        _END_OF_TURN[tokenizer] = ids
    return ids


def find_end_of_turn_ids(tokenizer: Tokenizer) -> tuple[int, ...]:
    """The token ids that end a model's answer: EOS, `<|eot_id|>` where the vocabulary has it, and
    the special token the chat template writes right after an assistant message (`<|im_end|>`,
    `<end_of_turn>`, `<|eot_id|>`, ...).

    Greedy generation stops at the first of them, as the empathy authors' did (vLLM with
    `stop_token_ids=[eos, <|eot_id|>]`); a model whose generation config names no end-of-turn token
    would otherwise run on into a next turn. The template's token is found by rendering a one-turn
    conversation with a marker as the answer and reading the first token after the marker.
    """
    ids: list[int] = []
    eos = getattr(tokenizer, "eos_token_id", None)
    if isinstance(eos, int):
        ids.append(eos)
    vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
    if EOT_TOKEN in vocab:
        ids.append(int(vocab[EOT_TOKEN]))
    if getattr(tokenizer, "chat_template", None):
        try:
            text = tokenizer.apply_chat_template(
                [{"role": "user", "content": "x"}, {"role": "assistant", "content": _TURN_MARK}], tokenize=False
            )
        except Exception:
            text = ""
        if isinstance(text, str) and _TURN_MARK in text:
            after = text.split(_TURN_MARK, 1)[1]
            following = tokenizer(after, add_special_tokens=False)["input_ids"] if after else []
            special = set(getattr(tokenizer, "all_special_ids", ()) or ())
            special |= {int(i) for i in getattr(tokenizer, "added_tokens_decoder", {}) or {}}
            if following and following[0] in special:
                ids.append(int(following[0]))
    return tuple(dict.fromkeys(ids))


def label_token_ids(
    tokenizer: Tokenizer, context: str, labels: Sequence[str], prefixes: Sequence[str] = ("", " ")
) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """(context ids, single-token ids per label) for letter-mode scoring.

    Each label is tried as `prefix + label` for every prefix (with and without a leading
    space); a form that is one token after the context counts, others are dropped. A label
    with no single-token form is an error: its probability cannot be read from one
    next-token distribution. Two labels sharing a token id is an error too.
    """
    shared = encode_context(tokenizer, context)
    per_label: list[tuple[int, ...]] = []
    encoded = iter(encode_pairs(tokenizer, context, [prefix + label for label in labels for prefix in prefixes]))
    for label in labels:
        ids: list[int] = []
        for _ in prefixes:
            enc = next(encoded)
            if enc.context_ids == shared and len(enc.continuation_ids) == 1 and enc.continuation_ids[0] not in ids:
                ids.append(enc.continuation_ids[0])
        if not ids:
            raise ValueError(f"label {label!r} is not a single token after the context in any of the forms {prefixes}")
        per_label.append(tuple(ids))
    flat = [i for ids in per_label for i in ids]
    if len(flat) != len(set(flat)):
        raise ValueError(f"labels {list(labels)} share token ids: {per_label}")
    return shared, per_label


def number_paths(
    tokenizer: Tokenizer, context: str, lo: int, hi: int, prefixes: Sequence[str] = ("", " ")
) -> tuple[tuple[int, ...], dict[int, list[tuple[int, ...]]]]:
    """(context ids, {n: token paths}) for every integer n in lo..hi and every surface form.

    A surface form is `prefix + str(n)` tokenised as a continuation of the context (so a
    digit-by-digit tokenizer gives one token per digit, Llama-3 one token per number). A form
    whose first token would merge with the end of the context cannot follow the shared
    context's ids and is left out (its mass then counts as invalid); a number left with no
    form at all is an error.

    The paths are those of encoding each `context + form` whole (`_whole_number_paths`), but
    that costs ~200 encodings of the whole context per item. A form can only change the
    tokens at the very end of the context, so the forms are encoded after the context's last
    few tokens only (`_TAIL_LADDER`) and the context is encoded once. How few is found per
    tokenizer and context ending: the first time an ending is seen, the whole strings are
    encoded (the definition) and the shortest tail whose paths equal them is kept for every
    context that ends in the same characters. An empathy config's items differ in narrative
    and emotion but end in the same question (or chat turn), so one encoding of the forms
    serves the whole config, whatever its order. A tail that does not reproduce the whole
    strings is never used; a context no tail serves is encoded whole.
    """
    if lo > hi:
        raise ValueError(f"empty number range {lo}..{hi}")
    ids, offsets = _encode_with_offsets(tokenizer, [context])[0]
    shared = tuple(_with_bos(tokenizer, ids))
    if not shared:
        raise ValueError("empty context: there is nothing to condition the first token on")
    cache = _tail_cache(tokenizer)
    unseen: list[tuple[tuple, int]] = []
    for size in _TAIL_LADDER:
        cut = len(ids) - size
        if cut <= _MARGIN_TOKENS or offsets[cut - 1][1] > offsets[cut][0]:
            continue  # too short a context, or no token boundary there
        start, boundary = offsets[cut - _MARGIN_TOKENS][0], offsets[cut][0]
        key = (context[start:], boundary - start, lo, hi, tuple(prefixes))
        if key not in cache:
            unseen.append((key, cut))
            continue
        cache.move_to_end(key)
        found = cache[key]
        if found is not None and found.context_tail == tuple(ids[cut:]):
            return shared, {n: list(forms) for n, forms in found.paths.items()}
    whole = _whole_number_paths(tokenizer, context, shared, lo, hi, prefixes)
    for key, cut in unseen:
        window, aligned = key[0], key[1]
        found = _compute_tail_paths(tokenizer, window, aligned, lo, hi, tuple(prefixes))
        serves = (
            found is not None
            and found.context_tail == tuple(ids[cut:])
            and {n: list(forms) for n, forms in found.paths.items()} == whole
        )
        cache[key] = found if serves else None
        if len(cache) > _TAIL_CACHE_SIZE:
            cache.popitem(last=False)
        if serves:
            break
    return shared, whole


def _whole_number_paths(
    tokenizer: Tokenizer, context: str, shared: tuple[int, ...], lo: int, hi: int, prefixes: Sequence[str]
) -> dict[int, list[tuple[int, ...]]]:
    """`number_paths` by encoding every `context + form` whole (the definition; the fallback)."""
    paths: dict[int, list[tuple[int, ...]]] = {}
    texts = [prefix + str(n) for n in range(lo, hi + 1) for prefix in prefixes]
    encoded = iter(encode_pairs(tokenizer, context, texts))
    for n in range(lo, hi + 1):
        forms: list[tuple[int, ...]] = []
        for _ in prefixes:
            enc = next(encoded)
            if enc.context_ids == shared and enc.continuation_ids not in forms:
                forms.append(enc.continuation_ids)
        if not forms:
            raise ValueError(_no_form(n, prefixes))
        paths[n] = forms
    return paths


def _no_form(n: int, prefixes: Sequence[str]) -> str:
    return f"no form of {n} in {list(prefixes)} follows the context without merging into it"


#: the context's last tokens that the forms are encoded after, tried shortest first (`number_paths`):
#: the shortest that reproduces the whole strings on an ending serves every context with that ending
_TAIL_LADDER = (1, 2, 4, 8, 24)
#: tokens before the tail that are encoded too and then dropped: the start of a text can encode
#: differently from the same characters inside it (SentencePiece's prepended `▁`)
_MARGIN_TOKENS = 8
#: endings kept per tokenizer, with those found too short (a config has one or a few; a sweep walks configs in turn)
_TAIL_CACHE_SIZE = 256


@dataclass(frozen=True)
class _TailPaths:
    """The forms' paths after one context ending: what `number_paths` returns, for every context ending in it."""

    #: the tail's own ids as encoded inside the window: a context whose last tokens differ is not served
    context_tail: tuple[int, ...]
    paths: dict[int, tuple[tuple[int, ...], ...]]


#: per tokenizer: (window, aligned, lo, hi, prefixes) -> the paths after it, or None where that tail is too short
_TAILS: weakref.WeakKeyDictionary[Any, OrderedDict[tuple, _TailPaths | None]] = weakref.WeakKeyDictionary()


def _tail_cache(tokenizer: Tokenizer) -> OrderedDict[tuple, _TailPaths | None]:
    """The tokenizer's endings (an object that takes no weak reference gets a fresh, unkept one)."""
    try:
        return _TAILS.setdefault(tokenizer, OrderedDict())
    except TypeError:
        return OrderedDict()


def _compute_tail_paths(
    tokenizer: Tokenizer, window: str, aligned: int, lo: int, hi: int, prefixes: tuple[str, ...]
) -> _TailPaths | None:
    texts = [window] + [window + prefix + str(n) for n in range(lo, hi + 1) for prefix in prefixes]
    encoded = _encode_with_offsets(tokenizer, texts)
    found = [_from_boundary(ids, offsets, aligned) for ids, offsets in encoded]
    kept = [k for k in found if k is not None]
    if len(kept) != len(found):
        return None
    (tail, _), *forms_kept = kept
    boundary = len(window) - aligned  # the context's end, in the kept part's characters
    paths: dict[int, tuple[tuple[int, ...], ...]] = {}
    forms_iter = iter(forms_kept)
    for n in range(lo, hi + 1):
        forms: list[tuple[int, ...]] = []
        for _ in prefixes:
            ids, offsets = next(forms_iter)
            cut = next((i for i, (_, end) in enumerate(offsets) if end > boundary), len(ids))
            if cut == len(ids):
                return None  # no token after the context: the whole encoding raises its own error
            if ids[:cut] == tail and ids[cut:] not in forms:
                forms.append(ids[cut:])
        if not forms:
            return None  # the whole strings raise their own error
        paths[n] = tuple(forms)
    return _TailPaths(tail, paths)


def _from_boundary(
    ids: list[int], offsets: list[tuple[int, int]], aligned: int
) -> tuple[tuple[int, ...], list[tuple[int, int]]] | None:
    """The ids from the token that starts at character `aligned` on, offsets made relative to it; None
    when no token starts there or one before it reaches past it."""
    first = next((i for i, (start, _) in enumerate(offsets) if start >= aligned), None)
    if first is None or offsets[first][0] != aligned or (first and offsets[first - 1][1] > aligned):
        return None
    return tuple(ids[first:]), [(start - aligned, end - aligned) for start, end in offsets[first:]]


def digit_start_ids(tokenizer: Tokenizer) -> tuple[int, ...]:
    """Ids of the tokens whose text, written after a number, starts with an ASCII digit.

    These are the tokens that continue a number; any other token ends it. The text of a token
    is measured after an anchor token, so SentencePiece's `▁5` (text ` 5`) does not count.
    """
    anchor = list(tokenizer("1", add_special_tokens=False)["input_ids"])
    base = tokenizer.decode(anchor, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    size = len(tokenizer)
    texts = tokenizer.batch_decode(
        [[*anchor, i] for i in range(size)], skip_special_tokens=False, clean_up_tokenization_spaces=False
    )
    found = []
    for i, text in enumerate(texts):
        if not text.startswith(base):
            raise ValueError(f"decoding token {i} after {base!r} changed the anchor: {text!r}")
        rest = text[len(base) :]
        if rest[:1].isascii() and rest[:1].isdigit():
            found.append(i)
    return tuple(found)
