"""Generation mode of the hf backend: token ids in, text out, with every sampling setting stated.

Greedy requests run in left-padded batches under the token budget; a sampled request runs
alone, seeded, so its text depends on its seed only. The `GenerationConfig` states every field
that changes the output, so no model's own generation config leaks in (docs/DESIGN.md section 6).

torch and transformers are imported inside functions, so `import runners` works without the
`hf` extra.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runners.backends.hf.accounting import generate_batches
from runners.exchange import GenerateRequest, Generation, cut_at_stop


def generate(
    model: Any, tokenizer: Any, requests: Sequence[GenerateRequest], max_batch_tokens: int
) -> list[Generation]:
    """Greedy requests in left-padded batches (under the token budget); sampled ones one at a time.

    A batch shares one generation config, so greedy requests are grouped by `max_tokens`
    and stop strings. Sampling draws from torch's global generator, seeded per request, so
    a sampled request runs alone: its text then depends on its seed only, not its batch.
    """
    import torch

    eos = model.generation_config.eos_token_id
    if eos is None:
        eos = tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    # left padding is masked out, so any id will do when the tokenizer names none
    pad = 0 if pad is None else pad if isinstance(pad, int) else pad[0]
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(requests):
        key = ("greedy", r.max_tokens, r.stop, r.stop_token_ids)
        groups.setdefault(("sampled", i) if r.temperature > 0 else key, []).append(i)
    out: list[Generation | None] = [None] * len(requests)
    with torch.inference_mode():
        for members in groups.values():
            # the batching `probes plan` prices generation with (`accounting.hf_generate_counts`)
            lengths = [len(requests[i].context) for i in members]
            for cut in generate_batches(lengths, requests[members[0]].max_tokens, max_batch_tokens):
                chunk = [members[j] for j in cut]
                batch = [requests[i] for i in chunk]
                for i, gen in zip(chunk, _generate_batch(model, tokenizer, batch, eos, pad), strict=True):
                    out[i] = gen
    return [g for g in out if g is not None]


def _stop_ids(eos: Any, extra: Sequence[int]) -> Any:
    """The model's EOS id(s) and the request's end-of-turn ids, as `GenerationConfig.eos_token_id` takes them."""
    if not extra:
        return eos
    base = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
    return list(dict.fromkeys([*base, *extra]))


def _generate_batch(
    model: Any, tokenizer: Any, requests: list[GenerateRequest], eos: Any, pad: int
) -> list[Generation]:
    """One `model.generate` call over requests that share every sampling setting, left-padded."""
    import torch
    from transformers import GenerationConfig

    r = requests[0]
    sampled = r.temperature > 0
    stop_ids = _stop_ids(eos, r.stop_token_ids)
    # every field that changes the output is stated: None would inherit the model's config
    config = GenerationConfig(
        max_new_tokens=r.max_tokens,
        min_new_tokens=0,
        do_sample=sampled,
        temperature=r.temperature if sampled else 1.0,
        top_p=r.top_p if sampled else 1.0,
        top_k=0,
        min_p=None,
        num_beams=1,
        repetition_penalty=1.0,
        no_repeat_ngram_size=0,
        eos_token_id=stop_ids,
        pad_token_id=pad,
        stop_strings=list(r.stop) or None,
    )
    if sampled and r.seed is not None:
        torch.manual_seed(r.seed)
    width = max(len(q.context) for q in requests)
    ids = torch.full((len(requests), width), pad, dtype=torch.long)
    mask = torch.zeros((len(requests), width), dtype=torch.long)
    for b, q in enumerate(requests):
        ids[b, width - len(q.context) :] = torch.tensor(q.context)
        mask[b, width - len(q.context) :] = 1
    device = model.device
    rows = model.generate(
        input_ids=ids.to(device),
        attention_mask=mask.to(device),
        generation_config=config,
        tokenizer=tokenizer,
    )[:, width:].tolist()
    del ids, mask
    # a row ends at the model's EOS or at the request's end-of-turn ids (Llama-3's <|eot_id|>),
    # the ids `generate` stopped on, so the row is cut and marked "stop" at either
    eos_ids = {stop_ids} if isinstance(stop_ids, int) else set(stop_ids or ())
    generations = []
    for q, new in zip(requests, rows, strict=True):
        # a row that finished early is filled with `pad` up to the longest row: cut it where it ended
        end = next((k for k, t in enumerate(new) if t in eos_ids), None)
        if end is not None:
            new = new[: end + 1]
        else:
            while len(requests) > 1 and new and new[-1] == pad:
                new.pop()
        ended = bool(new) and new[-1] in eos_ids
        if ended:
            new = new[:-1]
        text, stopped = cut_at_stop(tokenizer.decode(new, skip_special_tokens=True), q.stop)
        generations.append(Generation(text, tuple(new), "stop" if (ended or stopped) else "length"))
    return generations
