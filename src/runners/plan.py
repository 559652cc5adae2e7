"""`probes plan`: what a sweep will cost, priced without running the model (issue 19, item 4).

A plan needs only the model's tokenizer and `config.json`. For every config of a prompt
dataset it builds the backend requests exactly as a run does (`runners.rows.prepare_request`),
counts the token positions each backend would compute with the backends' own accounting
(`runners.token_accounting`: the functions the hf backend plans its passes with, not a copy),
and turns them into FLOPs and hours:

- **FLOPs** = 2 x parameters x computed tokens (the convention of DESIGN section 8b and
  `benchmarks/gpu_scoring.py`: every parameter, embeddings included) + attention, 4 x layers x
  (heads x head size) x keys per computed position (QK^T and AV), with keys taken as the mean
  context length + 1 (an upper bound for context positions; the probes' prompts are short, so
  the term is below 1% of the total for an 8B model). Parameters are counted from the
  `config.json` shape (`count_params`).
- **hours** = FLOPs / (the GPU's dense bf16 peak x MFU), or computed tokens / a measured
  tokens/s (`tokens_per_s`, e.g. the CPU's, to check a prediction against a run).

Both backends (`hf`, `vllm`) and both number modes (`exact`: the digit trie; `first-token`:
the next-token distribution after the context, only where every number in range is one token)
are priced, with the prefix-trie minimum (every distinct context prefix once) beside what the
backend computes.

Counting. A run sends a config's rows to the backend `items_per_call` at a time, in row order;
the hf backend shares context prefixes within each call, so a call is the unit of counting.
A config with at most `sample_calls` calls is counted exactly, call by call, every item's
request built as the run builds it. A larger one (the full empathy sweep has 1.78 M rows per
config) is estimated in two stages: `sample_calls` calls drawn at random (seeded), whose
context positions are counted exactly (every item's context ids, the backends' accounting of
the whole call); within each, the continuation positions of number items (their tries: ~200
tokenisations of the whole prompt each, the costly part) from the tries of `trie_items` of them
spread over the call (`count_call`). Totals are ratio estimates (sampled counts / sampled items x the
config's items), with a standard error from the spread between calls (finite population
corrected). The error of this estimator against exact counts is measured by
`benchmarks/plan_accuracy.py`. Only the sampled rows are read (their parquet row groups), so
memory stays that of one row group plus one call.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promptgen.core.contract import check_column_types, check_number_ranges
from promptgen.core.errors import ProbeError
from promptgen.core.files import atomic_write_text, writing
from promptgen.core.outputs import Output, Reference, check_output
from promptgen.hub.read import parquet_errors

from .backend import BACKENDS, ScoreRequest
from .distributions import NUMBER_MODES

#: sampled calls per config when a config has more calls than this (else every call is counted)
DEFAULT_SAMPLE_CALLS = 4
#: number items per sampled call whose trie request is built (the costly part: ~200 tokenisations each)
DEFAULT_TRIE_ITEMS = 16
DEFAULT_MFU = 0.5


@dataclass(frozen=True)
class GPU:
    """A GPU a plan can price: its dense bf16 tensor peak and its memory."""

    name: str
    #: dense (no structured sparsity) bf16 tensor-core peak, TFLOP/s, from NVIDIA's datasheets
    bf16_tflops: float
    memory_gib: float


#: the GPUs `--gpu` names. Peaks are NVIDIA's published dense bf16 figures (the datasheets
#: print twice these "with sparsity"): H100 SXM5 989.4 (1,979 sparse); H200 SXM the same
#: compute as H100 SXM (989.4); A100 SXM4 80GB 312; RTX A6000 154.8 (309.7 sparse);
#: L40S 362.05 (733 sparse).
GPUS: dict[str, GPU] = {
    "h100": GPU("NVIDIA H100 SXM5 80GB", 989.4, 80),
    "h200": GPU("NVIDIA H200 SXM 141GB", 989.4, 141),
    "a100": GPU("NVIDIA A100 SXM4 80GB", 312.0, 80),
    "a6000": GPU("NVIDIA RTX A6000 48GB", 154.8, 48),
    "l40s": GPU("NVIDIA L40S 48GB", 362.05, 48),
}


# ----------------------------------------------------------------------------- model shape


@dataclass(frozen=True)
class ModelShape:
    """What the FLOPs need from `config.json`."""

    params: int
    embedding_params: int
    layers: int
    #: heads x head size: the width of the attention products
    attention_width: int
    vocab_size: int
    model_type: str


def _get(config: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    if default is not None:
        return default
    raise ProbeError(f"config.json has none of {', '.join(keys)}: cannot count the model's parameters")


def count_params(config: Mapping[str, Any]) -> ModelShape:
    """The parameter count of a decoder from its `config.json` (a nested `text_config` counts too).

    Two shapes are known. GPT-2 (`model_type` gpt2): learned positions, biased projections,
    LayerNorm with bias, a 4x MLP, tied head. Every other decoder is read as Llama-shaped
    (Llama, Mistral, Qwen2/3 and their kin): RMSNorm, a gated MLP (gate, up, down), grouped
    key/value heads, rotary positions, an untied head unless `tie_word_embeddings`; Qwen2 adds
    q/k/v biases (as `attention_bias` says for the others), Qwen3 per-head q/k norms. The
    counts equal `sum(p.numel() for p in model.parameters())` of transformers' classes (tests).
    """
    text = config.get("text_config") or config
    kind = str(text.get("model_type") or config.get("model_type") or "llama")
    if kind == "gpt2":
        h, layers, vocab = text["n_embd"], text["n_layer"], text["vocab_size"]
        inner = text.get("n_inner") or 4 * h
        per_layer = 2 * 2 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * inner + inner) + (inner * h + h)
        embedding = vocab * h + text["n_positions"] * h
        total = embedding + layers * per_layer + 2 * h
        return ModelShape(total, embedding, layers, h, vocab, kind)
    h = _get(text, "hidden_size", "d_model", "n_embd")
    layers = _get(text, "num_hidden_layers", "n_layer", "num_layers")
    heads = _get(text, "num_attention_heads", "n_head")
    kv = _get(text, "num_key_value_heads", default=heads)
    head_dim = text.get("head_dim") or h // heads
    inner = _get(text, "intermediate_size", "ffn_dim", "n_inner")
    vocab = _get(text, "vocab_size")
    q, k = heads * head_dim, kv * head_dim
    attention = h * q + 2 * h * k + q * h
    if kind == "qwen2" or text.get("attention_bias"):
        attention += q + 2 * k + (h if text.get("attention_bias") and kind != "qwen2" else 0)
    mlp = 3 * h * inner + (2 * inner + h if text.get("mlp_bias") else 0)
    norms = 2 * h + (2 * head_dim if kind == "qwen3" else 0)
    embedding = vocab * h
    tied = bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False)))
    total = embedding + layers * (attention + mlp + norms) + h + (0 if tied else vocab * h)
    return ModelShape(total, embedding, layers, q, vocab, kind)


def flops(shape: ModelShape, computed_tokens: float, mean_keys: float) -> float:
    """2 x parameters x tokens + attention (4 x layers x attention width x keys per position)."""
    return (
        2.0 * shape.params * computed_tokens + 4.0 * shape.layers * shape.attention_width * mean_keys * computed_tokens
    )


# ----------------------------------------------------------------------------- dataset


def config_files(dataset: Path, config: str) -> list[Path]:
    """The parquet files of one config of a Hub-ready prompt folder, in shard order."""
    files = sorted((dataset / "data" / config).glob("*.parquet"))
    if not files:
        known = (
            sorted(p.name for p in (dataset / "data").iterdir() if p.is_dir()) if (dataset / "data").is_dir() else []
        )
        raise ProbeError(f"{dataset} has no config {config!r} (configs: {', '.join(known) or 'none'})")
    return files


def item_configs(dataset: Path) -> list[str]:
    """The configs whose rows are scored items (`task` choice or number in the first row group), in name order.

    Tables (events, identities) have no `task`; free-text items (`task` text, e.g. the empathy
    rewrite prompts) can only be generated, which `probes plan` does not price.
    """
    import pyarrow.parquet as pq

    if not (dataset / "data").is_dir():
        raise ProbeError(f"{dataset} is not a prompt dataset folder (no data/ folder)")
    out = []
    for folder in sorted(p for p in (dataset / "data").iterdir() if p.is_dir()):
        files = sorted(folder.glob("*.parquet"))
        if not files:
            continue
        with parquet_errors(files[0], "prompt"):
            if "task" not in pq.read_schema(files[0]).names:
                continue
            tasks = set(pq.ParquetFile(files[0]).read_row_group(0, columns=["task"]).column("task").to_pylist())
        if tasks & {"choice", "number"}:
            out.append(folder.name)
    return out


#: the item columns `prepare_request` reads (others are not loaded)
ITEM_COLUMNS = ("id", "task", "prompt", "messages", "choices", "choice_labels", "number_min", "number_max")


class ConfigRows:
    """Row access to one config's parquet files without loading them: counts from the footers, rows by range."""

    def __init__(self, files: Sequence[Path]) -> None:
        import pyarrow.parquet as pq

        self.paths = list(files)
        self.files = []
        for path in self.paths:
            with parquet_errors(path, "prompt"):
                self.files.append(pq.ParquetFile(path))
        #: (file index, row group index, first row, rows) of every row group, in row order
        self.groups: list[tuple[int, int, int, int]] = []
        first = 0
        for k, pf in enumerate(self.files):
            for g in range(pf.metadata.num_row_groups):
                n = pf.metadata.row_group(g).num_rows
                self.groups.append((k, g, first, n))
                first += n
        self.rows = first
        names = self.files[0].schema_arrow.names if self.files else []
        self.columns = [c for c in ITEM_COLUMNS if c in names]
        for path, pf in zip(self.paths, self.files, strict=True):
            self._check_contract(path, pf)

    @staticmethod
    def _check_contract(path: Path, pf: Any) -> None:
        """The item contract's column types and number ranges (a range of 2e9 values would be priced by
        building its trie), from the schema and four light columns: never the prompts themselves."""
        check_column_types(pf.schema_arrow, str(path))
        light = [c for c in ("id", "task", "number_min", "number_max") if c in pf.schema_arrow.names]
        with parquet_errors(path, "prompt"):
            table = pf.read(columns=light)
        check_number_ranges(table, str(path))

    def read(self, start: int, stop: int) -> list[dict[str, Any]]:
        """Rows `start` to `stop` (exclusive) as dicts of the item columns; reads only their row groups."""
        out: list[dict[str, Any]] = []
        for k, g, first, n in self.groups:
            if first + n <= start or first >= stop:
                continue
            with parquet_errors(self.paths[k], "prompt"):
                table = self.files[k].read_row_group(g, columns=self.columns)
            lo, hi = max(start, first) - first, min(stop, first + n) - first
            out.extend(table.slice(lo, hi - lo).to_pylist())
        return out


# ----------------------------------------------------------------------------- counting


@dataclass
class Tally:
    """Sums over counted calls of one (backend, number mode): items and `TokenCounts` fields, with per-call values."""

    items: list[int] = field(default_factory=list)
    values: dict[str, list[float]] = field(default_factory=dict)

    FIELDS = ("context_tokens", "computed_context_tokens", "continuation_positions", "prefix_trie_minimum")

    def add(self, counts: Mapping[str, float]) -> None:
        self.items.append(int(counts["items"]))
        for name in self.FIELDS:
            self.values.setdefault(name, []).append(counts[name])

    def estimate(self, total_items: int, total_calls: int) -> dict[str, Any]:
        """Totals over the config: exact when every call was counted, else the ratio estimator with its error."""
        exact = len(self.items) == total_calls
        x = self.items
        sx = sum(x)
        out: dict[str, Any] = {"items": total_items, "exact": exact, "calls_counted": len(x), "calls": total_calls}
        for name in self.FIELDS:
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
        # the prefix-trie minimum is summed per call: a floor for what a call-by-call scorer computes
        out["shared_prefix_saved"] = out["context_tokens"] - out["computed_context_tokens"]
        out["computed_tokens"] = out["computed_context_tokens"] + out["continuation_positions"]
        n = max(total_items, 1)
        for name in (*self.FIELDS, "shared_prefix_saved", "computed_tokens"):
            out[f"{name}_per_item"] = out[name] / n
        return out


def first_token_request(request: ScoreRequest, single_token_ids: Sequence[int]) -> ScoreRequest:
    """A number item's first-token request: the context alone, the numbers' one-token forms as candidates."""
    return ScoreRequest(request.context, (), tuple(single_token_ids))


def _requests(
    items: Sequence[Mapping[str, Any]],
    tokenizer: Any,
    chat: bool,
    mode: str,
    digits: tuple[int, ...],
    exact: Mapping[str, ScoreRequest] | None = None,
) -> list[ScoreRequest]:
    """The backend requests of `items` as a run in `mode` builds them (`runners.rows.prepare_request`).

    A ValueError (e.g. first-token mode on a number without a one-token form) is the run's own error.
    """
    from .rows import prepare_request
    from .scoring_settings import ScoringSettings

    settings = ScoringSettings()
    if "number_mode" in {f.name for f in dataclasses.fields(ScoringSettings)}:
        settings = dataclasses.replace(settings, number_mode=mode)  # type: ignore[call-arg]
        return [prepare_request(item, tokenizer, chat, settings, digits) for item in items]
    # until the run knows first-token mode: its request is the context, the numbers' one-token forms
    # as candidates, read off the exact request's one-token continuations
    out = []
    for item in items:
        known = (exact or {}).get(str(item.get("id")))
        request = known if known is not None else prepare_request(item, tokenizer, chat, settings, digits)
        if mode == "first-token" and item.get("task") == "number":
            singles = [c[0] for c in request.continuations if len(c) == 1]
            spelled = {tokenizer.decode(list(singles[k : k + 1])).strip() for k in range(len(singles))}
            for n in range(item["number_min"], item["number_max"] + 1):
                if str(n) not in spelled:
                    raise ValueError(f"first-token mode needs a one-token form of every number; {n} has none")
            request = first_token_request(request, singles)
        out.append(request)
    return out


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


def context_request(item: Mapping[str, Any], tokenizer: Any, chat: bool, candidates: tuple[int, ...]) -> ScoreRequest:
    """A number item's request without its trie: the context ids a run sends, and `candidates` after them.

    A number item's context is `encode_context` of its rendered text in both modes
    (`runners.tokenize.number_paths` shares it with every form), so a backend's context
    accounting for it needs no trie; only its continuation positions do.
    """
    from .rows import render_context
    from .tokenize import encode_context

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

    Both backends' accounting (`runners.token_accounting`) is called on the call's requests as
    the run would send them, with each number item's trie left out; the positions its trie adds
    do not depend on the other requests of the call (hf: one packed row per request, its trie's
    nodes; vLLM: its level prompts after the context blocks the first wave cached, with no reuse
    between prompts of one wave). The tries of `trie_items` number items spread over the call
    are built (`prepare`: the run's own `prepare_request`). hf's trie positions are their
    nodes, so the picked ones scale to the call's number items. vLLM's also depend on the
    context's length (each level prompt recomputes the context's last partial block), so every
    number item is counted with its own context and the nearest picked item's trie.
    """
    from . import token_accounting as ta

    numbers = [k for k, item in enumerate(items) if item.get("task") == "number"]
    want = len(numbers) if settings.trie_items is None else min(settings.trie_items, len(numbers))
    picked = [numbers[(j * len(numbers)) // want] for j in range(want)] if want else []
    full = dict(zip(picked, prepare([items[k] for k in picked], mode), strict=True)) if picked else {}
    others = [k for k in range(len(items)) if k not in set(numbers)]
    full.update(zip(others, prepare([items[k] for k in others], mode), strict=True) if others else {})
    template = next((full[k] for k in picked), None)
    requests = [
        full[k] if k not in set(numbers) else contexts(items[k], template.candidates if template else ())
        for k in range(len(items))
    ]
    out: dict[str, dict[str, float]] = {}
    hf = ta.hf_token_counts(requests, max_batch_tokens=settings.max_batch_tokens, items_per_call=None)
    vl = ta.vllm_token_counts(requests, block_size=settings.block_size, items_per_call=None)
    # hf: a trie costs its nodes, whatever its context, so the picked tries scale to the call
    per_trie = [ta.hf_token_counts([full[k]], items_per_call=None).continuation_positions for k in picked]
    scale = len(numbers) / len(picked) if picked else 0.0
    tries = {"hf": scale * sum(per_trie), "vllm": 0.0}
    # vLLM: every level prompt recomputes its context's last partial block, so a trie's cost
    # depends on its own context's length; each number item is counted with its own context
    # and the trie of the nearest picked item before it (scaling the picked items' costs
    # aliased with the rows' identity cycle: +29% on religion_P0S0T0)
    for k in numbers:
        near = full[k] if k in full else full[max((p for p in picked if p <= k), default=picked[0])]
        own = ScoreRequest(requests[k].context, near.continuations, near.candidates)
        tries["vllm"] += ta.vllm_token_counts(
            [own], block_size=settings.block_size, items_per_call=None
        ).continuation_positions
    for name, counts in (("hf", hf), ("vllm", vl)):
        out[name] = {
            "items": len(items),
            "context_tokens": counts.context_tokens,
            "computed_context_tokens": counts.computed_context_tokens,
            "continuation_positions": counts.continuation_positions + tries[name],
            "prefix_trie_minimum": counts.prefix_trie_minimum,
        }
    return out


def count_config(
    rows: ConfigRows,
    tokenizer: Any,
    chat: bool,
    settings: PlanSettings,
    *,
    modes: Sequence[str] = NUMBER_MODES,
    prepare: Prepare | None = None,
    on_call: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Token counts of one config for every (backend, number mode): exact, or estimated from sampled calls."""
    from .rows import cached_digit_start_ids

    calls = -(-rows.rows // settings.items_per_call) if rows.rows else 0
    exact = calls <= settings.sample_calls
    chosen = (
        list(range(calls))
        if exact
        else sorted(random.Random(settings.seed).sample(range(calls), settings.sample_calls))
    )
    if exact:  # every call counted: every trie too, so the counts are exact
        settings = dataclasses.replace(settings, trie_items=None)
    tallies = {(b, m): Tally() for b in BACKENDS for m in modes}
    digits = cached_digit_start_ids(tokenizer)  # once per tokenizer object (a run does the same)
    unavailable: dict[str, str] = {}

    exact_requests: dict[str, ScoreRequest] = {}  # this call's exact requests, read by first-token mode

    def run_prepare(batch: Sequence[Mapping[str, Any]], mode: str) -> list[ScoreRequest]:
        if prepare is not None:
            return prepare(batch, mode)
        made = _requests(batch, tokenizer, chat, mode, digits, exact_requests)
        if mode == "exact":
            exact_requests.update((str(item["id"]), r) for item, r in zip(batch, made, strict=True))
        return made

    def contexts(item: Mapping[str, Any], candidates: tuple[int, ...]) -> ScoreRequest:
        return context_request(item, tokenizer, chat, candidates or digits)

    for done, call in enumerate(chosen):
        items = rows.read(call * settings.items_per_call, min(rows.rows, (call + 1) * settings.items_per_call))
        exact_requests.clear()
        for mode in modes:
            if mode in unavailable:
                continue
            try:
                counted = count_call(items, run_prepare, contexts, mode, settings)
            except ValueError as exc:
                if mode == "exact":
                    raise ProbeError(str(exc)) from None
                unavailable[mode] = str(exc)  # e.g. first-token mode on a digit-by-digit tokenizer
                continue
            for backend in BACKENDS:
                tallies[(backend, mode)].add(counted[backend])
        if on_call:
            on_call(done + 1, len(chosen))
    out: dict[str, Any] = {"items": rows.rows, "calls": calls, "sampled_calls": None if exact else chosen}
    out["trie_items_per_call"] = settings.trie_items
    for (backend, mode), tally in tallies.items():
        if mode in unavailable:
            out.setdefault(backend, {})[mode] = {"items": rows.rows, "unavailable": unavailable[mode]}
        else:
            out.setdefault(backend, {})[mode] = tally.estimate(rows.rows, calls)
    return out


# ----------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class PlanRequest:
    """Everything `probes plan` asks (checked by `check_request` before any work)."""

    dataset: Path
    model: str
    configs: tuple[str, ...] = ()
    gpu: str = "h100"
    mfu: float = DEFAULT_MFU
    chat: bool | None = None
    items_per_call: int | None = None
    max_batch_tokens: int | None = None
    block_size: int = 16
    sample_calls: int = DEFAULT_SAMPLE_CALLS
    trie_items: int | None = DEFAULT_TRIE_ITEMS
    seed: int = 0
    tokens_per_s: float | None = None
    modes: tuple[str, ...] = NUMBER_MODES
    #: where `--json` writes the plan (`write_json`), checked with the rest before any counting
    json_out: str | Path | None = None


def _is_plan(path: Path) -> bool:
    """Whether `path` is a plan `write_json` wrote (so `--json` may replace it): a JSON object with its keys."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and {"model_shape", "configs", "totals"} <= data.keys()


#: the `--json` file: written over only when it is an earlier plan
PLAN_OUTPUT = Output("plan file", owns=_is_plan, file=True)


def check_request(req: PlanRequest) -> None:
    """Every input error as one `ProbeError` line, before anything is loaded or written."""
    if req.json_out is not None:
        inputs = [("DATASET", req.dataset), Reference("--model", req.model)]
        check_output(req.json_out, PLAN_OUTPUT, flag="--json", inputs=inputs)
    if req.gpu not in GPUS:
        raise ProbeError(f"--gpu must be one of {', '.join(GPUS)}, got {req.gpu!r}")
    if not (isinstance(req.mfu, int | float) and 0 < req.mfu <= 1):
        raise ProbeError(f"--mfu must be above 0 and at most 1 (a fraction of the GPU's peak), got {req.mfu}")
    if req.tokens_per_s is not None and not req.tokens_per_s > 0:
        raise ProbeError(f"--tokens-per-s must be positive, got {req.tokens_per_s}")
    for name, value in (("--items-per-call", req.items_per_call), ("--max-batch-tokens", req.max_batch_tokens)):
        if value is not None and value < 1:
            raise ProbeError(f"{name} must be positive, got {value}")
    if req.sample_calls < 1 or req.block_size < 1 or (req.trie_items is not None and req.trie_items < 1):
        raise ProbeError("--sample-calls, --trie-items and --block-size must be positive")
    bad = [m for m in req.modes if m not in NUMBER_MODES]
    if bad or not req.modes:
        raise ProbeError(f"--number-mode must be among {', '.join(NUMBER_MODES)}, got {', '.join(bad) or 'none'}")
    if not req.dataset.is_dir():
        raise ProbeError(f"prompt dataset folder {req.dataset} does not exist")
    folder = Path(req.model).expanduser()
    if folder.exists():
        if not folder.is_dir():
            raise ProbeError(f"--model {req.model} is not a model folder")
        if not (folder / "config.json").is_file():
            raise ProbeError(f"model folder {req.model} has no config.json (a plan needs its shape and tokenizer)")
    elif req.model.startswith((".", "/", "~")) or req.model.count("/") > 1:
        raise ProbeError(f"model folder {req.model} does not exist")


def load_model_config(model: str) -> dict[str, Any]:
    """`config.json` of a local folder (or, for a Hub id, transformers' download of it) as a dict."""
    folder = Path(model).expanduser()
    if folder.is_dir():
        try:
            return json.loads((folder / "config.json").read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ProbeError(f"{folder / 'config.json'} is not valid JSON: {exc}") from None
    from transformers import AutoConfig

    try:  # pragma: no cover - needs the network or a cached Hub id
        return AutoConfig.from_pretrained(model).to_dict()
    except (OSError, ValueError) as exc:
        raise ProbeError(f"cannot read the config of {model!r}: {exc}") from None


def default_batching(req: PlanRequest, config: Mapping[str, Any], shape: ModelShape) -> PlanSettings:
    """The run's defaults on the planned GPU: 1024 items per call, the token budget its free memory gives.

    The free memory is the GPU's, less the bf16 weights; the budget is the hf backend's own
    (`runners.device.cuda_token_budget`). vLLM's block size is its GPU default (16).
    """
    from .device import ITEMS_PER_CALL, MAX_LOGIT_ROWS

    items = req.items_per_call or ITEMS_PER_CALL["cuda"]
    budget = req.max_batch_tokens
    if budget is None:
        try:
            from transformers import AutoConfig

            from .device import cuda_token_budget

            hf_config = AutoConfig.for_model(**dict(config)) if "model_type" in config else None
        except (ImportError, ValueError, KeyError):
            hf_config = None
        free = int(GPUS[req.gpu].memory_gib * 2**30 - 2 * shape.params)
        if hf_config is not None and free > 0:
            budget = cuda_token_budget(hf_config, "bfloat16", free, MAX_LOGIT_ROWS["cuda"])
        else:
            from .token_accounting import DEFAULT_MAX_BATCH_TOKENS

            budget = DEFAULT_MAX_BATCH_TOKENS
    return PlanSettings(
        items_per_call=items,
        max_batch_tokens=budget,
        block_size=req.block_size,
        sample_calls=req.sample_calls,
        trie_items=req.trie_items,
        seed=req.seed,
    )


def _hours(shape: ModelShape, counts: Mapping[str, Any], req: PlanRequest) -> dict[str, float]:
    mean_keys = counts["context_tokens_per_item"] + 1
    total = flops(shape, counts["computed_tokens"], mean_keys)
    out = {"flops": total, "gpu_hours": total / (GPUS[req.gpu].bf16_tflops * 1e12 * req.mfu) / 3600}
    if req.tokens_per_s:
        out["hours_at_tokens_per_s"] = counts["computed_tokens"] / req.tokens_per_s / 3600
    return out


def make_plan(req: PlanRequest, *, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The plan of `req` as a JSON-ready dict (see the module docstring); writes nothing."""
    check_request(req)
    started = time.perf_counter()
    config = load_model_config(req.model)
    shape = count_params(config)
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(req.model)
    except (OSError, ValueError) as exc:
        raise ProbeError(f"cannot load the tokenizer of {req.model!r}: {exc}") from None
    chat = bool(getattr(tokenizer, "chat_template", None)) if req.chat is None else req.chat
    configs = list(req.configs) or item_configs(req.dataset)
    if not configs:
        raise ProbeError(f"{req.dataset} has no config of scorable items")
    files = {c: config_files(req.dataset, c) for c in configs}  # every name checked before any counting
    settings = default_batching(req, config, shape)
    per_config: dict[str, Any] = {}
    for name in configs:
        rows = ConfigRows(files[name])

        def tick(done: int, total: int, name: str = name) -> None:
            if progress:
                progress(f"{name}: call {done}/{total}")

        counts = count_config(rows, tokenizer, chat, settings, modes=req.modes, on_call=tick)
        for backend in BACKENDS:
            for mode in req.modes:
                if "unavailable" not in counts[backend][mode]:
                    counts[backend][mode].update(_hours(shape, counts[backend][mode], req))
        per_config[name] = counts
    totals: dict[str, Any] = {}
    for backend in BACKENDS:
        for mode in req.modes:
            cells = [per_config[c][backend][mode] for c in configs]
            missing = sorted({cell["unavailable"] for cell in cells if "unavailable" in cell})
            if missing:
                totals.setdefault(backend, {})[mode] = {
                    "items": sum(cell["items"] for cell in cells),
                    "unavailable": missing[0],
                }
                continue
            keys = ("items", "context_tokens", "computed_context_tokens", "shared_prefix_saved")
            keys += ("continuation_positions", "computed_tokens", "prefix_trie_minimum", "flops", "gpu_hours")
            total = {k: sum(cell[k] for cell in cells) for k in keys}
            if req.tokens_per_s:
                total["hours_at_tokens_per_s"] = sum(cell["hours_at_tokens_per_s"] for cell in cells)
            total["computed_tokens_se"] = math.sqrt(
                sum(cell["computed_context_tokens_se"] ** 2 + cell["continuation_positions_se"] ** 2 for cell in cells)
            )
            n = max(total["items"], 1)
            for k in ("context_tokens", "computed_context_tokens", "prefix_trie_minimum", "continuation_positions"):
                total[f"{k}_per_item"] = total[k] / n
            totals.setdefault(backend, {})[mode] = total
    return {
        "dataset": str(req.dataset),
        "model": req.model,
        "model_shape": dataclasses.asdict(shape),
        "chat": chat,
        "gpu": {"name": req.gpu, **dataclasses.asdict(GPUS[req.gpu])},
        "mfu": req.mfu,
        "tokens_per_s": req.tokens_per_s,
        "batching": dataclasses.asdict(settings),
        "flops_definition": "2 x params x computed tokens + 4 x layers x attention width x (mean context + 1) "
        "x computed tokens",
        "counting": "exact per call where a config has at most sample_calls calls, else a ratio estimate from "
        "sampled calls (each counted exactly), with its standard error (*_se)",
        "configs": per_config,
        "totals": totals,
        "wall_s": time.perf_counter() - started,
    }


def write_json(plan: Mapping[str, Any], path: str | Path) -> None:
    """Write the plan atomically (`files.atomic_write_text`: a temporary file beside `path`, renamed over it)."""
    path = Path(path)
    with writing("the plan", path):
        path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(plan, indent=2, default=float) + "\n")


def summary_rows(plan: Mapping[str, Any]) -> Iterator[tuple[str, ...]]:
    """Table rows (config, backend, mode, items, context/item, computed/item, saved/item, trie min/item,
    continuation/item, hours) for the command line."""
    for name, counts in [*plan["configs"].items(), ("TOTAL", None)]:
        for backend in BACKENDS:
            for mode in NUMBER_MODES:
                cell = (counts or plan["totals"])[backend].get(mode)
                if cell is None:
                    continue
                if "unavailable" in cell:
                    yield (name, backend, mode, f"{cell['items']:,}", *["-"] * 5, "n/a: " + cell["unavailable"])
                    continue
                n = max(cell["items"], 1)
                hours = f"{cell['gpu_hours']:.2f}"
                yield (
                    name,
                    backend,
                    mode,
                    f"{cell['items']:,}",
                    f"{cell['context_tokens'] / n:.1f}",
                    f"{cell['computed_context_tokens'] / n:.1f}",
                    f"{cell['shared_prefix_saved'] / n:.1f}",
                    f"{cell['prefix_trie_minimum'] / n:.1f}",
                    f"{cell['continuation_positions'] / n:.1f}",
                    hours,
                )
