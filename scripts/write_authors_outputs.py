"""Write the intergroup-empathy authors' generation files for two configs of a built dataset, for `probes import`.

    python scripts/write_authors_outputs.py DATASET OUT

As their `batch_pred_emotion.py` writes them (`idx`, `system_prompt`, `user_input`, `response`, tab separated, two
batches per config), with answers that exercise their parser (numbers, a number in a sentence, a refusal). Used by
`scripts/capture_outputs.sh`, so a capture holds an import and a restructuring of `probes import` is compared too.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from runners.prompts import load_prompt_config

#: their file stem -> our config
FILES = {"religion_origin": "religion_P0S0T0", "religion_10-scale": "religion_P0S1T0"}
ANSWERS = ["70", "I'd say 55.", "As an AI, I cannot rate that", "0", "100", "maybe 3 or 4"]


def main(dataset: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for stem, config in FILES.items():
        rows = load_prompt_config(str(dataset), config).dataset.to_pandas().sort_values("authors_index")
        frame = pd.DataFrame(
            {
                "idx": rows["authors_index"].to_numpy(),
                "system_prompt": [m[0]["content"] for m in rows["messages"]],
                "user_input": [m[1]["content"] for m in rows["messages"]],
                "response": [ANSWERS[k % len(ANSWERS)] for k in range(len(rows))],
            }
        )
        size = -(-len(frame) // 2)
        for b in range(2):
            frame.iloc[b * size : (b + 1) * size].to_csv(out / f"{stem}_batch-{b}.tsv", sep="\t", index=False)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
