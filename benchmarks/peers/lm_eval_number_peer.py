"""Peer of `benchmarks/number_scoring.py`: lm-evaluation-harness 0.4.13, `HFLM.loglikelihood`, one request per number.

What an lm-eval user would write to get a number distribution: for every item and every
candidate number in its range, a `loglikelihood` request `(prompt, candidate)`, all sent in
ONE call (the harness sorts and batches requests itself, as it does for a task), then a
softmax over each item's candidates. Every request is a full forward pass of prompt +
candidate: nothing is shared between the 101 candidates of an item. `HFLM` is built from
the model folder (`dtype="float32"`, `device="cpu"`) at `--batch-size`; load time is not
timed, and one untimed warm-up call runs first.

By default `HFLM` keeps its `logits_cache`: requests whose context + continuation minus its
last token are the same share one forward pass (for a digit-by-digit tokenizer, ` 50` to
` 59` share the pass of ` 5`), so the harness runs about a dozen passes per item, not 101.
`--no-logits-cache` turns that off: one full pass per candidate number.
"""

from __future__ import annotations

from _common import Timer, base_parser, environment, load_items, pin_threads, write


def main() -> None:
    parser = base_parser(__doc__)
    parser.add_argument("--batch-size", type=int, default=16, help="HFLM batch size")
    parser.add_argument("--no-logits-cache", action="store_true", help="HFLM(logits_cache=False)")
    args = parser.parse_args()
    pin_threads(args.threads)
    from importlib.metadata import version

    import numpy as np
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    items = load_items(args.items)
    lm = HFLM(
        pretrained=str(args.model),
        device="cpu",
        dtype="float32",
        batch_size=args.batch_size,
        logits_cache=not args.no_logits_cache,
    )

    def run(chunk: list[dict]) -> tuple[float, list[float]]:
        reqs = [
            Instance(request_type="loglikelihood", doc={}, arguments=(item["prompt"], cand), idx=j)
            for item in chunk
            for j, cand in enumerate(item["candidates"])
        ]
        with Timer() as timer:
            out = lm.loglikelihood(reqs, disable_tqdm=True)
        return timer.seconds, [float(lp) for lp, _ in out]

    run(items[: args.warmup])
    seconds, logprobs = run(items)
    probs, flat = [], iter(logprobs)
    for item in items:
        lp = np.array([next(flat) for _ in item["candidates"]], dtype=np.float64)
        z = np.exp(lp - lp.max())
        probs.append((z / z.sum()).tolist())
    write(
        args.out,
        {
            "peer": "lm_eval_numbers",
            "call": "HFLM(pretrained=folder, dtype='float32', device='cpu').loglikelihood(one request per number)",
            "items": len(items),
            "requests": len(logprobs),
            "batch_size": args.batch_size,
            "logits_cache": not args.no_logits_cache,
            "wall_s": seconds,
            "items_per_s": len(items) / seconds,
            "warmup_items": min(args.warmup, len(items)),
            "probs": probs,
            "environment": environment({"lm_eval": version("lm_eval")}),
        },
    )


if __name__ == "__main__":
    main()
