"""The run loop (DESIGN section 7): a prompt config + a model -> result parts, resumable and shardable.

1. The prompt config is loaded with `datasets` (a local Hub-ready folder or a Hub repo id)
   and checked against the item contract before anything is written.
2. `runners.session` selects the shard's items and those still to score under the
   `ResultKey` (same id and same prompt hash are done).
3. The rest is scored `batch_size` items at a time by `runners.rows.run_items`; the session
   flushes rows as an atomically written part every `flush_every` rows and at the end. A
   killed run loses at most the rows since its last flush; rerunning the same command resumes.
4. When the config is done, the session compacts the key folder and refreshes
   results_manifest.json and README.md (atomically, under a lock).
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptgen.core.contract import check_prompt_config, check_prompt_forms
from promptgen.core.errors import ProbeError, dataset_load_errors
from promptgen.core.layout import BUILD_MANIFEST
from promptgen.hub.folder import (
    check_data_files,
    check_path_segment,
    config_data_files,
    parquet_errors,
    read_dataset_manifest,
)

from . import context_length, model_identity
from .device import (
    AUTO,
    DTYPES,
    GPU_MEMORY_UTILIZATION,
    ITEMS_PER_CALL,
    RunnerWarning,
    cpu_warning,
    device_type,
    is_out_of_memory,
    resolve_device,
    resolve_dtype,
)
from .extras import require_for_scoring
from .rows import ScoringSettings, run_items
from .session import RunSummary, Session, model_name_for, result_key, select_rows

__all__ = ["BACKENDS", "DTYPES", "PromptConfig", "RunSummary", "load_backend", "run_config"]

BACKENDS = ("hf", "vllm")
#: vLLM's max_model_len when neither it nor the items' needs are given
DEFAULT_MAX_MODEL_LEN = 4096


@dataclass
class PromptConfig:
    """One config of a prompt dataset, loaded and checked."""

    dataset: Any  # datasets.Dataset
    path: str
    config: str
    revision: str | None
    fingerprint: str | None
    license: str
    #: the dataset's name and version from its build manifest (None when it has none)
    name: str | None = None
    version: str | None = None
    #: the Hub repo id it was loaded from (None for a local folder)
    repo_id: str | None = None

    def provenance(self) -> dict[str, Any]:
        """How a results manifest names its prompts: by name, version, fingerprint and Hub repo, never a local path."""
        return {
            "name": self.name or Path(self.path).name,
            "version": self.version,
            "config": self.config,
            "fingerprint": self.fingerprint,
            "repo_id": self.repo_id,
            "revision": self.revision,
        }


def _front_matter(readme: Path) -> dict[str, Any]:
    import yaml

    try:
        text = readme.read_text(encoding="utf-8")
        if text.startswith("---\n"):
            return yaml.safe_load(text[4 : text.index("\n---", 4)]) or {}
    except (OSError, ValueError, yaml.YAMLError):
        pass
    return {}


def _own_features(folder: Path, config: str) -> Any:
    """The column types of a local config, from its first parquet file (None when it has none).

    `datasets` keys its cache of a local folder by the folder's name and card, and a builder
    takes its features from an existing cache entry, even with `force_redownload`: a second
    folder of the same name (or a rebuild) with other columns or types then fails to cast, or
    is cast silently to the old types. Given the folder's own features, the cache entry is
    keyed by them as well.
    """
    import datasets
    import pyarrow.parquet as pq

    files = sorted((folder / "data" / config).glob("*.parquet"))
    if not files:
        return None
    with parquet_errors(files[0], "prompt config"):
        return datasets.Features.from_arrow_schema(pq.read_schema(files[0]))


def load_prompt_config(
    dataset: str, config: str, *, revision: str | None = None, chat: bool | None = None
) -> PromptConfig:
    """Load `config` (split `test`) of a local Hub-ready folder or Hub dataset and check it.

    Checked before any model loads: the config name is one path segment (it names the result
    folder `data/<config>/`), a local folder's data files of the config are the ones its
    build_manifest.json lists (`check_data_files`), and the rows keep the item contract with
    the prompt form `chat` reads (`check_prompt_config`; None: either form).
    """
    import datasets

    check_path_segment(config, "config name (--config)")
    folder = Path(dataset).expanduser()
    local = folder.exists()
    if not local and model_identity.is_path_like(dataset):
        raise ProbeError(f"prompt dataset folder {dataset} does not exist")
    if local and not folder.is_dir():
        raise ProbeError(f"prompt dataset {dataset} is not a folder")
    built: dict[str, Any] = {}
    if local and (folder / BUILD_MANIFEST).is_file():  # before the (costly) load: the files are the listed ones
        built = read_dataset_manifest(folder, flag="prompt dataset", expected="a folder")
        check_data_files(folder, built, config_data_files(folder, config), config=config)
    try:
        # datasets 4 keys its cache of a local folder by name, not content: a rebuilt folder
        # would give the old rows, so a local folder is always re-read
        mode = "force_redownload" if local else None
        # and its split sizes are checked against that cache: a local folder is verified by the
        # item contract below instead (datasets' NonMatchingSplitsSizesError named no fix)
        checks = {"verification_mode": "no_checks"} if local else {}
        if local:  # and it takes the features of that cache too: give it the folder's own
            checks["features"] = _own_features(folder, config)
        ds = datasets.load_dataset(
            str(folder) if local else dataset, config, split="test", revision=revision, download_mode=mode, **checks
        )
    except dataset_load_errors() as exc:
        raise ProbeError(f"cannot load config {config!r} of {dataset}: {exc}") from exc
    except datasets.exceptions.DatasetGenerationError as exc:
        cause = exc.__cause__ or exc
        raise ProbeError(f"cannot read config {config!r} of {dataset} (empty or corrupt parquet?): {cause}") from exc
    license = "other"
    if local:
        license = _front_matter(folder / "README.md").get("license", license)
    else:  # pragma: no cover - needs the network
        try:
            from huggingface_hub import hf_hub_download

            path = hf_hub_download(dataset, BUILD_MANIFEST, repo_type="dataset", revision=revision)
            built = json.loads(Path(path).read_text(encoding="utf-8"))
        except Exception:
            built = {}
    check_prompt_config(ds, f"{dataset} config {config!r}", chat=chat)
    return PromptConfig(
        ds,
        dataset,
        config,
        revision,
        built.get("fingerprint"),
        str(license),
        name=built.get("name") or (folder.resolve().name if local else dataset.split("/")[-1]),
        version=built.get("version"),
        repo_id=None if local else dataset,
    )


def check_scoring_mode(prompts: PromptConfig, settings: ScoringSettings) -> None:
    """Free-text items have no options to score: they need generation mode (checked before a model loads)."""
    if settings.mode != "generate" and "text" in set(prompts.dataset.unique("task")):
        raise ProbeError(
            f"{prompts.path} config {prompts.config!r} has free-text items (task `text`): "
            "run it with --scoring generate"
        )


def check_chat_form(prompts: PromptConfig, chat: bool) -> None:
    """Once the tokenizer has decided `chat`, every item must have the form it reads (`check_prompt_forms`).

    `load_prompt_config` checks this already when --chat/--no-chat was given; left to the
    tokenizer, it is known only here, still before anything is written.
    """
    check_prompt_forms(prompts.dataset, f"{prompts.path} config {prompts.config!r}", chat)


def check_number_mode(prompts: PromptConfig, settings: ScoringSettings, tokenizer: Any, chat: bool) -> None:
    """First-token mode needs a one-token form of every number in range: checked on the first number item.

    Run before any result is written, so a digit-by-digit tokenizer over 0-100 is one line
    (naming the first number without a one-token form), not a traceback mid-run. Exact mode
    and configs without number items pass.
    """
    if settings.mode != "score" or settings.number_mode == "exact":
        return
    ds = prompts.dataset
    if "number" not in set(ds.unique("task")):
        return
    tasks = ds.select_columns(["task"])
    # a config holds millions of rows: read the task column in slices, up to the first number item
    first = next(
        start + k
        for start in range(0, len(ds), 4096)
        for k, task in enumerate(tasks[start : start + 4096]["task"])
        if task == "number"
    )
    from .rows import prepare_request

    item = ds[first]
    try:
        prepare_request(item, tokenizer, chat, settings, ())
    except ValueError as exc:
        raise ProbeError(f"{prompts.path} config {prompts.config!r}: {exc}") from None


def load_backend(
    model: str,
    *,
    backend: str = "hf",
    revision: str | None = None,
    dtype: str = AUTO,
    device: str = AUTO,
    device_map: str | None = None,
    gguf_file: str | None = None,
    prefix_caching: bool = True,
    enforce_eager: bool = False,
    gpu_memory_utilization: float | None = None,
    max_model_len: int | None = None,
    block_size: int | None = None,
    max_batch_tokens: int | None = None,
    max_logit_rows: int | None = None,
    tensor_parallel_size: int = 1,
    needed_tokens: int | Callable[[Any], int] | None = None,
):
    """(backend, tokenizer, revision for the result key) of a model folder or Hub id.

    Both backends get the same transformers tokenizer, so they score the same token ids
    (`runners.tokenize`); vLLM's own tokenizer only detokenises generations. `auto` settings
    follow the model and the machine (`runners.device`): the checkpoint's dtype, CUDA when
    torch sees a GPU (with a `RunnerWarning` when a GPU-sized model lands on the CPU), and
    vLLM's memory fraction 0.9 on CUDA, 0.3 on the CPU. vLLM's `max_model_len` left out is
    what the items need (`needed_tokens(tokenizer)`, see `needs_of`), capped by the model's
    position limit (`runners.context_length`); without `needed_tokens`, the smaller of the
    limit and 4096.

    The model is located and keyed first (`model_identity.locate`): a Hub id is loaded at the
    commit its revision resolves to, and a local folder is checked again after loading.
    """
    if backend not in BACKENDS:
        raise ProbeError(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if dtype not in (AUTO, *DTYPES):
        raise ProbeError(f"--dtype must be one of auto, {', '.join(DTYPES)}, got {dtype!r}")
    if device_map not in (None, AUTO):
        raise ProbeError(f"--device-map must be auto (or left out), got {device_map!r}")
    if device_map is not None and backend != "hf":
        raise ProbeError("--device-map works with --backend hf; vllm spreads a model with --tensor-parallel-size")
    if tensor_parallel_size < 1:
        raise ProbeError(f"--tensor-parallel-size must be positive, got {tensor_parallel_size}")
    if tensor_parallel_size > 1 and backend != "vllm":
        raise ProbeError("--tensor-parallel-size works with --backend vllm; for hf use --device-map auto")
    if backend == "vllm" and gguf_file:
        raise ProbeError("--gguf-file works with --backend hf; for vllm, save the model as a safetensors folder first")
    require_for_scoring(backend=backend)
    # checked, resolved (a Hub id to its commit) and keyed before any weights load
    ref = model_identity.locate(model, revision=revision, gguf_file=gguf_file)
    revision = ref.load_revision
    from transformers import AutoConfig, AutoTokenizer

    extra = {"gguf_file": gguf_file} if gguf_file else {}
    try:
        tokenizer = AutoTokenizer.from_pretrained(model, revision=revision, **extra)
        config = AutoConfig.from_pretrained(model, revision=revision, **extra)
        # a GGUF file is de-quantised to float32 by transformers: its config's dtype is not what loads
        weights_dtype = resolve_dtype(dtype, None if gguf_file else config)
        on = resolve_device(device)
        if device == AUTO and device_type(on) == "cpu" and (message := cpu_warning(config, model)):
            warnings.warn(message, RunnerWarning, stacklevel=2)
        if backend == "hf":
            from .hf import HFBackend

            scorer: Any = HFBackend.from_pretrained(
                model,
                revision=revision,
                dtype=weights_dtype,
                device=on,
                device_map=device_map,
                tokenizer=tokenizer,
                max_batch_tokens=max_batch_tokens,
                max_logit_rows=max_logit_rows,
                **extra,
            )
        else:
            from .vllm_backend import VLLMBackend

            if gpu_memory_utilization is None:
                gpu_memory_utilization = GPU_MEMORY_UTILIZATION.get(device_type(on), GPU_MEMORY_UTILIZATION["cuda"])
            limit = context_length.position_limit(config.to_dict())
            if needed_tokens is not None:
                needed = needed_tokens if isinstance(needed_tokens, int) else needed_tokens(tokenizer)
                max_model_len = context_length.choose_max_model_len(max_model_len, needed, limit, model)
            elif max_model_len is None:
                max_model_len = min(limit or DEFAULT_MAX_MODEL_LEN, DEFAULT_MAX_MODEL_LEN)
            scorer = VLLMBackend.from_pretrained(
                model,
                revision=revision,
                dtype=weights_dtype,
                prefix_caching=prefix_caching,
                enforce_eager=enforce_eager,
                gpu_memory_utilization=gpu_memory_utilization,
                max_model_len=max_model_len,
                block_size=block_size,
                tensor_parallel_size=tensor_parallel_size,
            )
    except ImportError as exc:
        raise ProbeError(str(exc)) from exc
    except (OSError, ValueError) as exc:
        raise ProbeError(f"cannot load model {model!r}: {exc}") from exc
    except RuntimeError as exc:
        if not is_out_of_memory(exc):
            raise
        raise ProbeError(
            f"out of memory loading {model!r} in {weights_dtype} on {on}: spread it over the GPUs with "
            "--device-map auto (hf) or --tensor-parallel-size N (vllm), or pick a smaller --dtype"
        ) from None
    try:
        ref.check_unchanged()  # weights swapped while they loaded must not be filed under the old key
    except ProbeError:
        if callable(getattr(scorer, "close", None)):
            scorer.close()
        raise
    return scorer, tokenizer, ref.revision


def load_hf(model: str, *, revision: str | None = None, dtype: str = AUTO, device: str = AUTO):
    """`load_backend(..., backend="hf")`."""
    return load_backend(model, backend="hf", revision=revision, dtype=dtype, device=device)


def needs_of(
    prompts: PromptConfig,
    settings: ScoringSettings,
    chat: bool | None,
    *,
    shard: tuple[int, int] = (0, 1),
    limit: int | None = None,
) -> Callable[[Any], int]:
    """`needed_tokens` for `load_backend`: the positions the run's longest items need, once the tokenizer is known."""

    def needed(tokenizer: Any) -> int:
        use_chat = bool(getattr(tokenizer, "chat_template", None)) if chat is None else chat
        rows = select_rows(prompts.dataset["id"], shard, limit)
        return context_length.tokens_needed(prompts.dataset, rows, tokenizer, use_chat, settings)

    return needed


def loaded_dtype(backend: Any, asked: str | None) -> str | None:
    """The dtype the model was actually loaded in (hf: the weights' dtype), else what was asked."""
    model = getattr(backend, "model", None)
    dtype = getattr(model, "dtype", None)
    if dtype is not None:
        return str(dtype).removeprefix("torch.")
    return getattr(backend, "dtype", None) or asked


def _hardware(backend: Any) -> dict[str, Any]:
    """Where the run ran: the backend's own record (dtype, device, GPU, memory settings), torch."""
    info: dict[str, Any] = {}
    if callable(getattr(backend, "hardware", None)):
        info.update(backend.hardware())
    model = getattr(backend, "model", None)
    if model is not None:
        import torch

        info.update(torch=torch.__version__, threads=torch.get_num_threads())
        info.setdefault("device", str(model.device))
        if model.device.type == "cuda":
            info.setdefault("gpu", torch.cuda.get_device_name(model.device))
    if hasattr(backend, "max_batch_tokens"):  # after any out-of-memory halving
        info["max_batch_tokens"] = backend.max_batch_tokens
    return info


def default_batch_size(backend: Any) -> int:
    """Items per backend call when `--batch-size` is not given: GPU-sized on CUDA, small on the CPU."""
    kind = device_type(str(getattr(backend, "device", None) or "cpu"))
    return ITEMS_PER_CALL.get(kind, ITEMS_PER_CALL["cuda"])


def run_config(
    prompts: PromptConfig,
    backend: Any,
    tokenizer: Any,
    results: Path,
    *,
    model_revision: str,
    model_name: str | None = None,
    settings: ScoringSettings | None = None,
    chat: bool | None = None,
    shard: tuple[int, int] = (0, 1),
    limit: int | None = None,
    batch_size: int | None = None,
    flush_every: int = 64,
    dtype: str | None = None,
    on_start: Callable[[int, int], None] | None = None,
    on_advance: Callable[[int], None] | None = None,
) -> RunSummary:
    """Score the not-yet-done items of one shard of a prompt config into `results` (see the module docstring).

    `model_name` names the model in every file written (default: the portable name of
    `backend.model_id`, see `session.model_name_for`). `chat=None` uses the chat template when the
    tokenizer has one; `batch_size=None` is `default_batch_size(backend)`. The key's dtype is
    the one the backend loaded (`dtype` is only a fallback for backends that do not say).
    `on_start(total, done)` and `on_advance(n)` report progress.
    """
    started = time.perf_counter()
    settings = settings or ScoringSettings()
    batch_size = default_batch_size(backend) if batch_size is None else batch_size
    if chat is None:
        chat = bool(getattr(tokenizer, "chat_template", None))
    check_scoring_mode(prompts, settings)
    check_chat_form(prompts, chat)
    check_number_mode(prompts, settings, tokenizer, chat)
    dtype = loaded_dtype(backend, dtype)
    name = model_name_for(backend.model_id, model_name)
    key = result_key(name, model_revision, settings, chat, dtype=dtype, backend=backend.name)
    session = Session.open(
        prompts,
        results,
        key,
        chat=chat,
        shard=shard,
        limit=limit,
        batch_size=batch_size,
        flush_every=flush_every,
        started=started,
        name_given=model_name is not None,
    )
    if on_start is not None:
        on_start(len(session.selected), len(session.selected) - len(session.todo))
    todo = session.todo
    for start in range(0, len(todo), batch_size):
        items = prompts.dataset.select(todo[start : start + batch_size]).to_list()
        try:
            rows = run_items(items, backend, tokenizer, chat, settings=settings, batch_items=batch_size)
        except ValueError as exc:
            session.flush()
            raise ProbeError(f"{prompts.path} config {prompts.config!r}: {exc}") from exc
        session.add(rows)
        if on_advance is not None:
            on_advance(len(items))
    extra = {"batch_size": batch_size, "device": getattr(backend, "device", None)}
    return session.finish(backend=backend.name, dtype=dtype, hardware=_hardware(backend), extra=extra)
