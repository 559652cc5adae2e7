"""vLLM's generation outputs as the contract's `Generation`s: text and tokens without the token it stopped on.

vLLM keeps the token a generation stopped on (EOS, or one of `stop_token_ids`) in `token_ids` and,
when it is no special token, in the text. `runners.exchange.GenerateRequest.stop_token_ids` says
they are not part of the text, and the hf backend leaves them out of both; so does this, and the
backend contract suite (`tests/runners/backends/test_backend_contract.py`) checks the two against
argmax decoding by full forward passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runners.exchange import GenerateRequest, Generation


def generations_of(requests: Sequence[GenerateRequest], outputs: Sequence[Any], tokenizer: Any) -> list[Generation]:
    """One `Generation` per request from `LLM.generate`'s outputs (in request order) and vLLM's tokenizer."""
    if len(outputs) != len(requests):
        raise RuntimeError(f"vLLM returned {len(outputs)} generations for {len(requests)} requests")
    special = set(getattr(tokenizer, "all_special_ids", ()) or ())
    eos = getattr(tokenizer, "eos_token_id", None)
    generations = []
    for request, out in zip(requests, outputs, strict=True):
        completion = out.outputs[0]
        ids, text = list(completion.token_ids), completion.text
        reason = "length" if completion.finish_reason == "length" else "stop"
        if reason == "stop" and ids and ids[-1] in ended_on(completion.stop_reason, eos, request.stop_token_ids):
            last = ids.pop()
            if last not in special:  # a special token was never in the text (`skip_special_tokens`)
                text = tokenizer.decode(ids, skip_special_tokens=True)
        generations.append(Generation(text, tuple(ids), reason))
    return generations


def ended_on(stop_reason: int | str | None, eos: int | None, stop_ids: Sequence[int]) -> set[int | None]:
    """The token a generation vLLM stopped may end on: the stop id it names, else (None) EOS or a stop id;
    none after a stop string (kept in the text, as `include_stop_str_in_output` asks)."""
    if isinstance(stop_reason, str):
        return set()
    return {stop_reason} if stop_reason is not None else {eos, *stop_ids}
