"""Benchmark (DESIGN section 8b): choice and number scoring on a GPU with a Llama-3-8B-shaped model.

Two steps, because the GPU machine has no tokenizer files, no prompt datasets and no `datasets`:

    # here: the first N single-actor items, tokenised by the project's routine, as token ids
    .venv/bin/python benchmarks/gpu_scoring.py prepare --prompts DIR --items 4096 --out requests.json
    # on the GPU machine (torch + transformers only; `src` on the path)
    python benchmarks/gpu_scoring.py measure --requests requests.json --out gpu_scoring.json

Number items (`prepare --task number --prompts DIR/intergroup-empathy-... --config
religion_P0S0T0`): the intergroup-empathy probe's 0-100 or 0-10 intensity items, tokenised as
a run tokenises them in exact mode (the digit trie's leaves as continuations, the digit tokens
as candidates; `gpu_number.py`), timed the same way. For them, tokens are each item's context
plus one token per node of its digit trie (what an exact scorer feeds when it shares nothing);
the JSON adds the positions the backend reports it computed and the MFU in `probes plan`'s
terms (its FLOPs of those positions, attention included, over the peak), and the check is a
sample's P(n) against one full forward pass per surface form (largest |probability
difference|). `corpus --out DIR` writes a crowd-enVent-format TSV of invented 20-40-word events
to build the dataset from where the real corpus is not at hand.

Where no GPU is lent, `measure --shape tiny --device cpu --dtype float32` runs the same code on a
two-layer model of the same family: a check of the script (the tests run it), not a measurement.

`measure` builds a model with Llama-3-8B's shape (32 layers, hidden 4096, 14336 MLP, 32 query
and 8 key/value heads, vocabulary 128,256, RoPE theta 500,000) and random weights in bfloat16
on the GPU (no weights to download; throughput does not depend on their values), then times the
project's transformers backend (`runners.backends.hf.backend.HFBackend.score`) on the items' (context, four
options) requests, fed `--batch-items` items per call as `probes run` does, for each
`--max-batch-tokens` budget. Token ids come from SmolLM2's tokenizer (ids < 49,152, valid in
Llama-3's vocabulary); the token counts are those of the real prompts.

Reported per budget: items/s, tokens/s and model FLOPs utilisation,
`MFU = 2 x parameters x tokens / seconds / peak`, where tokens are each item's prompt + its four
options (the tokens a KV-reusing scorer must account for; the shared-prefix pass and the
skipped last option tokens make the computed tokens fewer, so this is the useful-work rate) and
parameters are all of the model's (`n_params`; `n_params_non_embedding` is given too). Peak is
the GPU's dense bf16 specification (`--peak-tflops`, default from the device name) and, for
what this machine reaches, an 8192^3 bf16 matrix product measured in the same run. A plain
batched forward pass over the same token streams (logits of every position, no cache) gives
the ceiling, as in section 8a. A sample of items is checked against full forward passes
(float32 log-softmax of the same bf16 model): the largest log-probability difference is
reported, so a fast but wrong scorer cannot pass unnoticed.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: Llama-3-8B (meta-llama/Meta-Llama-3-8B config.json), the shape DESIGN section 8b names
LLAMA3_8B: dict[str, Any] = {
    "vocab_size": 128256,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
}
#: a few-layer model of the same family: `measure --shape tiny --device cpu` checks the script
#: itself (tests run it) where no GPU is lent; its vocabulary holds SmolLM2's token ids
TINY: dict[str, Any] = {
    **LLAMA3_8B,
    "vocab_size": 49152,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "bos_token_id": 1,
    "eos_token_id": 2,
}
SHAPES = {"llama-3-8b": ("Llama-3-8B", LLAMA3_8B), "tiny": ("tiny Llama", TINY)}
#: dense (no sparsity) bf16 peak TFLOP/s by the words of a `torch.cuda.get_device_name` (NVIDIA
#: data sheets; the sheets quote sparse figures, twice these). The first entry whose words all
#: appear in the name wins, so form factors (PCIe, NVL) come before the plain name, which is
#: the SXM part ("NVIDIA H100 80GB HBM3"). Words match whole: "L40" is not "L4", nor "L40S".
PEAK_BF16_TFLOPS: tuple[tuple[frozenset[str], float], ...] = tuple(
    (frozenset(words.split()), peak)
    for words, peak in (
        ("GH200", 989.4),
        ("H200 NVL", 835.5),
        ("H200", 989.4),
        ("H100 PCIE", 756.5),
        ("H100 NVL", 835.5),
        ("H100", 989.4),
        ("A100 PCIE", 312.0),
        ("A100 SXM4", 312.0),
        ("A100", 312.0),
        ("L40S", 362.05),
        ("L40", 181.05),
        ("L4", 121.0),
        ("A6000", 154.8),
        ("A10G", 70.0),
        ("A10", 125.0),
    )
)


def peak_bf16_tflops(device_name: str) -> float | None:
    """The dense bf16 peak of a GPU from its name (`PEAK_BF16_TFLOPS`), or None for a GPU not listed."""
    words = set(re.split(r"[\s_-]+", device_name.upper()))
    return next((peak for needed, peak in PEAK_BF16_TFLOPS if needed <= words), None)


# ----------------------------------------------------------------------------- prepare (CPU)


def prepare(args: argparse.Namespace) -> None:
    """Tokenise the first N single-actor (or number) items with the project's routine; write their token ids."""
    sys.path.insert(0, str(ROOT / "src"))
    sys.path.insert(0, str(HERE))
    from choice_scoring import DEFAULT_SOURCES, load_items
    from transformers import AutoTokenizer

    from runners.scoring.tokenize import encode_continuations
    from runners.testmodel import ensure_smollm2

    model_path = args.tokenizer or ensure_smollm2()[1]
    if args.task == "number":
        from gpu_number import prepare_number

        if args.prompts is None:
            raise SystemExit("prepare --task number needs --prompts (a built intergroup-empathy folder)")
        payload = prepare_number(args.prompts, args.config, args.items or 0, model_path)
        args.out.write_text(json.dumps(payload))
        print(f"[gpu_scoring] {len(payload['requests'])} number requests of {args.config} -> {args.out}")
        return
    work = args.out.parent
    items, source = load_items(args.prompts, args.sources or DEFAULT_SOURCES, args.items or 4096, work)
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    requests = []
    for item in items:
        context, continuations = encode_continuations(tokenizer, item["prompt"], item["choices"])
        requests.append({"id": item["id"], "context": list(context), "continuations": [list(c) for c in continuations]})
    payload = {"task": "choice", "source": source, "tokenizer": str(model_path), "requests": requests}
    args.out.write_text(json.dumps(payload))
    print(f"[gpu_scoring] {len(requests)} requests -> {args.out}")


# ----------------------------------------------------------------------------- measure (GPU)


def build_model(shape: dict[str, Any], dtype: str, device: str) -> Any:
    """A causal LM of `shape` with random weights, built directly on `device`."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(**shape)
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    return model.eval()


def synchronize(device: str) -> None:
    """Wait for the device's queued work (a no-op on the CPU, which runs eagerly)."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def matmul_tflops(n: int = 8192, repeats: int = 10) -> float:
    """TFLOP/s of an n^3 bf16 matrix product (mean of `repeats` after warm-up): the reachable peak."""
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    torch.cuda.synchronize()
    return 2 * n**3 * repeats / (time.perf_counter() - start) / 1e12


def time_backend(
    backend: Any, requests: list[Any], batch_items: int, warmup: int, device: str
) -> tuple[float, list[Any]]:
    """(seconds, results) of scoring every request, `batch_items` per `score` call, after a warm-up."""
    if warmup:
        backend.score(requests[:warmup])
    synchronize(device)
    start = time.perf_counter()
    results = []
    for begin in range(0, len(requests), batch_items):
        results.extend(backend.score(requests[begin : begin + batch_items]))
    synchronize(device)  # results are on the CPU already; this only makes the point explicit
    return time.perf_counter() - start, results


def check_against_full_forward(model: Any, requests: list[Any], results: list[Any], device: str) -> float:
    """Largest |log-probability difference| between the backend and full forward passes (float32 log-softmax)."""
    import torch

    worst = 0.0
    with torch.inference_mode():
        for request, result in zip(requests, results, strict=True):
            for cont, score in zip(request.continuations, result.continuations, strict=True):
                ids = torch.tensor([list(request.context) + list(cont)], device=device)
                logits = model(input_ids=ids, use_cache=False).logits[0].float()
                n = len(request.context)
                lp = torch.log_softmax(logits[n - 1 : n - 1 + len(cont)], dim=-1)
                ref = lp[torch.arange(len(cont)), torch.tensor(cont, device=device)].double().cpu().numpy()
                worst = max(worst, float(abs(ref - score.token_logprobs).max()))
    return worst


def measure(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    import torch
    import transformers

    sys.path.insert(0, str(HERE))
    from choice_scoring import ceiling

    from runners.backends.hf.backend import HFBackend
    from runners.exchange import ScoreRequest

    device = args.device
    on_gpu = device.startswith("cuda")
    if on_gpu and not torch.cuda.is_available():
        raise SystemExit("measure needs a CUDA GPU (torch.cuda.is_available() is False); --device cpu tests the script")
    shape_name, shape = SHAPES[args.shape]
    payload = json.loads(args.requests.read_text())
    number = payload.get("task", "choice") == "number"
    if number:
        import gpu_number

        requests = gpu_number.number_requests(payload)
    else:
        requests = [
            ScoreRequest(tuple(r["context"]), tuple(tuple(c) for c in r["continuations"])) for r in payload["requests"]
        ]
    requests = requests[: args.items] if args.items else requests
    if number:
        streams = gpu_number.number_streams(requests)
    else:
        streams = [list(r.context) + [t for c in r.continuations for t in c] for r in requests]
    tokens = sum(len(s) for s in streams)
    device_name = torch.cuda.get_device_name(0) if on_gpu else platform.processor() or platform.machine()
    peak = args.peak_tflops or (peak_bf16_tflops(device_name) if on_gpu else None)
    reachable = matmul_tflops() if on_gpu else None  # an 8192^3 product is minutes on a CPU: not measured there
    print(f"[gpu_scoring] {device_name}: bf16 8192^3 matmul {reachable} TFLOP/s; spec peak {peak}", flush=True)

    started = time.perf_counter()
    model = build_model(shape, args.dtype, device)
    n_params = sum(p.numel() for p in model.parameters())
    n_embed = model.get_input_embeddings().weight.numel()
    print(f"[gpu_scoring] model built in {time.perf_counter() - started:.0f} s: {n_params / 1e9:.2f} B parameters")

    def rates(seconds: float) -> dict[str, Any]:
        flops = 2 * n_params * tokens / seconds
        return {
            "wall_s": seconds,
            "items_per_s": len(requests) / seconds,
            "tokens_per_s": tokens / seconds,
            "tflops": flops / 1e12,
            "mfu_vs_spec_peak": flops / (peak * 1e12) if peak else None,
            "mfu_vs_measured_matmul": flops / (reachable * 1e12) if reachable else None,
        }

    mean_context = sum(len(r.context) for r in requests) / len(requests)

    def computed_rates(seconds: float, results: list[Any]) -> dict[str, Any]:
        """The positions the backend says it computed, and the MFU of `probes plan`'s FLOPs of them."""
        computed = sum(r.computed_tokens for r in results)
        flops = gpu_number.plan_flops(n_params, shape, computed, mean_context) / seconds
        return {
            "computed_tokens": computed,
            "computed_tokens_per_item": computed / len(results),
            "computed_tokens_per_s": computed / seconds,
            "mfu_plan_terms": flops / (peak * 1e12) if peak else None,
            "mfu_plan_terms_vs_measured_matmul": flops / (reachable * 1e12) if reachable else None,
        }

    sweep: dict[str, Any] = {}
    results = None
    settings = {}  # sweep key -> (token budget, logit rows); keyed by the budget alone when one rows value is swept
    for rows in args.max_logit_rows:
        for budget in args.max_batch_tokens:
            settings[str(budget) if len(args.max_logit_rows) == 1 else f"{budget}/{rows}"] = (budget, rows)
    for key, (budget, rows) in settings.items():
        backend = HFBackend(model, model_id=f"{args.shape}-shape-random", max_batch_tokens=budget, max_logit_rows=rows)
        if on_gpu:
            torch.cuda.reset_peak_memory_stats()
        seconds, results = time_backend(backend, requests, args.batch_items, args.warmup, device)
        sweep[key] = {
            **rates(seconds),
            **(computed_rates(seconds, results) if number else {}),
            **({} if len(args.max_logit_rows) == 1 else {"max_batch_tokens": budget, "max_logit_rows": rows}),
            "max_batch_tokens_after_backoff": backend.max_batch_tokens,
            "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if on_gpu else None,
        }
        print(f"[gpu_scoring] budget {key}: {json.dumps(sweep[key])}", flush=True)
    best = max(sweep, key=lambda k: sweep[k]["items_per_s"])

    sweep_ceiling, _ = ceiling(model, streams, args.ceiling_batch_sizes, pad_id=0)  # section 8a's ceiling
    ceilings = {size: point["tokens_per_s"] for size, point in sweep_ceiling.items()}
    best_ceiling = max(ceilings.values())
    print(f"[gpu_scoring] ceiling tokens/s by batch size: {ceilings}", flush=True)
    sample = args.check_items
    if number:
        check = gpu_number.check_against_bruteforce(model, payload, results, sample)
        print(f"[gpu_scoring] against brute force: {check}", flush=True)
    else:
        worst = check_against_full_forward(model, requests[:sample], results[:sample], device) if results else None
        check = {"max_abs_logprob_diff_vs_full_forward": worst, "checked_items": sample}

    out = {
        "benchmark": "gpu_scoring",
        "design_section": "8b",
        "model": {
            "shape": shape_name,
            "config": shape,
            "weights": "random (torch.manual_seed(0), transformers' init)",
            "dtype": args.dtype,
            "n_params": n_params,
            "n_params_non_embedding": n_params - n_embed,
        },
        "task": "number" if number else "choice",
        "items": len(requests),
        "item_source": payload.get("source"),
        "token_ids_from": payload.get("tokenizer"),
        "mean_tokens_per_item": tokens / len(requests),
        "mean_context_tokens": mean_context,
        **(_number_fields(payload, requests, streams) if number else {}),
        "batch_items": args.batch_items,
        "max_logit_rows": args.max_logit_rows[0] if len(args.max_logit_rows) == 1 else args.max_logit_rows,
        "warmup_items": args.warmup,
        "hf": {
            **sweep[best],
            "best_max_batch_tokens": settings[best][0],
            **({} if len(args.max_logit_rows) == 1 else {"best_max_logit_rows": settings[best][1]}),
            "sweep": sweep,
        },
        "ceiling": {
            "method": "plain forward (all logits, use_cache=False) over "
            + ("context + one token per trie node" if number else "prompt + 4 options")
            + ", length-sorted batches",
            "tokens_per_s_by_batch_size": ceilings,
            "items_per_s": best_ceiling / (tokens / len(requests)),
            **{k: v for k, v in rates(tokens / best_ceiling).items() if k.startswith("mfu") or k == "tflops"},
        },
        "fraction_of_ceiling": sweep[best]["tokens_per_s"] / best_ceiling,
        **check,
        "mfu_definition": "2 x n_params x ("
        + ("context + digit-trie node tokens" if number else "prompt + option tokens")
        + ") / seconds / peak",
        "peak_tflops_spec": peak,
        "peak_tflops_measured_matmul_8192": reachable,
        "machine": {
            "device": device,
            "gpu": device_name if on_gpu else None,
            "cpu": None if on_gpu else device_name,
            "cuda": torch.version.cuda,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    hf = out["hf"]
    if number:
        plan_terms = (
            f"; computed {hf['computed_tokens_per_item']:.1f}/item, plan-terms MFU {_fraction(hf['mfu_plan_terms'])}"
        )
        worst = f"max |dP(n)| {check['max_abs_prob_diff_vs_bruteforce']}"
    else:
        plan_terms, worst = "", f"max |dlogprob| {check['max_abs_logprob_diff_vs_full_forward']}"
    print(
        f"hf {hf['items_per_s']:.1f} items/s, {hf['tokens_per_s']:.0f} tokens/s, "
        f"MFU {_fraction(hf['mfu_vs_spec_peak'])} (spec) / "
        f"{_fraction(hf['mfu_vs_measured_matmul'])} (measured matmul){plan_terms}; "
        f"fraction of ceiling {out['fraction_of_ceiling']:.2f}; {worst} -> {args.out}"
    )


def _number_fields(payload: dict[str, Any], requests: list[Any], streams: list[list[int]]) -> dict[str, Any]:
    """What a number run's JSON says of its items: range, mode, trie size per item."""
    ranges = sorted(
        {(min(int(n) for n, _ in r["paths"]), max(int(n) for n, _ in r["paths"])) for r in payload["requests"]}
    )
    return {
        "number_ranges": [list(r) for r in ranges],
        "number_mode": payload.get("number_mode"),
        "number_prefixes": payload.get("number_prefixes"),
        "digit_candidates": len(payload["candidates"]),
        "mean_trie_leaves": sum(len(r.continuations) for r in requests) / len(requests),
        "mean_trie_nodes": sum(len(s) - len(r.context) for s, r in zip(streams, requests, strict=True)) / len(requests),
    }


def _fraction(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prepare", help="tokenise single-actor or number items into a requests JSON (CPU)")
    p.add_argument("--task", choices=("choice", "number"), default="choice", help="single-actor or number items")
    p.add_argument(
        "--prompts",
        type=Path,
        default=None,
        help="a built talent-or-luck (else it is built) or intergroup-empathy folder",
    )
    p.add_argument("--config", default="religion_P0S0T0", help="the number items' config (--task number)")
    p.add_argument("--sources", type=Path, default=None, help="sources for the build (default ../shared/sources)")
    p.add_argument("--tokenizer", type=Path, default=None, help="tokenizer folder (default: the SmolLM2 test model)")
    p.add_argument("--items", type=int, default=None, help="first N items (default: 4096 choice, all number items)")
    p.add_argument("--out", type=Path, required=True, help="requests JSON to write")
    m = sub.add_parser("measure", help="time the hf backend with a Llama-3-8B-shaped model on a GPU")
    m.add_argument("--requests", type=Path, required=True, help="the JSON written by `prepare`")
    m.add_argument("--out", type=Path, required=True, help="JSON file to write")
    m.add_argument("--items", type=int, default=0, help="use only the first N requests (0: all)")
    m.add_argument("--dtype", default="bfloat16", help="model dtype")
    m.add_argument("--device", default="cuda", help="torch device (cpu with --shape tiny checks the script)")
    m.add_argument("--shape", choices=sorted(SHAPES), default="llama-3-8b", help="model shape (random weights)")
    m.add_argument(
        "--max-batch-tokens",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[16384, 65536, 262144],
        help="comma-separated token budgets to sweep (HFBackend max_batch_tokens)",
    )
    m.add_argument(
        "--max-logit-rows",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[4096],
        help="HFBackend max_logit_rows (rows x fed positions per pass); several (comma-separated): swept with "
        "each budget, and the sweep's keys are BUDGET/ROWS",
    )
    m.add_argument("--batch-items", type=int, default=1024, help="items per backend.score call")
    m.add_argument("--warmup", type=int, default=64, help="untimed warm-up items per budget")
    m.add_argument(
        "--ceiling-batch-sizes",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[32, 128],
        help="comma-separated batch sizes of the ceiling",
    )
    m.add_argument("--check-items", type=int, default=16, help="items checked against full forward passes")
    m.add_argument("--peak-tflops", type=float, default=None, help="dense bf16 peak (default: from the device name)")
    c = sub.add_parser("corpus", help="write a crowd-enVent-format TSV of invented 20-40-word events (CPU)")
    c.add_argument("--out", type=Path, required=True, help="sources folder (DIR/crowd-envent/corpus/...tsv)")
    c.add_argument("--events-per-emotion", type=int, default=25, help="events per emotion label (12 labels)")
    args = parser.parse_args()
    {"prepare": prepare, "measure": measure, "corpus": corpus}[args.step](args)


def corpus(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT / "src"))  # the corpus writer is the project's (`promptgen.empathy.synthetic`)
    sys.path.insert(0, str(HERE))
    from gpu_number import write_event_corpus

    print(f"[gpu_scoring] {write_event_corpus(args.out, args.events_per_emotion)}")


if __name__ == "__main__":
    main()
