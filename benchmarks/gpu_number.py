"""Number items for `gpu_scoring.py`: a realistic synthetic corpus, their requests, and the brute-force check.

The intergroup-empathy probe's number items (0-100 or 0-10 intensity, each scored in exact mode
as a distribution over the whole range through its digit trie) are most of what a full model
evaluation computes. `gpu_scoring.py` times them on a GPU with the same machinery as choice
items; this module holds what differs:

- `write_event_corpus`: a crowd-enVent-format TSV of invented events of 20 to 40 words (the
  real corpus is not on every machine; `probes build intergroup-empathy --sources` reads it),
  written by the project's synthetic-corpus writer (`promptgen.empathy.synthetic`).
  crowd-enVent's narratives are one or two sentences; these are composed from clause pools,
  so their token counts approximate real ones only roughly;
- `prepare_number`: the first N items of one config, tokenised as a run tokenises them
  (`runners.rows.prepare_request`, exact number mode, plain prompts), written as token ids
  with each item's surface forms (`runners.scoring.tokenize.number_paths`) for the check;
- `number_requests`, `number_streams`: the requests back from JSON, and the token positions an
  exact scorer must compute per item when it shares nothing (context + one per trie node);
- `check_against_bruteforce`: a sample's P(n) from the backend (`runners.scoring.distributions`)
  against one full forward pass per surface form, with the end-of-number mass summed
  directly over every non-digit token of the vocabulary (the backend takes 1 - digits).

Runs on the GPU machine with torch + transformers + numpy only (`src` on the path): nothing
here imports `datasets`, `runners.plan` or a tokenizer outside `prepare_number` (and the CPU-side
`write_event_corpus`, whose writer's package imports `datasets`).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

_OPENERS = ("when", "because", "", "I felt it when", "after")
_SUBJECTS = (
    "my best friend",
    "my older brother",
    "the manager at my new job",
    "a stranger on the train",
    "my neighbour",
    "our landlord",
    "my daughter's teacher",
    "my partner",
    "a colleague I barely knew",
    "my mother",
    "the doctor at the hospital",
    "my flatmate",
    "an old school friend",
    "my boss",
    "my grandfather",
    "a customer at the shop where I work",
    "my son",
    "the people next door",
)
_VERBS = (
    "told me in front of everyone about",
    "forgot to tell me about",
    "surprised me with tickets to",
    "refused to pay me back for",
    "helped me sort out",
    "lied to me about",
    "finally apologised for",
    "laughed at me because of",
    "quietly took care of",
    "made a complete mess of",
    "blamed me for",
    "never said a word about",
    "trusted me with",
)
_OBJECTS = (
    "the flat we had been looking at for months",
    "the concert I had wanted to see since I was a teenager",
    "the money I had lent them last summer",
    "my mistake on the quarterly report",
    "the car accident",
    "the dinner I had spent all afternoon cooking",
    "my exam results",
    "the job I had applied for",
    "our holiday plans",
    "the dog we had adopted together",
    "the wedding",
    "the promotion I had worked so hard for",
    "my grandmother's funeral",
)
_CIRCUMSTANCES = (
    "even though I had asked several times",
    "on the morning of my final exam",
    "just a week before Christmas",
    "and nobody else seemed to notice or care",
    "while I was still recovering from the flu",
    "after I had waited for almost two hours",
    "in the middle of a busy meeting",
    "without even asking me first",
    "right after I had moved to a new city",
)
_AFTERTHOUGHTS = (
    "I could not believe it.",
    "It took me days to get over it.",
    "I still think about it sometimes.",
    "Nobody had ever done that for me before.",
    "I did not know what to say.",
    "I went home and cried.",
)


def invent_event(rng: random.Random, low: int = 20, high: int = 40) -> str:
    """One event narrative of about `low` to `high` words: a clause, circumstances, maybe a second sentence."""
    target = rng.randint(low, high)
    parts = (rng.choice(_OPENERS), rng.choice(_SUBJECTS), rng.choice(_VERBS), rng.choice(_OBJECTS))
    text = " ".join(p for p in parts if p)
    for extra in rng.sample(_CIRCUMSTANCES, len(_CIRCUMSTANCES)):
        if len(text.split()) >= target or len(text.split()) + len(extra.split()) > high:
            break
        text += " " + extra
    text += "."
    while len(text.split()) < target:
        text += " " + rng.choice(_AFTERTHOUGHTS)
    return text


def write_event_corpus(root: Path, events_per_emotion: int, seed: int = 0) -> Path:
    """A `--sources` folder `root` of the release's files with `events_per_emotion` invented events per emotion, and
    the unpinned recipe they build with (`root/recipe.yaml`); returns that recipe."""
    from promptgen.empathy.synthetic import write_synthetic_corpus, write_synthetic_recipe

    write_synthetic_corpus(root, events_per_emotion, invent=invent_event, seed=seed, id_format="gen{:05d}")
    return write_synthetic_recipe(root)


# ----------------------------------------------------------------------------- prepare (CPU)


def prepare_number(prompts: Path, config: str, n_items: int, tokenizer_path: Path) -> dict[str, Any]:
    """The requests JSON of the first `n_items` items of `config` (0: all), as `probes run --no-chat` builds them."""
    import pyarrow.parquet as pq
    from transformers import AutoTokenizer

    from runners.rows import cached_digit_start_ids, prepare_request, render_context
    from runners.scoring.distributions import build_number_trie
    from runners.scoring.settings import ScoringSettings
    from runners.scoring.tokenize import number_paths

    files = sorted(prompts.glob(f"data/{config}/*.parquet")) or sorted(prompts.glob(f"**/data/{config}/*.parquet"))
    if not files:
        raise SystemExit(f"no {config} parquet files under {prompts}")
    columns = ["id", "task", "prompt", "messages", "number_min", "number_max"]
    items = [row for file in files for row in pq.read_table(file, columns=columns).to_pylist()]
    if n_items and len(items) < n_items:
        raise SystemExit(f"{prompts} has only {len(items)} {config} items, {n_items} asked for")
    items = items[:n_items] if n_items else items
    if any(item["task"] != "number" for item in items):
        raise SystemExit(f"{config} of {prompts} holds items that are not number items")
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_path)
    settings = ScoringSettings()  # exact mode, the run's default surface forms
    digits = cached_digit_start_ids(tokenizer)
    requests = []
    for item in items:
        request = prepare_request(item, tokenizer, False, settings, digits)
        # the item's surface forms, for the brute-force check; their trie must be what the run sends
        context, paths = number_paths(
            tokenizer, render_context(tokenizer, item, False), item["number_min"], item["number_max"]
        )
        if context != request.context or build_number_trie(paths).leaves != request.continuations:
            raise SystemExit(f"item {item['id']}: number_paths disagrees with prepare_request")
        requests.append(
            {
                "id": item["id"],
                "context": list(request.context),
                "continuations": [list(c) for c in request.continuations],
                "paths": [[n, [list(f) for f in forms]] for n, forms in paths.items()],
            }
        )
    manifests = sorted(prompts.glob("build_manifest.json")) or sorted(prompts.glob("**/build_manifest.json"))
    manifest = json.loads(manifests[0].read_text()) if manifests else {}
    source = {"config": config, "dataset": manifest.get("name"), "fingerprint": manifest.get("fingerprint")}
    return {
        "task": "number",
        "source": source,
        "tokenizer": str(tokenizer_path),
        "number_mode": settings.number_mode,
        "number_prefixes": list(settings.number_prefixes),
        "candidates": list(digits),
        "requests": requests,
    }


# ----------------------------------------------------------------------------- measure (GPU)


def number_requests(payload: dict[str, Any]) -> list[Any]:
    """The `ScoreRequest`s of a number payload: context, the trie's leaves, the digit tokens as candidates."""
    from runners.exchange import ScoreRequest

    candidates = tuple(payload["candidates"])
    return [
        ScoreRequest(tuple(r["context"]), tuple(tuple(c) for c in r["continuations"]), candidates)
        for r in payload["requests"]
    ]


def number_streams(requests: list[Any]) -> list[list[int]]:
    """Per item, its context then one token per node of its digit trie: what an exact scorer feeds, unshared."""
    from runners.scoring.token_accounting import continuation_nodes

    return [list(r.context) + [node[-1] for node in continuation_nodes(r.continuations, True)] for r in requests]


def number_paths_of(record: dict[str, Any]) -> dict[int, list[tuple[int, ...]]]:
    """{n: its surface forms' token ids} of one request record."""
    return {int(n): [tuple(f) for f in forms] for n, forms in record["paths"]}


def bruteforce_raw(
    model: Any, context: tuple[int, ...], paths: dict[int, list[tuple[int, ...]]], digits: list[int], batch: int = 32
) -> Any:
    """P(n) before renormalising, from one full forward pass (no cache) of context + form per surface form.

    P(form) is the product of its tokens' probabilities; P(end) is the summed probability of
    every vocabulary token that is not a digit token, read after the form's last token.
    Log-softmax in float64 over the model's logits.
    """
    import numpy as np
    import torch

    forms = [(n, form) for n in sorted(paths) for form in paths[n]]
    lo = min(paths)
    raw = np.zeros(max(paths) - lo + 1, dtype=np.float64)
    device = model.device
    ends = torch.ones(model.config.vocab_size, dtype=torch.bool, device=device)
    ends[torch.tensor(digits, device=device)] = False
    at = len(context) - 1
    with torch.inference_mode():
        for start in range(0, len(forms), batch):
            group = forms[start : start + batch]
            width = len(context) + max(len(f) for _, f in group)
            ids = torch.zeros((len(group), width), dtype=torch.long)
            for row, (_, form) in enumerate(group):
                ids[row, : len(context) + len(form)] = torch.tensor([*context, *form])
            # right padding under a causal mask: the real positions never see it
            logits = model(input_ids=ids.to(device), use_cache=False).logits[:, at:]
            logprobs = torch.log_softmax(logits.double(), dim=-1)
            del logits
            for row, (n, form) in enumerate(group):
                lp = sum(float(logprobs[row, k, t]) for k, t in enumerate(form))
                p_end = float(logprobs[row, len(form), ends].exp().sum())
                raw[n - lo] += np.exp(lp) * p_end
            del logprobs
    return raw


def check_against_bruteforce(
    model: Any, payload: dict[str, Any], results: list[Any], n_items: int
) -> dict[str, float | int]:
    """Largest |P(n) difference| (renormalised) and |log P(n) difference| (raw) over the first `n_items` items."""
    import numpy as np

    from runners.scoring.distributions import build_number_trie, number_distribution

    worst_prob = worst_log = 0.0
    for record, result in zip(payload["requests"][:n_items], results[:n_items], strict=True):
        paths = number_paths_of(record)
        ours = number_distribution(build_number_trie(paths), result)
        ref = bruteforce_raw(model, tuple(record["context"]), paths, payload["candidates"])
        worst_prob = max(worst_prob, float(np.abs(ours.probs - ref / ref.sum()).max()))
        worst_log = max(worst_log, float(np.abs(np.log(ours.raw) - np.log(ref)).max()))
    return {
        "max_abs_prob_diff_vs_bruteforce": worst_prob,
        "max_abs_log_raw_prob_diff_vs_bruteforce": worst_log,
        "checked_items": min(n_items, len(results)),
    }


def plan_flops(n_params: int, config: dict[str, Any], computed_tokens: int, mean_context: float) -> float:
    """FLOPs as `probes plan` prices them (`runners.plan.pricing.flops`, which needs `datasets` to import).

    2 x parameters x computed tokens + 4 x layers x (heads x head size) x (mean context + 1) x computed tokens.
    """
    width = config["num_attention_heads"] * (
        config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    )
    return (
        2.0 * n_params * computed_tokens
        + 4.0 * config["num_hidden_layers"] * width * (mean_context + 1) * computed_tokens
    )
