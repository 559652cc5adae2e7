"""Peer 2 of `benchmarks/choice_scoring.py`: lm-evaluation-harness 0.4.13, `HFLM.loglikelihood`, at its best batch size.

Each item becomes four `loglikelihood` requests `(prompt, option)`, all sent in ONE call (the
harness sorts and batches requests itself, as it does for a task). `HFLM` is built from the
model folder (`dtype="float32"`, `device="cpu"`); the batch size is then swept over
`--batch-sizes` on the first `--sweep-items` items, and the full item list is timed once at
the best of them. Load time is not timed, and one untimed warm-up call runs before each
timing.

The harness moves the context's trailing whitespace (here the prompt's final newline) into the
continuation, so every option's log-probability also includes that newline token. The same term
is added to all four options, so the softmax over options is unchanged whenever the newline is a
token of its own; the benchmark still reports the difference from `cappr` separately.
"""

from __future__ import annotations

from _common import Timer, base_parser, environment, load_items, pin_threads, token_agreement, write


def main() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--batch-sizes", default="1,4,8,16,32", help="comma-separated batch sizes to sweep")
    parser.add_argument("--sweep-items", type=int, default=48, help="items used to pick the best batch size")
    args = parser.parse_args()
    pin_threads(args.threads)
    from importlib.metadata import version

    import numpy as np
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    items = load_items(args.items)
    lm = HFLM(pretrained=str(args.model), device="cpu", dtype="float32", batch_size=1)

    def requests(chunk: list[dict]) -> list[Instance]:
        return [
            Instance(request_type="loglikelihood", doc={}, arguments=(item["prompt"], choice), idx=j)
            for item in chunk
            for j, choice in enumerate(item["choices"])
        ]

    def run(chunk: list[dict], batch_size: int) -> tuple[float, list[float]]:
        lm.batch_size_per_gpu = batch_size
        reqs = requests(chunk)
        with Timer() as timer:
            out = lm.loglikelihood(reqs, disable_tqdm=True)
        return timer.seconds, [float(lp) for lp, _ in out]

    sizes = [int(s) for s in args.batch_sizes.split(",") if s.strip()]
    sweep_items = items[: args.sweep_items]
    sweep: dict[str, float] = {}
    for size in sizes:
        run(items[: args.warmup], size)
        seconds, _ = run(sweep_items, size)
        sweep[str(size)] = len(sweep_items) / seconds
    best = max(sizes, key=lambda s: sweep[str(s)])
    run(items[: args.warmup], best)
    seconds, logprobs = run(items, best)

    probs, flat = [], iter(logprobs)
    for item in items:
        lp = np.array([next(flat) for _ in item["choices"]], dtype=np.float64)
        z = np.exp(lp - lp.max())
        probs.append((z / z.sum()).tolist())
    write(
        args.out,
        {
            "peer": "lm_eval",
            "call": "HFLM(pretrained=folder, dtype='float32', device='cpu').loglikelihood(requests)",
            "items": len(items),
            "batch_size": best,
            "wall_s": seconds,
            "items_per_s": len(items) / seconds,
            "sweep_items": len(sweep_items),
            "sweep_items_per_s": sweep,
            "warmup_items": min(args.warmup, len(items)),
            "logprobs": logprobs,
            "probs": probs,
            "tokens": token_agreement(lm.tokenizer, items),
            "environment": environment({"lm_eval": version("lm_eval")}),
        },
    )


if __name__ == "__main__":
    main()
