"""Where and in what precision a model runs: the `auto` defaults of `probes run`, and memory sizes.

A user with a GPU and an 8B model should get a working, fast run without flags, and a user on a
laptop a working (slow) one; neither should silently get the other's settings. So:

- `--dtype auto` is the checkpoint's own dtype (`dtype`, formerly `torch_dtype`, in config.json):
  a bf16 checkpoint runs in bf16, an fp32 one in fp32. fp32 is used for a bf16 model only
  when asked for. A config that states no dtype is float32 (what transformers loads then).
- `--device auto` is CUDA when torch sees a GPU, else the CPU. On the CPU, a model that looks
  made for a GPU (stored in half precision, or more than `LARGE_MODEL_PARAMETERS` parameters)
  gets a visible warning: it will run, but slowly, and the user probably meant a GPU machine.
- GPU-sized batching defaults (items per backend call, logit rows per pass, the vLLM memory
  fraction) apply when the device resolves to CUDA; the CPU keeps the sizes it was tuned for.

Only `resolve_device` and `free_cuda_memory` touch torch, lazily; the rest is pure.
"""

from __future__ import annotations

from typing import Any

AUTO = "auto"


class RunnerWarning(UserWarning):
    """A run will work but probably not as meant (a GPU-sized model on the CPU); the CLI prints it."""


#: weight dtypes a run may ask for; `auto` resolves to one of them
DTYPES = ("float32", "bfloat16", "float16")
#: quantised loads a run may ask for (`--dtype`, opt-in, hf on CUDA only), each with the dtype its
#: arithmetic runs in. `bnb-4bit` is the Talent-or-Luck release's load: bitsandbytes 4-bit weights
#: of its default 4-bit type, float16 compute (`BitsAndBytesConfig(load_in_4bit=True,
#: bnb_4bit_compute_dtype=torch.float16)` in every released scorer)
QUANTIZED = {"bnb-4bit": "float16"}
#: above this many parameters, a model on the CPU gets a warning (a 1B model is already slow there)
LARGE_MODEL_PARAMETERS = 1_000_000_000
#: vLLM's share of the accelerator's memory: most of a GPU (weights + KV cache); on the CPU the
#: KV cache is sized by VLLM_CPU_KVCACHE_SPACE instead and this value is only a bound
GPU_MEMORY_UTILIZATION = {"cuda": 0.9, "cpu": 0.3}
#: items per backend call (`--batch-size`): a GPU needs many sequences in flight to be busy
#: (benchmarks/gpu_scoring.py's sizes); on the CPU 64 items let the hf backend's context radix
#: tree share the narratives' prefixes and fill its passes (fewer, larger passes: on shared
#: cores each operator's thread hand-off costs about as much as its arithmetic)
ITEMS_PER_CALL = {"cuda": 1024, "cpu": 64}
#: hf backend: logit rows (rows x fed positions) per continuation pass (see runners.backends.hf.backend); on the
#: CPU 2048 rows hold ten 0-100 digit tries (203 nodes each) in one pass: 400 MB of float32
#: logits for a 49k vocabulary
MAX_LOGIT_ROWS = {"cuda": 4096, "cpu": 2048}
#: share of the free GPU memory the hf backend's token budget may fill: the context pass's KV
#: cache stays alive while each continuation chunk expands its own copy, so about two budgets
#: of cache, plus one layer's activations, are alive at the peak
CUDA_BUDGET_FRACTION = 0.35


def default_batch_size(device: str | None) -> int:
    """Items per backend call when `--batch-size` is not given: GPU-sized on CUDA, small on the CPU."""
    return ITEMS_PER_CALL.get(device_type(device or "cpu"), ITEMS_PER_CALL["cuda"])


def device_type(device: str) -> str:
    """`cuda:1` -> `cuda`; `cpu` -> `cpu`."""
    return device.split(":", 1)[0]


def resolve_device(device: str) -> str:
    """`auto` -> `cuda` when torch sees a GPU, else `cpu`; any other value is kept as given."""
    if device != AUTO:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def checkpoint_dtype(config: Any) -> str | None:
    """The dtype a checkpoint's config states (`dtype`, or `torch_dtype` in older configs), as a name."""
    for name in ("dtype", "torch_dtype"):
        value = getattr(config, name, None)
        if value is not None and str(value) != AUTO:
            return str(value).removeprefix("torch.")
    return None


def compute_dtype(dtype: str) -> str:
    """The dtype a load's arithmetic runs in: a quantised load's compute dtype, else `dtype` itself."""
    return QUANTIZED.get(dtype, dtype)


def resolve_dtype(dtype: str, config: Any) -> str:
    """`auto` -> the checkpoint's dtype (float32 when it states none or one outside `DTYPES`)."""
    if dtype != AUTO:
        return dtype
    stored = checkpoint_dtype(config)
    return stored if stored in DTYPES else "float32"


def estimated_parameters(config: Any) -> int | None:
    """Parameter count of a decoder-only transformer from its config (embeddings, attention, MLP), or None.

    An estimate (biases and norms are left out): enough to tell a 135M model from an 8B one.
    """
    text = getattr(config, "get_text_config", lambda: config)()
    try:
        hidden = int(text.hidden_size)
        layers = int(text.num_hidden_layers)
        vocab = int(text.vocab_size)
    except (AttributeError, TypeError):
        return None
    heads = int(getattr(text, "num_attention_heads", 0) or 1)
    head_dim = int(getattr(text, "head_dim", 0) or hidden // heads)
    kv_heads = int(getattr(text, "num_key_value_heads", 0) or heads)
    intermediate = int(getattr(text, "intermediate_size", 0) or 4 * hidden)
    attention = hidden * head_dim * (2 * heads + 2 * kv_heads)
    mlp = 3 * hidden * intermediate
    embeddings = vocab * hidden * (1 if getattr(text, "tie_word_embeddings", False) else 2)
    return embeddings + layers * (attention + mlp)


def cpu_warning(config: Any, model: str) -> str | None:
    """The warning for a model that `--device auto` put on the CPU, or None when it is made for one.

    A model warrants it when it is stored in half precision (how GPU models are published) or
    has more than `LARGE_MODEL_PARAMETERS` parameters.
    """
    stored = checkpoint_dtype(config)
    params = estimated_parameters(config)
    reasons = []
    if stored is not None and stored != "float32":
        reasons.append(f"stored in {stored}")
    if params is not None and params > LARGE_MODEL_PARAMETERS:
        reasons.append(f"about {params / 1e9:.1f}B parameters")
    if not reasons:
        return None
    return (
        f"no GPU is visible (torch.cuda.is_available() is False), so {model} ({', '.join(reasons)}) runs on "
        "the CPU, which is slow for it; pass --device cpu to silence this"
    )


def bytes_per_token(config: Any, dtype: str) -> int:
    """Memory one token costs in a forward pass: its KV cache in every layer plus one layer's activations."""
    text = getattr(config, "get_text_config", lambda: config)()
    size = 4 if dtype == "float32" else 2
    hidden = int(text.hidden_size)
    heads = int(getattr(text, "num_attention_heads", 0) or 1)
    head_dim = int(getattr(text, "head_dim", 0) or hidden // heads)
    kv_heads = int(getattr(text, "num_key_value_heads", 0) or heads)
    intermediate = int(getattr(text, "intermediate_size", 0) or 4 * hidden)
    kv_cache = 2 * int(text.num_hidden_layers) * kv_heads * head_dim * size
    # one layer at a time: residual, normed input, q/k/v/attention output, gate/up/activation
    activations = (4 * hidden + heads * head_dim + 3 * intermediate) * size
    return kv_cache + activations


def cuda_token_budget(config: Any, dtype: str, free_bytes: int, max_logit_rows: int) -> int:
    """The hf backend's `max_batch_tokens` for `free_bytes` of free GPU memory.

    The logits of one continuation pass (`max_logit_rows` rows of the vocabulary in the model's
    dtype, a float32 copy and the float32 exponentials) are set aside first; a fraction
    (`CUDA_BUDGET_FRACTION`) of the rest is divided by `bytes_per_token`. Never below 1024 tokens
    (out of memory, the backend halves its budget anyway).
    """
    text = getattr(config, "get_text_config", lambda: config)()
    size = 4 if dtype == "float32" else 2
    logits = max_logit_rows * int(text.vocab_size) * (size + 4 + 4)
    usable = max(0, free_bytes - logits) * CUDA_BUDGET_FRACTION
    return max(1024, int(usable // bytes_per_token(config, dtype)))


def free_cuda_memory(device: str) -> int:
    """Free bytes on a CUDA device (`torch.cuda.mem_get_info`)."""
    import torch

    return int(torch.cuda.mem_get_info(torch.device(device))[0])


#: fragments of the messages CUDA, cuBLAS and the caching allocator raise as a plain RuntimeError
#: when memory runs out (torch raises torch.OutOfMemoryError only for its own allocator)
OOM_MESSAGES = (
    "out of memory",
    "not enough memory",
    "cublas_status_alloc_failed",
    "cudnn_status_alloc_failed",
    "failed to allocate",
)


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether `exc` means the device ran out of memory (and a smaller batch may fit)."""
    try:
        import torch

        if isinstance(exc, torch.OutOfMemoryError):
            return True
    except ImportError:  # pragma: no cover - the hf extra is what raises these
        pass
    if not isinstance(exc, RuntimeError):
        return False
    message = str(exc).lower()
    return any(fragment in message for fragment in OOM_MESSAGES)
