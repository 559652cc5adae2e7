"""Check a whole intergroup-empathy build against the authors' own prompt code: every prompt, byte for byte.

    python scripts/check_empathy_prompts.py DATASET_FOLDER [--sources ../shared/sources] [--out check.json]

For each of the 3 groups x 7 variations it runs the release's `read_all_data` and `prepare_prompts`
(tests/reference/intergroup_empathy_bias, unchanged; tests/empathy_reference.py loads them) on the
release's files and compares, row by row in order, their `idx`, `system_prompt` and `user_input`
with the config's `authors_index` and `messages`. Their prompt TSV is captured as the frame they
write instead of being written (37.3 M rows would be ~25 GB of TSV): that the TSV round trip changes
no byte is what tests/promptgen/empathy/test_release_prompts.py checks on every variation. The
folder must be a full build (`probes build intergroup-empathy --sources ...`, 6,050 events).
Prints and writes a JSON summary; exits 1 on the first difference, naming the config and row.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from itertools import zip_longest
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import empathy_reference as ref  # noqa: E402 - the tests' loader of the authors' code
from promptgen.empathy.prompts import AUTHORS_GROUPS as GROUPS  # noqa: E402
from promptgen.empathy.prompts import AUTHORS_VARIATIONS as VARIATIONS  # noqa: E402


def authors_frame(code, data: dict, variation: str, group: str) -> pd.DataFrame:
    """Their `prepare_prompts` output, captured where it would be written."""
    captured: list[pd.DataFrame] = []
    original = pd.DataFrame.to_csv

    def capture(self: pd.DataFrame, *args, **kwargs) -> None:
        captured.append(self)

    pd.DataFrame.to_csv = capture
    try:
        code.prepare_prompts(data, variation, group)
    finally:
        pd.DataFrame.to_csv = original
    (frame,) = captured
    return frame


def our_rows(folder: Path, config: str):
    """(authors_index, system, user) of a config, shard by shard in row order."""
    for path in sorted((folder / "data" / config).glob("*.parquet")):
        table = pq.read_table(path, columns=["authors_index", "messages"])
        for batch in table.to_batches(max_chunksize=200_000):
            index = batch.column("authors_index").to_pylist()
            messages = batch.column("messages").to_pylist()
            yield from zip(index, (m[0]["content"] for m in messages), (m[1]["content"] for m in messages), strict=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="a full intergroup-empathy build")
    parser.add_argument("--sources", type=Path, default=REPO.parent / "shared" / "sources")
    parser.add_argument("--out", type=Path, default=None, help="JSON summary")
    args = parser.parse_args()
    data_dir = args.sources / "intergroup-empathy-release" / "data"
    code = ref.batch_pred_emotion()
    summary: dict = {"folder": args.folder.name, "configs": {}, "prompts": 0}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "data").symlink_to(data_dir.resolve(), target_is_directory=True)
        with ref.working_directory(Path(tmp)):
            data = {v: code.read_all_data(v) for v in VARIATIONS}
        for group, category in GROUPS.items():
            for variation, setting in VARIATIONS.items():
                config = f"{category}_{setting}"
                t0 = time.perf_counter()
                theirs = authors_frame(code, data[variation], variation, group)
                rows = zip(theirs["idx"], theirs["system_prompt"], theirs["user_input"], strict=True)
                n = 0
                for n, (ours, mine) in enumerate(zip_longest(our_rows(args.folder, config), rows), 1):
                    if ours is None or mine is None or tuple(ours) != (int(mine[0]), mine[1], mine[2]):
                        print(f"{config}: row {n - 1} differs (authors {mine and mine[0]}, ours {ours and ours[0]})")
                        return 1
                summary["configs"][config] = {"prompts": n, "seconds": round(time.perf_counter() - t0, 1)}
                summary["prompts"] += n
                print(f"{config}: {n:,} prompts identical", flush=True)
                del theirs
    summary["seconds"] = round(time.perf_counter() - started, 1)
    summary["identical"] = True
    text = json.dumps(summary, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
