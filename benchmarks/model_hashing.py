"""What keying results by model content costs: hashing a model folder, first run and rerun.

`probes run` keys results by a sha256 over the bytes of a local model's weights, config,
tokenizer and chat template (`runners.model.identity`). The first run reads every byte; a
rerun finds each file's digest in the cache by (path, size, mtime) and only stats the files.

    python benchmarks/model_hashing.py --gib 1 --out hashing.json

writes a folder of `--gib` GiB of weight shards (random bytes: sha256 costs the same whatever
the bytes), then times `folder_revision` with an empty cache, again with the warm cache, and
after one shard was touched (only that shard is read again).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

from runners.model.identity import FileHashCache, folder_revision

SHARD = 1 << 28  # 256 MiB, like a real checkpoint's safetensors shards (smaller than usual)


def write_folder(folder: Path, total: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "tokenizer.json").write_text("{}")
    n = max(1, total // SHARD)
    for i in range(n):
        with (folder / f"model-{i + 1:05d}-of-{n:05d}.safetensors").open("wb") as f:
            left = total // n
            while left:
                chunk = min(left, 1 << 24)
                f.write(os.urandom(chunk))
                left -= chunk


def timed(folder: Path, cache_file: Path) -> tuple[float, int, str]:
    cache = FileHashCache(cache_file)
    start = time.perf_counter()
    revision = folder_revision(folder, cache=cache)
    return time.perf_counter() - start, cache.hashed, revision


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=1.0, help="size of the weight files (GiB)")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("--out", type=Path, required=True, help="JSON result file")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hashing-", dir=args.work))
    try:
        folder = work / "model"
        total = int(args.gib * (1 << 30))
        write_folder(folder, total)
        cache_file = work / "file-hashes.json"
        first_s, first_files, rev = timed(folder, cache_file)
        rerun_s, rerun_files, rev2 = timed(folder, cache_file)
        shard = sorted(folder.glob("*.safetensors"))[0]
        os.utime(shard)  # touched: same bytes, new mtime -> read again
        touched_s, touched_files, rev3 = timed(folder, cache_file)
        assert rev == rev2 == rev3
        result = {
            "bytes": total,
            "files": len(list(folder.iterdir())),
            "first_run_s": round(first_s, 3),
            "first_run_mib_per_s": round(total / (1 << 20) / first_s, 1),
            "first_run_files_hashed": first_files,
            "rerun_s": round(rerun_s, 5),
            "rerun_files_hashed": rerun_files,
            "one_shard_touched_s": round(touched_s, 3),
            "one_shard_touched_files_hashed": touched_files,
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        }
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps(result, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
