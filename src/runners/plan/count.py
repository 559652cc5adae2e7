"""Counting a config's token positions as a run would compute them, exactly or from sampled calls.

A run sends a config's rows to the backend `items_per_call` at a time, in row order; the hf
backend shares context prefixes within each call, so a call is the unit of counting. A config
with at most `sample_calls` calls is counted exactly, call by call, every item's request built
as the run builds it (`runners.rows.prepare_request`) and counted with the backends' own
accounting (`runners.scoring.token_accounting`). A larger one is estimated in two stages:
`sample_calls` calls drawn at random (seeded), whose context positions are counted exactly;
within each, the continuation positions of number items (their tries: ~200 tokenisations of
the whole prompt each, the costly part) from the tries of `trie_items` of them spread over the
call (`count_call`). Totals are ratio estimates (sampled counts / sampled items x the config's
items), with a standard error from the spread between calls (finite population corrected;
`Tally`). The estimator's error against exact counts is measured by
`benchmarks/plan_accuracy.py`.

A generated config (`count_generation`) is counted over the same calls: its prompts encoded as the
run encodes them, each backend's generation accounting (`BackendSpec.generate_counts`) pricing a
call as prefill positions and decode steps, with answers of a given length distribution (the
`max_new_tokens` ceiling, or a sample's profile).
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from promptgen.core.errors import ProbeError
from runners.backends import backend_spec, priced_backends
from runners.exchange import ScoreRequest
from runners.plan.configs import ConfigRows
from runners.rows import cached_digit_start_ids, prepare_request, render_context
from runners.scoring.distributions import NUMBER_MODES
from runners.scoring.generate_accounting import DecodedLengths, DecodeGroup, DecodeMachine, GenerateCall
from runners.scoring.settings import ScoringSettings
from runners.scoring.token_accounting import SampledCall
from runners.scoring.tokenize import encode_context

#: sampled calls per config when a config has more calls than this (else every call is counted)
DEFAULT_SAMPLE_CALLS = 4
#: number items per sampled call whose trie request is built (the costly part: ~200 tokenisations each)
DEFAULT_TRIE_ITEMS = 16
#: the plan's third number mode: exact with a tolerance (`--number-tolerance`), priced from a node profile
BOUNDED = "bounded"
#: the plan's mode of a generated config (`--scoring generate`, or its protocol's): prompt and decoded tokens
GENERATE = "generate"


@dataclass
class Tally:
    """Sums over counted calls of one (backend, number mode): items and `TokenCounts` fields, with per-call values."""

    items: list[int] = field(default_factory=list)
    values: dict[str, list[float]] = field(default_factory=dict)

    FIELDS: ClassVar[tuple[str, ...]] = (
        "context_tokens",
        "computed_context_tokens",
        "continuation_positions",
        "prefix_trie_minimum",
    )
    #: counted only for some backends: the prompts a served model is sent (`BackendSpec.served`)
    OPTIONAL: ClassVar[tuple[str, ...]] = ("prompts",)

    def add(self, counts: Mapping[str, float]) -> None:
        self.items.append(int(counts["items"]))
        for name in (*self.FIELDS, *(k for k in self.OPTIONAL if k in counts)):
            self.values.setdefault(name, []).append(counts[name])

    def estimate(self, total_items: int, total_calls: int) -> dict[str, Any]:
        """Totals over the config: exact when every call was counted, else the ratio estimator with its error."""
        exact = len(self.items) == total_calls
        x = self.items
        sx = sum(x)
        out: dict[str, Any] = {"items": total_items, "exact": exact, "calls_counted": len(x), "calls": total_calls}
        for name in (*self.FIELDS, *(k for k in self.OPTIONAL if k in self.values)):
            y = self.values.get(name, [0] * len(x))
            sy = sum(y)
            if exact:
                out[name] = sy
                out[f"{name}_se"] = 0.0
                continue
            ratio = sy / sx if sx else 0.0
            out[name] = ratio * total_items
            n = len(x)
            if n > 1:
                mean_x = sx / n
                resid = [yi - ratio * xi for xi, yi in zip(x, y, strict=True)]
                var = sum(r * r for r in resid) / (n - 1)
                fpc = 1 - n / total_calls
                out[f"{name}_se"] = total_items * math.sqrt(max(fpc, 0.0) * var / n) / mean_x
            else:
                out[f"{name}_se"] = math.nan
        n = max(total_items, 1)
        for name in (*self.FIELDS, *self.derive(out)):
            out[f"{name}_per_item"] = out[name] / n
        return out

    def derive(self, out: dict[str, Any]) -> tuple[str, ...]:
        """Add the figures made of the estimated ones to `out`; their names (each gets a per-item figure too)."""
        # the prefix-trie minimum is summed per call: a floor for what a call-by-call scorer computes
        out["shared_prefix_saved"] = out["context_tokens"] - out["computed_context_tokens"]
        out["computed_tokens"] = out["computed_context_tokens"] + out["continuation_positions"]
        return ("shared_prefix_saved", "computed_tokens")


@dataclass
class GenerateTally(Tally):
    """`Tally` of a generated config's calls for one backend: prompt and decoded tokens, and the decode's work."""

    FIELDS: ClassVar[tuple[str, ...]] = ("prompt_tokens", "decoded_tokens")
    #: a backend priced in hours: its prefill positions and decode steps (and their seconds on the GPU);
    #: a served one: the prompts it is sent
    OPTIONAL: ClassVar[tuple[str, ...]] = (
        "computed_prompt_tokens",
        "decode_positions",
        "decode_steps",
        "decode_s",
        "prompts",
    )

    def derive(self, out: dict[str, Any]) -> tuple[str, ...]:
        return tuple(name for name in self.OPTIONAL if name in out)


def run_requests(
    items: Sequence[Mapping[str, Any]],
    tokenizer: Any,
    chat: bool,
    mode: str,
    digits: tuple[int, ...],
    base: ScoringSettings | None = None,
) -> list[ScoreRequest]:
    """The backend requests of `items` as a run in number mode `mode` builds them (`runners.rows.prepare_request`).

    `base`: the run's other scoring settings (its choice mode and tokenization; default the project's).
    A ValueError (e.g. first-token mode on a number without a one-token form) is the run's own error.
    """

    settings = dataclasses.replace(base or ScoringSettings(), number_mode=mode, number_tolerance=0.0)
    return [prepare_request(item, tokenizer, chat, settings, digits) for item in items]


@dataclass(frozen=True)
class PlanSettings:
    """How the planned run would batch its items (the run's own defaults for the target device), and the sample."""

    items_per_call: int
    max_batch_tokens: int
    block_size: int
    sample_calls: int = DEFAULT_SAMPLE_CALLS
    #: number items per sampled call whose full trie request is built (None: all of them)
    trie_items: int | None = DEFAULT_TRIE_ITEMS
    seed: int = 0
    #: the bounded mode's trie positions per number item (a measured profile; None: not priced)
    trie_positions: float | None = None


def context_request(item: Mapping[str, Any], tokenizer: Any, chat: bool, candidates: tuple[int, ...]) -> ScoreRequest:
    """A number item's request without its trie: the context ids a run sends, and `candidates` after them.

    A number item's context is `encode_context` of its rendered text in both modes
    (`runners.scoring.tokenize.number_paths` shares it with every form), so a backend's context
    accounting for it needs no trie; only its continuation positions do.
    """

    return ScoreRequest(encode_context(tokenizer, render_context(tokenizer, item, chat)), (), candidates)


Prepare = Callable[[Sequence[Mapping[str, Any]], str], list[ScoreRequest]]


def count_call(
    items: Sequence[Mapping[str, Any]],
    prepare: Prepare,
    contexts: Callable[[Mapping[str, Any], tuple[int, ...]], ScoreRequest],
    mode: str,
    settings: PlanSettings,
) -> dict[str, dict[str, float]]:
    """One call's counts per backend: context positions exact, number items' continuation positions from a subsample.

    Both backends' accounting (`runners.scoring.token_accounting`) is called on the call's requests as
    the run would send them, with each number item's trie left out; the positions its trie adds
    do not depend on the other requests of the call (hf: one packed row per request, its trie's
    nodes; vLLM: its level prompts after the context blocks the first wave cached, with no reuse
    between prompts of one wave). The tries of `trie_items` number items spread over the call
    are built (`prepare`: the run's own `prepare_request`). hf's trie positions are their
    nodes, so the picked ones scale to the call's number items. vLLM's also depend on the
    context's length (each level prompt recomputes the context's last partial block), so every
    number item is counted with its own context and the nearest picked item's trie.
    """
    bounded = mode == BOUNDED
    if bounded and settings.trie_positions is None:
        raise ValueError("the bounded mode is priced from a node profile (trie_positions)")
    mode = "exact" if bounded else mode  # a bounded run builds the exact requests
    numbers = [k for k, item in enumerate(items) if item.get("task") == "number"]
    want = len(numbers) if settings.trie_items is None else min(settings.trie_items, len(numbers))
    picked = [numbers[(j * len(numbers)) // want] for j in range(want)] if want else []
    full = dict(zip(picked, prepare([items[k] for k in picked], mode), strict=True)) if picked else {}
    others = [k for k in range(len(items)) if k not in set(numbers)]
    full.update(zip(others, prepare([items[k] for k in others], mode), strict=True) if others else {})
    template = next((full[k] for k in picked), None)
    candidates = template.candidates if template else ()
    requests = [full[k] if k not in set(numbers) else contexts(items[k], candidates) for k in range(len(items))]
    out: dict[str, dict[str, float]] = {}
    trie_positions = settings.trie_positions if bounded else None
    call = SampledCall(requests, full, picked, numbers, trie_positions, settings.max_batch_tokens, settings.block_size)
    for name in priced_backends():
        counts, tries = backend_spec(name).function("call_counts")(call)
        out[name] = {
            "items": len(items),
            "context_tokens": counts.context_tokens,
            "computed_context_tokens": counts.computed_context_tokens,
            "continuation_positions": counts.continuation_positions + tries,
            "prefix_trie_minimum": counts.prefix_trie_minimum,
        }
        if backend_spec(name).served:
            out[name]["prompts"] = counts.prompts
    return out


def sample_calls(rows: ConfigRows, settings: PlanSettings) -> tuple[int, list[int], bool]:
    """A config's calls, those counted (all when at most `sample_calls`, else a seeded sample) and whether all are."""
    calls = -(-rows.rows // settings.items_per_call) if rows.rows else 0
    exact = calls <= settings.sample_calls
    chosen = (
        list(range(calls))
        if exact
        else sorted(random.Random(settings.seed).sample(range(calls), settings.sample_calls))
    )
    return calls, chosen, exact


def count_config(
    rows: ConfigRows,
    tokenizer: Any,
    chat: bool,
    settings: PlanSettings,
    *,
    modes: Sequence[str] = NUMBER_MODES,
    prepare: Prepare | None = None,
    on_call: Callable[[int, int], None] | None = None,
    base: ScoringSettings | None = None,
) -> dict[str, Any]:
    """Token counts of one config for every (backend, number mode): exact, or estimated from sampled calls.

    `base`: the run's scoring settings besides the number mode (its choice mode, tokenization).
    """

    calls, chosen, exact = sample_calls(rows, settings)
    if exact:  # every call counted: every trie too, so the counts are exact
        settings = dataclasses.replace(settings, trie_items=None)
    tallies = {(b, m): Tally() for b in priced_backends() for m in modes}
    digits = cached_digit_start_ids(tokenizer)  # once per tokenizer object (a run does the same)
    unavailable: dict[str, str] = {}

    def run_prepare(batch: Sequence[Mapping[str, Any]], mode: str) -> list[ScoreRequest]:
        if prepare is not None:
            return prepare(batch, mode)
        return run_requests(batch, tokenizer, chat, mode, digits, base)

    def contexts(item: Mapping[str, Any], candidates: tuple[int, ...]) -> ScoreRequest:
        return context_request(item, tokenizer, chat, candidates or digits)

    for done, call in enumerate(chosen):
        items = rows.read(call * settings.items_per_call, min(rows.rows, (call + 1) * settings.items_per_call))
        for mode in modes:
            if mode in unavailable:
                continue
            try:
                counted = count_call(items, run_prepare, contexts, mode, settings)
            except ValueError as exc:
                if mode != "first-token":
                    raise ProbeError(str(exc)) from None
                unavailable[mode] = str(exc)  # e.g. first-token mode on a digit-by-digit tokenizer
                continue
            for backend in priced_backends():
                tallies[(backend, mode)].add(counted[backend])
        if on_call:
            on_call(done + 1, len(chosen))
    out: dict[str, Any] = {"items": rows.rows, "calls": calls, "sampled_calls": None if exact else chosen}
    out["trie_items_per_call"] = settings.trie_items
    if BOUNDED in modes:
        out["trie_positions_per_item"] = settings.trie_positions
    for (backend, mode), tally in tallies.items():
        if mode in unavailable:
            out.setdefault(backend, {})[mode] = {"items": rows.rows, "unavailable": unavailable[mode]}
        else:
            out.setdefault(backend, {})[mode] = tally.estimate(rows.rows, calls)
    return out


def count_generation(
    rows: ConfigRows,
    tokenizer: Any,
    chat: bool,
    settings: PlanSettings,
    generation: ScoringSettings,
    lengths: DecodedLengths,
    *,
    machine: DecodeMachine | None = None,
    price: Callable[[Sequence[DecodeGroup]], float] | None = None,
    on_call: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Token counts of a generated config for every backend (mode `GENERATE`): exact, or estimated from sampled calls.

    Each counted call's prompts are encoded as the run encodes them (`runners.rows.generation_request`:
    `render_context`, `encode_context`), and each backend's generation accounting (`BackendSpec.generate_counts`)
    prices the call with answers of `lengths` tokens; `price` turns its decode steps into seconds (the
    plan's GPU: `pricing.decode_seconds`). A served backend is counted by tokens and prompts.
    """
    calls, chosen, exact = sample_calls(rows, settings)
    tallies = {backend: GenerateTally() for backend in priced_backends()}
    unavailable: dict[str, str] = {}
    for done, call in enumerate(chosen):
        items = rows.read(call * settings.items_per_call, min(rows.rows, (call + 1) * settings.items_per_call))
        contexts = [encode_context(tokenizer, render_context(tokenizer, item, chat)) for item in items]
        request = GenerateCall(
            contexts,
            generation.max_new_tokens,
            lengths,
            max_batch_tokens=settings.max_batch_tokens,
            block_size=settings.block_size,
            machine=machine,
            sampled=generation.temperature > 0,
        )
        for backend in priced_backends():
            spec = backend_spec(backend)
            prompt = float(sum(len(c) for c in contexts))
            if spec.served:  # its time is its server's: the tokens and prompts it is sent
                counts = {"items": len(items), "prompt_tokens": prompt, "decoded_tokens": len(items) * lengths.mean}
                tallies[backend].add({**counts, "prompts": len(items)})
                continue
            if spec.generate_counts is None:
                unavailable[backend] = f"--backend {backend} declares no generation accounting"
                continue
            got = spec.function("generate_counts")(request)
            counted = {
                "items": got.items,
                "prompt_tokens": got.prompt_tokens,
                "decoded_tokens": got.decoded_tokens,
                "computed_prompt_tokens": got.computed_prompt_tokens,
                "decode_positions": got.decode_positions,
                "decode_steps": got.decode_steps,
            }
            if price is not None:
                counted["decode_s"] = price(got.groups)
            tallies[backend].add(counted)
        if on_call:
            on_call(done + 1, len(chosen))
    out: dict[str, Any] = {"items": rows.rows, "calls": calls, "sampled_calls": None if exact else chosen}
    for backend, tally in tallies.items():
        if backend in unavailable:
            out[backend] = {GENERATE: {"items": rows.rows, "unavailable": unavailable[backend]}}
        else:
            out[backend] = {GENERATE: tally.estimate(rows.rows, calls)}
    return out
