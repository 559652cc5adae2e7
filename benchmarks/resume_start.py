"""Benchmark: how long a resumed `probes run` with nothing left to do takes to start, on a full-size config.

    python benchmarks/resume_start.py --prompts DIR/intergroup-empathy --out resume.json
    python benchmarks/resume_start.py --work /tmp/rs --out resume.json     # builds the dataset first (~10 min)

`--prompts` is a full-size `intergroup-empathy` build (`benchmarks/empathy_build.py --keep`
writes one from a synthetic corpus of the published size); without it the dataset is built
into `--work`. On one config (default `race_P0S0T0`, about 1.8 M rows) the script writes a
complete result key folder directly, as a run leaves it (every id, its `prompt_sha256`, the
row a generation run writes, `results.write_part` in parts of `--part-rows` rows: a GPU run
flushes a part per 1,024-item call), so no model is needed: scoring 1.8 M items is out of
reach here. Then it times the real start of a run (`runners.run.runner.resolve_protocol`: load and
check the config; `Session.open`: select, read the folder, decide what to score) and the
no-op finish (`Session.finish`: compact, manifest, card), in these cases:

1. `before`: the runner of `--before-src` (a checkout's `src` of the commit before this
   change; run in a child process) on the folder its runs leave (unlabelled parts). Its
   start is quadratic in the rows (each `dataset["id"][k]` costs time in proportion to the
   config's Arrow chunks: hours at 2 M rows), so it opens the first `--before-limit` items
   and the whole start is extrapolated (selection and reading the folder as measured, the
   per-item rest scaled by rows / limit);
2. `upgrade`: this runner's first start on that folder (it hashes every prompt, as before,
   then labels the rows with the prompt content at the finish);
3. `resume`: this runner's start on the folder it leaves: nothing hashed (target: < 10 s);
4. `one_changed`: a rebuild of the config with one prompt changed (its data file and
   manifest rewritten as `probes build` would): the start hashes every prompt and finds the
   one item to rescore; one fake row is added and the run finished; then the next start.

Each case reports its parts (seconds): load, the id column, the shard selection, reading the
key folder, hashing, the rest of the decision, and the finish.
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODEL = "bench/model"


def _timed(fn: Any, *args: Any, **kw: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn(*args, **kw)
    return value, round(time.perf_counter() - start, 3)


def build_dataset(work: Path) -> Path:
    """A full-size intergroup-empathy build from the synthetic corpus of `empathy_build.py`."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from empathy_build import write_corpus

    write_corpus(work / "src")
    cmd = [
        sys.executable,
        "-m",
        "probes.cli",
        "build",
        str(work / "src" / "recipe.yaml"),
        "--sources",
        str(work / "src"),
    ]
    subprocess.run([*cmd, "--out", str(work / "out"), "-q"], check=True)
    return next(p for p in (work / "out").iterdir() if p.is_dir())


def _request(prompts: Path, config: str, results: Path) -> Any:
    from runners.run.request import RunRequest

    return RunRequest(str(prompts), config, MODEL, results)


def _key(request: Any) -> Any:
    from runners.run.session import result_key

    return result_key(MODEL, "sha256-" + "0" * 64, request.settings, bool(request.chat), dtype="bfloat16", backend="hf")


def _row(item_id: str, digest: str, key: Any, mode: str) -> dict[str, Any]:
    """The row a run writes for a 0-100 number item (generation, or scored distribution)."""
    row = {"id": item_id, "prompt_sha256": digest, **key.as_dict(), "chat": False, "backend": "hf"}
    row.update(dtype="bfloat16", device="cuda", refused=False, context_tokens=120)
    if mode == "generate":
        return {**row, "generated_text": " 50", "parsed_value": 50, "parse_status": "ok", "finish_reason": "stop"}
    probs = [1 / 101] * 101
    return {**row, "number_probs": probs, "expected_value": 50.0, "argmax_value": 0, "valid_mass": 1.0}


def fabricate(prompts: Path, config: str, results: Path, part_rows: int) -> dict[str, Any]:
    """A complete key folder of `config` as a run leaves it: every id, its prompt hash, unlabelled parts."""
    from runners import results as res
    from runners.run.runner import resolve_protocol

    resolved = resolve_protocol(_request(prompts, config, results))
    config_prompts, request = resolved.prompts, resolved.request
    key = _key(request)
    folder = res.key_dir(results, config, key)
    res.write_key_file(folder, key)
    dataset = config_prompts.dataset
    columns = [c for c in res.PROMPT_FIELDS if c in dataset.column_names]
    mode = request.settings.mode
    start = time.perf_counter()
    for first in range(0, len(dataset), part_rows):
        items = dataset.select(range(first, min(first + part_rows, len(dataset))))
        rows = items.select_columns([*columns, "id"]).to_list()
        res.write_part(folder, (0, 1), [_row(r["id"], res.prompt_sha256(r), key, mode) for r in rows])
    return {
        "rows": len(dataset),
        "parts": len(res.part_files(folder)),
        "bytes": sum(p.stat().st_size for p in res.part_files(folder)),
        "mode": mode,
        "write_s": round(time.perf_counter() - start, 1),
    }


class _Clock:
    """Times the calls of module functions while installed: the parts of one real `Session.open`."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls = 0
        self._undo: list[tuple[Any, str, Any]] = []

    def wrap(self, module: Any, name: str, label: str, *, count: bool = False) -> None:
        real = getattr(module, name)

        def timed(*args: Any, **kw: Any) -> Any:
            start = time.perf_counter()
            try:
                return real(*args, **kw)
            finally:
                self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - start
                self.calls += count

        setattr(module, name, timed)
        self._undo.append((module, name, real))

    def undo(self) -> None:
        for module, name, real in reversed(self._undo):
            setattr(module, name, real)
        self._undo = []


def measure(
    prompts: Path, config: str, results: Path, *, rescore: bool = False, limit: int | None = None
) -> dict[str, Any]:
    """One start (and no-op finish) of a run of `config` into `results`, by whichever runner is importable.

    With `limit` the run is `--limit`ed, and the whole config's start is extrapolated from it (`_extrapolate`).
    """
    import pyarrow as pa

    from runners import results as res
    from runners.run import session as session_mod
    from runners.run.runner import resolve_protocol
    from runners.run.session import Session
    from runners.selection.select import Selection, select_rows

    out: dict[str, Any] = {}
    (config_prompts, request, _), out["load_s"] = _timed(resolve_protocol, _request(prompts, config, results))
    key = _key(request)
    clock = _Clock()
    clock.wrap(res, "prompt_sha256", "hashed", count=True)
    clock.wrap(session_mod, "rows_of", "select_s")
    new = hasattr(session_mod, "resume")
    if new:  # this runner: the id column, the folder, the hashes, the rest of the decision
        clock.wrap(session_mod.resume, "id_column", "ids_s")
        clock.wrap(session_mod.resume, "_read_done", "read_folder_s")
        clock.wrap(session_mod.resume, "prompt_hashes", "hash_s")
    else:  # the runner before: its `prompts.dataset["id"]` list is what the parts leave over
        clock.wrap(res, "read_key_rows", "read_folder_s")
        clock.wrap(session_mod, "prompt_hashes", "hash_s")
    try:
        session, out["open_s"] = _timed(
            Session.open, config_prompts, results, key, chat=bool(request.chat), rows=Selection(limit=limit)
        )
    finally:
        clock.undo()
    parts = {k: round(v, 3) for k, v in clock.seconds.items() if k != "hashed"}
    parts["rest_s" if new else "ids_and_rest_s"] = round(out["open_s"] - sum(parts.values()), 3)
    out["open_parts"] = parts
    out.update(hashed=clock.calls, selected=len(session.selected), todo=len(session.todo), rescored=session.rescored)
    out["start_s"] = round(out["load_s"] + out["open_s"], 3)
    if limit is not None:
        out.update(_extrapolate(out, len(config_prompts.dataset)))
    ids = session_mod.resume.id_column(config_prompts.dataset) if new else list(config_prompts.dataset["id"])
    _, out["select_shard_0of4_s"] = _timed(select_rows, pa.table({"id": ids}), Selection(shard=(0, 4)), "config")
    if rescore:  # the items to score get a (fake) row, as the model would give them
        rows = config_prompts.dataset.select(session.todo).to_list()
        session.add({"id": r["id"], "refused": False, "context_tokens": 1, "choice_tokens": None} for r in rows)
    summary, out["finish_s"] = _timed(session.finish, backend="hf", dtype="bfloat16", hardware={})
    out["summary"] = summary.line().split(", ")[0]
    out["parts_after"] = len(res.part_files(session.folder))
    out["runner"] = "this one" if new else "before (hashes every prompt)"
    return out


def _extrapolate(out: dict[str, Any], rows: int) -> dict[str, Any]:
    """The whole config's open from a `--limit`ed one: selecting and reading the folder cost the same
    whatever the limit; hashing and the per-item decision (the rest) grow with the items selected."""
    parts, scale = out["open_parts"], rows / out["selected"]
    fixed = parts.get("select_s", 0.0) + parts.get("read_folder_s", 0.0)
    open_s = fixed + (out["open_s"] - fixed) * scale
    return {
        "extrapolated_to_rows": rows,
        "open_s_extrapolated": round(open_s, 1),
        "start_s_extrapolated": round(out["load_s"] + open_s, 1),
    }


def rebuilt_with_one_change(prompts: Path, config: str, target: Path) -> Path:
    """A copy of the dataset with one prompt of `config` changed, its manifest updated as a rebuild would."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from promptgen.core.files import sha256_file
    from promptgen.hub.folder import PARQUET_OPTIONS

    if target.exists():
        shutil.rmtree(target)
    (target / "data").mkdir(parents=True)
    for name in ("README.md", "build_manifest.json"):
        shutil.copy2(prompts / name, target / name)
    for data in (prompts / "data").iterdir():  # the other configs as they are (the card names them all)
        if data.name == config:
            shutil.copytree(data, target / "data" / config)
        else:
            (target / "data" / data.name).symlink_to(data.resolve(), target_is_directory=True)
    first = sorted((target / "data" / config).glob("*.parquet"))[0]
    table = pq.read_table(first)
    changed = table["prompt"].to_pylist()
    changed[0] = changed[0] + " (reworded)"
    index = table.schema.get_field_index("prompt")
    pq.write_table(table.set_column(index, table.schema.field(index), pa.array(changed)), first, **PARQUET_OPTIONS)
    manifest = json.loads((target / "build_manifest.json").read_text())
    for entry in manifest["configs"][config]["files"]:
        if entry["path"] == first.relative_to(target).as_posix():
            entry.update(sha256=sha256_file(first), bytes=first.stat().st_size)
    manifest["fingerprint"] = "rebuilt-" + manifest["fingerprint"][8:]
    (target / "build_manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=Path, default=None, help="a full-size intergroup-empathy build")
    parser.add_argument("--config", default="race_P0S0T0")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("--part-rows", type=int, default=1024, help="rows per part of the fabricated folder")
    parser.add_argument("--before-src", type=Path, default=None, help="`src` of the runner to compare with")
    parser.add_argument(
        "--before-limit",
        type=int,
        default=20_000,
        help="items the runner before opens (`--limit`); its whole start is extrapolated (it is quadratic: hours)",
    )
    parser.add_argument("--out", type=Path, required=True, help="JSON result file")
    parser.add_argument("--measure-only", type=Path, default=None, help=argparse.SUPPRESS)  # child: one results folder
    args = parser.parse_args()
    if args.measure_only is not None:  # the child process of `--before-src`
        print(json.dumps(measure(args.prompts, args.config, args.measure_only, limit=args.before_limit)))
        return
    work = Path(tempfile.mkdtemp(prefix="resume-start-", dir=args.work))
    try:
        prompts = args.prompts or build_dataset(work / "build")
        results = work / "results"
        result: dict[str, Any] = {"benchmark": "resume_start", "config": args.config, "part_rows": args.part_rows}
        result["fabricated"] = fabricate(prompts, args.config, results, args.part_rows)
        old_layout = work / "results-before"
        shutil.copytree(results, old_layout)
        if args.before_src is not None:
            env = {**os.environ, "PYTHONPATH": str(args.before_src.resolve())}
            cmd = [sys.executable, __file__, "--prompts", str(prompts), "--config", args.config, "--out", "-"]
            cmd += ["--before-limit", str(args.before_limit)]
            child = subprocess.run([*cmd, "--measure-only", str(old_layout)], env=env, capture_output=True, text=True)
            if child.returncode:
                raise SystemExit(f"the runner of {args.before_src} failed:\n{child.stderr[-4000:]}")
            result["before"] = json.loads(child.stdout.strip().splitlines()[-1])
        result["upgrade"] = measure(prompts, args.config, results)
        result["resume"] = measure(prompts, args.config, results)
        rebuilt = rebuilt_with_one_change(prompts, args.config, work / "rebuilt")
        result["one_changed"] = measure(rebuilt, args.config, results, rescore=True)
        result["one_changed_next_start"] = measure(rebuilt, args.config, results)
        result["target_start_s"] = 10
        result["machine"] = {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "python": sys.version.split()[0],
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
