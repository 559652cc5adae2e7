"""What a plan prices with: the model's shape from `config.json`, its FLOPs, the GPUs and their peaks.

- **FLOPs** = 2 x parameters x computed tokens (the convention of docs/DESIGN.md section 8b and
  `benchmarks/gpu_scoring.py`: every parameter, embeddings included) + attention, 4 x layers x
  (heads x head size) x keys per computed position (QK^T and AV), with keys taken as the mean
  context length + 1 (an upper bound for context positions; the probes' prompts are short, so
  the term is below 1% of the total for an 8B model). Parameters are counted from the
  `config.json` shape (`count_params`).
- **hours** = FLOPs / (the GPU's dense bf16 peak x MFU), or computed tokens / a measured
  tokens/s (`tokens_per_s`, e.g. the CPU's, to check a prediction against a run).
- **decode** (generation): its prompt is a prefill, priced as above; each further token is a
  decode step, which runs at its own cost. A step over a batch of B running sequences reads the
  weights once (2 bytes per parameter, bf16) and each sequence's KV cache (2 (keys and values) x
  layers x key/value width x 2 bytes per cached token), and does 2 x parameters x B FLOPs; it
  takes max(bytes / the GPU's memory bandwidth, FLOPs / (peak x MFU)) (`decode_step_seconds`):
  memory-bound for small batches, compute-bound for large ones. How many sequences decode at once,
  for how many steps, is each backend's own batching (`BackendSpec.generate_counts`: vLLM's
  continuous batching, hf's static padded batches); `generation_hours` adds the two.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptgen.core.errors import ProbeError
from runners.scoring.generate_accounting import DecodeGroup, DecodeMachine

#: the share of the GPU's peak a plan assumes unless `--mfu` says otherwise
DEFAULT_MFU = 0.5


@dataclass(frozen=True)
class GPU:
    """A GPU a plan can price: its dense bf16 tensor peak, its memory and its memory bandwidth."""

    name: str
    #: dense (no structured sparsity) bf16 tensor-core peak, TFLOP/s, from NVIDIA's datasheets
    bf16_tflops: float
    memory_gib: float
    #: memory bandwidth, TB/s (10^12 bytes per second), from NVIDIA's datasheets: what a decode step waits on
    memory_tb_s: float


#: the GPUs `--gpu` names. Peaks are NVIDIA's published dense bf16 figures (the datasheets
#: print twice these "with sparsity"): H100 SXM5 989.4 (1,979 sparse); H200 SXM the same
#: compute as H100 SXM (989.4); A100 SXM4 80GB 312; RTX A6000 154.8 (309.7 sparse);
#: L40S 362.05 (733 sparse). Memory bandwidths, the same datasheets: H100 SXM5 3.35 TB/s (HBM3);
#: H200 SXM 4.8 TB/s (HBM3e); A100 SXM4 80GB 2.039 TB/s (HBM2e); RTX A6000 768 GB/s (GDDR6);
#: L40S 864 GB/s (GDDR6).
GPUS: dict[str, GPU] = {
    "h100": GPU("NVIDIA H100 SXM5 80GB", 989.4, 80, 3.35),
    "h200": GPU("NVIDIA H200 SXM 141GB", 989.4, 141, 4.8),
    "a100": GPU("NVIDIA A100 SXM4 80GB", 312.0, 80, 2.039),
    "a6000": GPU("NVIDIA RTX A6000 48GB", 154.8, 48, 0.768),
    "l40s": GPU("NVIDIA L40S 48GB", 362.05, 48, 0.864),
}

#: bytes per weight and per cached key or value element: bf16
BF16_BYTES = 2


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
    #: key/value heads x head size: the width of the KV cache per layer (None: `attention_width`, no grouping)
    kv_width: int | None = None

    @property
    def kv_bytes_per_token(self) -> int:
        """The KV cache's bytes per token of a sequence, bf16: keys and values, every layer."""
        return 2 * self.layers * (self.kv_width or self.attention_width) * BF16_BYTES


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
        return ModelShape(total, embedding, layers, h, vocab, kind, h)
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
    return ModelShape(total, embedding, layers, q, vocab, kind, k)


def flops(shape: ModelShape, computed_tokens: float, mean_keys: float) -> float:
    """2 x parameters x tokens + attention (4 x layers x attention width x keys per position)."""
    return (
        2.0 * shape.params * computed_tokens + 4.0 * shape.layers * shape.attention_width * mean_keys * computed_tokens
    )


def load_model_config(model: str, *, revision: str | None = None) -> dict[str, Any]:
    """`config.json` of a local folder (or, for a Hub id, transformers' download of it at `revision`) as a dict."""
    folder = Path(model).expanduser()
    if folder.is_dir():
        try:
            return json.loads((folder / "config.json").read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ProbeError(f"{folder / 'config.json'} is not valid JSON: {exc}") from None
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(model, revision=revision).to_dict()
    except (OSError, ValueError) as exc:
        raise ProbeError(f"cannot read the config of {model!r}: {exc}") from None


#: what a config and one backend call cost besides the model's work, in seconds: the config's load and
#: checks, the session (resume, manifest, card, compaction), and per call the Python around the model
#: (rendering, tokenising, requests, rows). Measured by `benchmarks/fixed_cost.py` on 2 CPU cores with a
#: backend that answers at once (`benchmarks/results/fixed_cost_cpu2.json`, "null"), so the model's own work,
#: priced by its FLOPs, is not counted twice; that Python runs on a GPU host's CPU too, so GPU plans add it.
FIXED_COST = {"per_config_s": 0.0466, "per_call_s": 0.0023}


def fixed_hours(calls: int) -> float:
    """Hours one config spends outside the model: `per_config_s` once, `per_call_s` per backend call."""
    return (FIXED_COST["per_config_s"] + calls * FIXED_COST["per_call_s"]) / 3600


def hours(
    shape: ModelShape,
    counts: Mapping[str, Any],
    gpu: str,
    mfu: float,
    tokens_per_s: float | None,
    *,
    calls: int = 0,
) -> dict[str, float]:
    """FLOPs of a config's counts and the hours they take on `gpu` at `mfu` (and at `tokens_per_s`, when given).

    `gpu_hours` is the model's work alone; `fixed_hours` what the config's `calls` cost besides
    (`FIXED_COST`); `hours` their sum, what the run takes.
    """
    mean_keys = counts["context_tokens_per_item"] + 1
    total = flops(shape, counts["computed_tokens"], mean_keys)
    gpu_hours = total / (GPUS[gpu].bf16_tflops * 1e12 * mfu) / 3600
    fixed = fixed_hours(calls)
    out = {"flops": total, "gpu_hours": gpu_hours, "fixed_hours": fixed, "hours": gpu_hours + fixed}
    if tokens_per_s:
        out["hours_at_tokens_per_s"] = counts["computed_tokens"] / tokens_per_s / 3600 + fixed
    return out


def decode_machine(shape: ModelShape, gpu: str | None) -> DecodeMachine:
    """What a backend's decode batching reads of `gpu` (a `GPUS` name; None: a CPU) and of the model (bf16)."""
    weights, kv = shape.params * BF16_BYTES, shape.kv_bytes_per_token
    if gpu is None:
        return DecodeMachine(None, "cpu", weights, kv)
    return DecodeMachine(GPUS[gpu].memory_gib * 2**30, GPUS[gpu].name, weights, kv)


def decode_step_seconds(shape: ModelShape, gpu: str, mfu: float, sequences: float, kv_tokens: float) -> float:
    """One decode step over `sequences` running sequences of `kv_tokens` cached tokens each (module docstring).

    bytes = 2 x parameters (the weights, bf16, read once) + sequences x kv_tokens x `kv_bytes_per_token`;
    FLOPs = 2 x parameters x sequences; seconds = max(bytes / bandwidth, FLOPs / (bf16 peak x MFU)).
    """
    spec = GPUS[gpu]
    memory = BF16_BYTES * shape.params + sequences * kv_tokens * shape.kv_bytes_per_token
    work = 2.0 * shape.params * sequences
    return max(memory / (spec.memory_tb_s * 1e12), work / (spec.bf16_tflops * 1e12 * mfu))


def decode_seconds(shape: ModelShape, groups: Sequence[DecodeGroup], gpu: str, mfu: float) -> float:
    """The seconds a backend's decode steps (`GenerateCounts.groups`) take on `gpu`: steps x `decode_step_seconds`."""
    return sum(g.steps * decode_step_seconds(shape, gpu, mfu, g.sequences, g.kv_tokens) for g in groups)


def generation_hours(
    shape: ModelShape,
    counts: Mapping[str, Any],
    gpu: str,
    mfu: float,
    tokens_per_s: float | None,
    *,
    decode_tokens_per_s: float | None = None,
    calls: int = 0,
) -> dict[str, float]:
    """A generated config's hours: its prefill at the FLOPs rate, its decode steps at their own cost, and its calls.

    `counts` holds `computed_prompt_tokens` and `prompt_tokens_per_item` (the prefill, priced as `flops`
    with keys the mean prompt + 1), `decode_s` (the decode steps' `decode_seconds` on `gpu` at `mfu`)
    and `decode_positions`. At measured rates, prefill positions / `tokens_per_s` + decode positions /
    `decode_tokens_per_s` (`tokens_per_s` when no decode rate is given).
    """
    prefill = flops(shape, counts["computed_prompt_tokens"], counts["prompt_tokens_per_item"] + 1)
    prefill_hours = prefill / (GPUS[gpu].bf16_tflops * 1e12 * mfu) / 3600
    decode_hours = counts["decode_s"] / 3600
    decode_flops = 2.0 * shape.params * counts["decode_positions"]
    fixed = fixed_hours(calls)
    out = {
        "flops": prefill + decode_flops,
        "prefill_flops": prefill,
        "decode_flops": decode_flops,
        "prefill_hours": prefill_hours,
        "decode_hours": decode_hours,
        "gpu_hours": prefill_hours + decode_hours,
        "fixed_hours": fixed,
        "hours": prefill_hours + decode_hours + fixed,
    }
    if tokens_per_s:
        decode_rate = decode_tokens_per_s or tokens_per_s
        seconds = counts["computed_prompt_tokens"] / tokens_per_s + counts["decode_positions"] / decode_rate
        out["hours_at_tokens_per_s"] = seconds / 3600 + fixed
    return out
