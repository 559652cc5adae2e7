"""Peer 1 of `benchmarks/choice_scoring.py`: `cappr` 0.9.6, the release's scorer, in its own environment.

Runs the release's call once per item,

    cappr.huggingface.classify.predict_proba(prompt, completions=options, model_and_tokenizer=(model, tokenizer),
                                             end_of_prompt="", batch_size=1)

on the benchmark's items and writes the probabilities and the wall time to `--out`. The model is
loaded and `--warmup` items are scored before the clock starts, so load time and first-call
overheads are not timed. `cappr` 0.9.6 does not import under transformers 5, hence the separate
environment (transformers 4.57) and a converted copy of the model folder.
"""

from __future__ import annotations

from _common import Timer, base_parser, environment, load_items, load_model, pin_threads, token_agreement, write

CALL = 'predict_proba(prompt, completions=options, model_and_tokenizer=..., end_of_prompt="", batch_size=1)'


def main() -> None:
    args = base_parser(__doc__).parse_args()
    pin_threads(args.threads)
    from importlib.metadata import version

    from cappr.huggingface.classify import predict_proba

    items = load_items(args.items)
    model, tokenizer = load_model(args.model)

    def score(item: dict) -> list[float]:
        probs = predict_proba(
            item["prompt"],
            completions=item["choices"],
            model_and_tokenizer=(model, tokenizer),
            end_of_prompt="",
            batch_size=1,
        )
        return [float(p) for p in probs]

    for item in items[: args.warmup]:
        score(item)
    with Timer() as timer:
        probs = [score(item) for item in items]
    write(
        args.out,
        {
            "peer": "cappr",
            "call": CALL,
            "items": len(items),
            "wall_s": timer.seconds,
            "items_per_s": len(items) / timer.seconds,
            "warmup_items": min(args.warmup, len(items)),
            "probs": probs,
            "tokens": token_agreement(tokenizer, items),
            "environment": environment({"cappr": version("cappr")}),
        },
    )


if __name__ == "__main__":
    main()
