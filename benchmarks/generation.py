"""Benchmark: `probes run`'s greedy generation (the empathy paper's protocol) against the engine's own call.

    python benchmarks/generation.py --out benchmarks/results/generation_cpu2.json   # 64 items, 3 repeats
    python benchmarks/generation.py --prompts DIR/intergroup-empathy-religion_P0S0T0 --config religion_P0S0T0 \\
        --items 64 --repeats 3 --backends hf vllm --model MODEL --out g.json

The empathy probe scores by generation: the chat template, greedy decoding of at most 128 new
tokens, stopping at EOS or the end of the turn, the answer read by a number parser (the config's
protocol in the dataset's build manifest; no scoring setting is overridden here). On the first
`--items` items of `--config` in the config's own order (perceiver, experiencer, event: every item
its own narrative), per backend (`hf`, `vllm`), with one model (default SmolLM2-135M-Instruct,
float32, `runners.testmodel.ensure_smollm2`):

1. `run_public`: `runners.run.runner.run` (what `probes run` calls) into a fresh results folder, timed end
   to end: the model or engine load included (`wall_s`), and the summary's own scoring rate.
2. The model is then loaded once the way `run` loads it (`runners.backends.load.load_backend`, vLLM's
   context sized by `runners.run.sizing.needs_of`), warmed up on two items, and on that one
   backend, `--repeats` times in turn (the vLLM prefix cache emptied before each timed pass):
   - `run`: `runners.run.runner.Runner.run` (what `run` calls once the model is loaded) into a fresh results
     folder, timed around the call: the run's whole work without the load (session, tokenisation,
     generation, result rows, parts, compaction, manifest and card). `backend_generate_s` is the
     time inside the backend's `generate`, the rest is `other_s`;
   - `engine`: the engine's own generate call on the same token ids the run built
     (`runners.rows.generation_request`, in the run's batches of `default_batch_size` items), timed
     alone: for `hf`, `model.generate` on the batches `runners.backends.hf.generate` makes (grouped,
     sorted by length, cut by the token budget, left-padded) with the same `GenerationConfig`
     fields; for `vllm`, `LLM.generate` on `TokensPrompt`s with the backend's `SamplingParams`.
   The best pass of each is reported, with each pass's `passes_other_cpu_share` (CPU time other
   processes took during it, over all cores: `OtherLoad`) and `machine.busy` summing those up.
3. `parse`: the engine's texts read by the protocol's number parser (`runners.scoring.parse.read_number`),
   timed per item, with how many parsed and whether the run's rows hold the same value and status;
   `parse_other`: the project's other number parser on the same texts, for reference.

`run_over_engine` = run items/s / engine items/s, both without the load (the target: >= 0.9 on
both backends); `texts_equal`: every item's `generated_text` in both run folders equals the engine
call's text, decoded as the backend decodes it (the results keep no token ids). Run it alone: two
busy cores slow every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

# what the tests give vLLM on the CPU (tests/conftest.py): 1 GiB of KV cache, not vLLM's default
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

TARGET_RATIO = 0.9
#: where the default prompt folder is built once (and found again)
DEFAULT_BUILD = Path(tempfile.gettempdir()) / "gen_bench_ds"
DEFAULT_SOURCES = Path(__file__).resolve().parents[2] / "shared" / "sources"


def build_prompts(out: Path, sources: Path, config: str) -> Path:
    """One config of `intergroup-empathy` built from the release's narratives under `sources` (about 15 s)."""
    from promptgen.build import build

    return build("intergroup-empathy", out_dir=out, sources=sources, configs=[config]).path


def resolve(prompts: Path, config: str, model: str, results: Path, backend: str, items: int) -> tuple[Any, Any]:
    """(config rows, request) as `run` resolves them: the dataset's protocol, the first `items` rows."""
    from runners.run.request import LoadOptions, RunRequest
    from runners.run.runner import resolve_protocol

    request = RunRequest(prompts, config, model, results, load=LoadOptions(backend=backend), limit=items)
    resolved = resolve_protocol(request)
    return resolved.prompts, resolved.request


def load_like_run(rows: Any, request: Any) -> Any:
    """The loaded model (`load.LoadedModel`: backend, tokenizer, key revision, config), loaded exactly as
    `run.Runner.load` loads it."""
    from runners.backends import backend_spec, load
    from runners.run.sizing import needs_of

    needed = None
    if backend_spec(request.load.backend).sizes_context:
        needed = needs_of(rows, request.settings, request.chat, rows=request.selection)
    return load.load_backend(request.model, request.load, needed_tokens=needed)


def run_requests(rows: Any, request: Any, backend: Any, tokenizer: Any) -> tuple[list[dict], list[list[Any]], bool]:
    """The run's items and its generation requests, in the run's backend calls (`local_driver.run_config`)."""
    from runners.model.device import default_batch_size
    from runners.prompts import chat_for, rows_of
    from runners.rows import generation_request

    chat = chat_for(tokenizer, request.chat)
    chosen = rows_of(rows, request.selection).rows
    items = rows.dataset.select(chosen).to_list()
    batch = default_batch_size(backend.device) if request.batch_size is None else request.batch_size
    calls = [
        [generation_request(item, tokenizer, chat, request.settings) for item in items[start : start + batch]]
        for start in range(0, len(items), batch)
    ]
    return items, calls, chat


# ----------------------------------------------------------------------------- the engines' own calls


def hf_engine(backend: Any, calls: list[list[Any]]) -> tuple[float, list[tuple[str, tuple[int, ...]]]]:
    """`model.generate` on the batches `runners.backends.hf.generate` makes; (seconds in generate, outputs)."""
    import torch
    from transformers import GenerationConfig

    from runners.scoring.token_accounting import budget_chunks

    model, tokenizer, budget = backend.model, backend.tokenizer, backend.max_batch_tokens
    eos = model.generation_config.eos_token_id
    eos = tokenizer.eos_token_id if eos is None else eos
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    pad = 0 if pad is None else pad if isinstance(pad, int) else pad[0]
    seconds = 0.0
    out: list[tuple[str, tuple[int, ...]]] = []
    for requests in calls:
        groups: dict[tuple, list[int]] = {}
        for i, r in enumerate(requests):
            assert r.temperature == 0, "the paper's protocol is greedy"
            groups.setdefault((r.max_tokens, r.stop, r.stop_token_ids), []).append(i)
        texts: list[Any] = [None] * len(requests)
        for (max_tokens, stop, stop_ids), members in groups.items():
            members.sort(key=lambda i: len(requests[i].context))
            base = [eos] if isinstance(eos, int) else list(eos or ())
            stops = list(dict.fromkeys([*base, *stop_ids])) if stop_ids else eos
            config = GenerationConfig(
                max_new_tokens=max_tokens,
                min_new_tokens=0,
                do_sample=False,
                temperature=1.0,
                top_p=1.0,
                top_k=0,
                min_p=None,
                num_beams=1,
                repetition_penalty=1.0,
                no_repeat_ngram_size=0,
                eos_token_id=stops,
                pad_token_id=pad,
                stop_strings=list(stop) or None,
            )
            stop_set = set(stops) if isinstance(stops, list) else {stops}
            cost = lambda i, rs=requests, m=max_tokens: len(rs[i].context) + m  # noqa: E731 - the backend's cost
            for chunk in budget_chunks(members, cost, budget):
                width = max(len(requests[i].context) for i in chunk)
                ids = torch.full((len(chunk), width), pad, dtype=torch.long)
                mask = torch.zeros((len(chunk), width), dtype=torch.long)
                for b, i in enumerate(chunk):
                    n = len(requests[i].context)
                    ids[b, width - n :] = torch.tensor(requests[i].context)
                    mask[b, width - n :] = 1
                with torch.inference_mode():
                    started = time.perf_counter()
                    rows = model.generate(
                        input_ids=ids, attention_mask=mask, generation_config=config, tokenizer=tokenizer
                    )
                    seconds += time.perf_counter() - started
                for i, new in zip(chunk, rows[:, width:].tolist(), strict=True):
                    # the tokens the model produced: up to and including the first stop id
                    end = next((k for k, t in enumerate(new) if t in stop_set), None)
                    made = new[: end + 1] if end is not None else new
                    shown = made[:-1] if end is not None else made
                    texts[i] = (tokenizer.decode(shown, skip_special_tokens=True), tuple(made))
        out.extend(texts)
    return seconds, out


def vllm_engine(backend: Any, calls: list[list[Any]]) -> tuple[float, list[tuple[str, tuple[int, ...]]]]:
    """`LLM.generate` on `TokensPrompt`s with the backend's `SamplingParams`; (seconds in generate, outputs)."""
    from vllm.inputs import TokensPrompt

    seconds = 0.0
    out: list[tuple[str, tuple[int, ...]]] = []
    for requests in calls:
        params = [backend.generate_params(r) for r in requests]
        prompts = [TokensPrompt(prompt_token_ids=list(r.context)) for r in requests]
        started = time.perf_counter()
        outputs = backend.llm.generate(prompts, params, use_tqdm=False)
        seconds += time.perf_counter() - started
        out.extend((o.outputs[0].text, tuple(o.outputs[0].token_ids)) for o in outputs)
    return seconds, out


# ----------------------------------------------------------------------------- the run


def run_rows(key_dir: Path) -> dict[str, dict[str, Any]]:
    """{item id: its generated_text, parsed_value and parse_status} of a run's key folder."""
    from runners.results.parts import read_key_rows

    table = read_key_rows(key_dir, ["id", "generated_text", "parsed_value", "parse_status"]).to_pylist()
    return {
        row["id"]: {"text": row["generated_text"], "value": row["parsed_value"], "status": row["parse_status"]}
        for row in table
    }


def time_public_run(prompts: Path, config: str, model: str, results: Path, backend: str, items: int) -> dict:
    """`runners.run.runner.run` as a user calls it: the load included."""
    from runners.run.request import LoadOptions
    from runners.run.runner import run

    started = time.perf_counter()
    summary = run(prompts, config, model, results, load=LoadOptions(backend=backend), limit=items)
    wall = time.perf_counter() - started
    return {
        "summary": summary,
        "wall_s": round(wall, 3),
        "items_per_s_with_load": summary.items / wall,
        "summary_items_per_s": summary.items_per_s,
        "summary_wall_s": round(summary.wall_s, 3),
        "protocol": summary.protocol,
    }


def time_loaded_run(rows: Any, request: Any, backend: Any, tokenizer: Any, revision: str) -> dict:
    """`runners.run.runner.Runner.run` on the loaded backend (what `run` does after the load), with its generate
    time."""
    from runners.run.runner import Runner

    inner = backend.generate
    spent = [0.0]

    def timed(requests: Any) -> Any:
        started = time.perf_counter()
        try:
            return inner(requests)
        finally:
            spent[0] += time.perf_counter() - started

    backend.generate = timed
    try:
        started = time.perf_counter()
        summary = Runner(request.model, request.load, backend, tokenizer, revision).run(rows, request)
        wall = time.perf_counter() - started
    finally:
        del backend.generate
    return {
        "summary": summary,
        "seconds": wall,
        "backend_generate_s": spent[0],
        "other_s": wall - spent[0],
        "summary_items_per_s": summary.items_per_s,
    }


class OtherLoad:
    """CPU time other processes took while a pass ran: the machine's busy time minus this process tree's.

    `share` is that over the pass's wall time and every core: 0 on a quiet machine; vLLM's engine
    runs in a child process, which counts as this tree's.
    """

    def __enter__(self) -> OtherLoad:
        self.started, self.busy, self.mine = time.perf_counter(), self._busy(), self._mine()
        return self

    def __exit__(self, *exc: object) -> None:
        wall = time.perf_counter() - self.started
        self.other_s = max(0.0, (self._busy() - self.busy) - (self._mine() - self.mine))
        self.share = self.other_s / (wall * (os.cpu_count() or 1)) if wall > 0 else 0.0

    @staticmethod
    def _busy() -> float:
        import psutil

        t = psutil.cpu_times()
        return sum(t) - t.idle - getattr(t, "iowait", 0.0)

    @staticmethod
    def _mine() -> float:
        import psutil

        me = psutil.Process()
        total = 0.0
        for proc in [me, *me.children(recursive=True)]:
            try:
                t = proc.cpu_times()
            except psutil.Error:
                continue
            total += t.user + t.system
        return total


def profile_run(rows: Any, request: Any, backend: Any, tokenizer: Any, revision: str, top: int = 25) -> list[str]:
    """cProfile of one `Runner.run` pass: the top functions by cumulative time (lines of pstats' table)."""
    import cProfile
    import io
    import pstats

    from runners.run.runner import Runner

    profiler = cProfile.Profile()
    profiler.enable()
    Runner(request.model, request.load, backend, tokenizer, revision).run(rows, request)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(top)
    return [line for line in text.getvalue().splitlines() if line.strip()][-top - 1 :]


def time_parse(
    texts: list[str], items: list[dict], parser: str, written: dict[str, Any] | None = None, rounds: int = 200
) -> dict:
    """A number parser over the engine's texts: per-item time, how many parsed, and (given the run's rows,
    `written`) on how many items the run wrote the same value and status."""
    from runners.scoring.parse import read_number

    results = [read_number(t, it["number_min"], it["number_max"], parser) for t, it in zip(texts, items, strict=True)]
    started = time.perf_counter()
    for _ in range(rounds):
        for t, it in zip(texts, items, strict=True):
            read_number(t, it["number_min"], it["number_max"], parser)
    per_item = (time.perf_counter() - started) / (rounds * len(texts))
    statuses: dict[str, int] = {}
    for _, status in results:
        statuses[status] = statuses.get(status, 0) + 1
    out = {
        "parser": parser,
        "us_per_item": round(per_item * 1e6, 2),
        "parsed": statuses.get("ok", 0),
        "of": len(texts),
        "statuses": statuses,
    }
    if written is not None:
        same = [
            written.get(str(it["id"]), {}) == {"value": v, "status": st}
            for it, (v, st) in zip(items, results, strict=True)
        ]
        out["same_as_run_rows"] = sum(same)
    return out


def other_parser(parser: str) -> str:
    """The project's number parser that the protocol does not use (`runners.scoring.parse.NUMBER_PARSERS`)."""
    from runners.scoring.parse import NUMBER_PARSERS

    return next(p for p in NUMBER_PARSERS if p != parser)


def reset_cache(backend: Any) -> None:
    """Empty vLLM's prefix cache so a timed pass computes every prompt (the hf backend keeps none)."""
    llm = getattr(backend, "llm", None)
    if llm is not None and not llm.reset_prefix_cache():
        raise RuntimeError("vLLM did not reset its prefix cache")


def bench_backend(args: argparse.Namespace, name: str, work: Path) -> dict[str, Any]:
    with OtherLoad() as public_load:
        public = time_public_run(args.prompts, args.config, args.model, work / f"{name}-public", name, args.items)
    rows, request = resolve(args.prompts, args.config, args.model, work / f"{name}-loaded-0", name, args.items)
    started = time.perf_counter()
    backend, tokenizer, revision, _ = load_like_run(rows, request)
    load_s = time.perf_counter() - started
    try:
        items, calls, chat = run_requests(rows, request, backend, tokenizer)
        engine = hf_engine if name == "hf" else vllm_engine
        warm = [calls[0][:2]]
        started = time.perf_counter()
        engine(backend, warm)  # the first calls' one-time costs, paid by neither timed path
        warm_s = time.perf_counter() - started
        runs, engines = [], []
        loads: dict[str, list[float]] = {"run": [], "engine": []}
        for k in range(args.repeats):
            folder = replace(request, results=work / f"{name}-loaded-{k}")
            # alternate which path goes first, so neither always follows the other
            for path in ("run", "engine") if k % 2 == 0 else ("engine", "run"):
                reset_cache(backend)
                with OtherLoad() as other:
                    if path == "run":
                        runs.append(time_loaded_run(rows, folder, backend, tokenizer, revision))
                    else:
                        engines.append(engine(backend, calls))
                loads[path].append(round(other.share, 3))
        profile = None
        if args.profile:
            reset_cache(backend)
            profile = profile_run(
                rows, replace(request, results=work / f"{name}-profile"), backend, tokenizer, revision
            )
        hardware = backend.hardware()
    finally:
        backend.close()
    n = len(items)
    best_run = min(runs, key=lambda r: r["seconds"])
    best_engine_s, outputs = min(engines, key=lambda e: e[0])
    texts = [text for text, _ in outputs]
    generated = [len(ids) for _, ids in outputs]
    ids = [str(it["id"]) for it in items]
    equal = {}
    for label, key_dir in [("run_public", public["summary"].key_dir)] + [
        (f"run_{k}", r["summary"].key_dir) for k, r in enumerate(runs)
    ]:
        written = run_rows(key_dir)
        equal[label] = sum(written.get(i, {}).get("text") == t for i, t in zip(ids, texts, strict=True))
    engine_passes_equal = all([t for t, _ in e[1]] == texts for e in engines)
    run_rate = n / best_run["seconds"]
    engine_rate = n / best_engine_s
    first = [s for s in (len(r.context) for call in calls for r in call)]
    summary = public.pop("summary")
    return {
        "items": n,
        "chat": chat,
        "protocol": summary.protocol,
        "scoring": json.loads(summary.key.scoring),
        "batch_items": len(calls[0]),
        "engine_settings": hardware,
        "prompt_tokens_per_item": round(statistics.fmean(first), 1),
        "generated_tokens_per_item": round(statistics.fmean(generated), 1),
        "generated_tokens_max": max(generated),
        "hit_max_new_tokens": sum(g >= calls[0][0].max_tokens for g in generated),
        "load_s": round(load_s, 2),
        "warmup_s": round(warm_s, 2),
        "run": {
            "items_per_s": round(run_rate, 3),
            "seconds": round(best_run["seconds"], 3),
            "backend_generate_s": round(best_run["backend_generate_s"], 3),
            "other_s": round(best_run["other_s"], 3),
            "summary_items_per_s": round(best_run["summary_items_per_s"], 3),
            "passes_s": [round(r["seconds"], 3) for r in runs],
            "passes_other_cpu_share": loads["run"],
        },
        "engine": {
            "items_per_s": round(engine_rate, 3),
            "seconds": round(best_engine_s, 3),
            "generated_tokens_per_s": round(sum(generated) / best_engine_s, 1),
            "passes_s": [round(e[0], 3) for e in engines],
            "passes_other_cpu_share": loads["engine"],
        },
        "run_over_engine": round(run_rate / engine_rate, 4),
        # each repeat's run against its own engine pass (the two ran back to back)
        "paired_run_over_engine": [round(e[0] / r["seconds"], 4) for r, e in zip(runs, engines, strict=True)],
        "run_public": {
            "wall_s_with_load": public["wall_s"],
            "items_per_s_with_load": round(public["items_per_s_with_load"], 3),
            "summary_items_per_s": round(public["summary_items_per_s"], 3),
            "summary_wall_s": public["summary_wall_s"],
            "over_engine_with_load": round(public["items_per_s_with_load"] / engine_rate, 4),
            "other_cpu_share": round(public_load.share, 3),
        },
        "texts_equal_items": equal,
        "engine_passes_equal": engine_passes_equal,
        "texts_equal": all(v == n for v in equal.values()) and engine_passes_equal,
        "parse": time_parse(
            texts,
            items,
            request.settings.number_parser,
            {i: {"value": r["value"], "status": r["status"]} for i, r in written.items()},
        ),
        # the project's other number parser, on the same texts (for reference; not the protocol's)
        "parse_other": time_parse(texts, items, other_parser(request.settings.number_parser)),
        "example_texts": texts[:3],
        **({"profile_top_cumulative": profile} if profile else {}),
    }


def busy_note(results: dict[str, Any]) -> str:
    """How busy other processes kept the machine during the timed passes (`passes_other_cpu_share`)."""
    parts = []
    for name, r in results.items():
        for path in ("run", "engine"):
            shares = r[path]["passes_other_cpu_share"]
            best = r[path]["passes_s"].index(min(r[path]["passes_s"]))
            parts.append(f"{name} {path}: {min(shares):.2f}-{max(shares):.2f}, best pass {shares[best]:.2f}")
    quiet = all(max(r[p]["passes_other_cpu_share"]) < 0.1 for r in results.values() for p in ("run", "engine"))
    head = "quiet" if quiet else "busy: other processes took this share of all cores during the timed passes"
    return f"{head} ({'; '.join(parts)})"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=Path, help="an intergroup-empathy prompt folder (default: built once)")
    parser.add_argument("--sources", type=Path, default=DEFAULT_SOURCES, help="the release's files, to build one")
    parser.add_argument("--config", default="religion_P0S0T0")
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--backends", nargs="+", choices=("hf", "vllm"), default=["hf", "vllm"])
    parser.add_argument("--model", help="a model folder or Hub id (default: SmolLM2-135M-Instruct, float32)")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes of each path on the loaded model")
    parser.add_argument("--profile", action="store_true", help="also cProfile one run pass per backend")
    parser.add_argument("--work", type=Path, help="where the results folders go (default: a temp folder)")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = parser.parse_args(argv)

    if args.model is None:
        from runners.testmodel import ensure_smollm2

        args.model = str(ensure_smollm2()[1])
    if args.prompts is None:
        built = sorted(DEFAULT_BUILD.glob(f"*{args.config}*/build_manifest.json"))
        args.prompts = built[0].parent if built else build_prompts(DEFAULT_BUILD, args.sources, args.config)
    load_before = os.getloadavg()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="gen-bench-") as tmp:
        work = args.work or Path(tmp)
        for name in args.backends:
            results[name] = bench_backend(args, name, work)
    load_after = os.getloadavg()
    meets = all(r["run_over_engine"] >= TARGET_RATIO and r["texts_equal"] for r in results.values())
    import torch
    import transformers

    versions = {"torch": torch.__version__, "transformers": transformers.__version__}
    if "vllm" in results:
        import vllm

        versions["vllm"] = vllm.__version__
    out = {
        "benchmark": "generation",
        # names only: a published JSON holds no local path
        "prompts": Path(args.prompts).name,
        "config": args.config,
        "model": Path(args.model).parent.name if Path(args.model).name == "hf" else Path(args.model).name,
        "items": args.items,
        "repeats": args.repeats,
        "target": f"run_over_engine >= {TARGET_RATIO} on every backend (load excluded), texts equal (greedy)",
        "meets_targets": meets,
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "loadavg_after": [round(x, 2) for x in load_after],
            "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE"),
            **versions,
            "busy": busy_note(results),
        },
        "backends": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    sys.exit(0 if main()["meets_targets"] else 1)
