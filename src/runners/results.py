"""The result dataset folder (DESIGN section 2 and 7): keyed parts, atomic writes, card, manifest.

Layout::

    <results>/README.md                                   card; `configs:` globs each config's parts
    <results>/results_manifest.json                       provenance of the runs (one entry per config+key)
    <results>/data/<config>/<key-slug>/key.json           the key the folder holds
    <results>/data/<config>/<key-slug>/part-<shard>-<seq>.parquet

A result is keyed by (item id, model, model revision, scoring settings): the last three make
a `ResultKey`, whose slug names the folder its rows live in, so a run with other settings
never sees (or reuses) another key's rows. Every part is written to a hidden temporary file
and renamed into place, so a killed run leaves only complete parts; the next run with the
same key reads the ids of all its parts (whichever shard or worker wrote them) and skips
them. Every part has the same explicit schema, so readers glob all parts of a config.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from promptgen.errors import ProbeError

MANIFEST_NAME = "results_manifest.json"
CARD_TEMPLATE = "results.md.j2"

RESULT_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("model", pa.string()),
        ("model_revision", pa.string()),
        ("backend", pa.string()),
        #: the dtype and device the weights were actually loaded in (the dtype is also in `scoring`)
        ("dtype", pa.string()),
        ("device", pa.string()),
        ("scoring", pa.string()),
        ("chat", pa.bool_()),
        ("choice_logprobs", pa.list_(pa.float64())),
        ("choice_probs", pa.list_(pa.float64())),
        ("choice_tokens", pa.list_(pa.int64())),
        ("chosen_index", pa.int64()),
        ("number_probs", pa.list_(pa.float64())),
        ("expected_value", pa.float64()),
        ("argmax_value", pa.int64()),
        ("valid_mass", pa.float64()),
        ("refused", pa.bool_()),
        ("context_tokens", pa.int64()),
        ("generated_text", pa.string()),
        ("parsed_value", pa.int64()),
        ("parse_status", pa.string()),
        ("finish_reason", pa.string()),
    ]
)

_PART = re.compile(r"^part-(?P<shard>[0-9]+of[0-9]+)-(?P<seq>[0-9]+)\.parquet$")


@dataclass(frozen=True)
class ResultKey:
    """What a result depends on besides the item id."""

    model: str
    model_revision: str
    #: canonical JSON of everything that changes the scores (scoring settings, chat or plain)
    scoring: str

    def as_dict(self) -> dict[str, str]:
        return {"model": self.model, "model_revision": self.model_revision, "scoring": self.scoring}

    @property
    def digest(self) -> str:
        payload = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()

    @property
    def slug(self) -> str:
        """Folder name: a readable model name and a hash of the whole key."""
        name = re.sub(r"[^A-Za-z0-9._-]+", "_", self.model.rstrip("/").split("/")[-1]).strip("._") or "model"
        return f"{name[:48]}-{self.digest[:16]}"


def parse_shard(text: str | None) -> tuple[int, int]:
    """`i/n` -> (i, n) with 0 <= i < n; None -> (0, 1)."""
    if text is None:
        return 0, 1
    m = re.fullmatch(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*", text)
    if not m:
        raise ProbeError(f"--shard must look like i/n (e.g. 0/4), got {text!r}")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 0 <= i < n:
        raise ProbeError(f"--shard {text}: need 0 <= i < n")
    return i, n


def shard_of(item_id: str, n: int) -> int:
    """The shard of an item: a hash of its id, so shards do not depend on row order."""
    return int.from_bytes(hashlib.sha256(item_id.encode("utf-8")).digest()[:8], "big") % n


def key_dir(results: Path, config: str, key: ResultKey) -> Path:
    return Path(results) / "data" / config / key.slug


def part_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if _PART.match(p.name))


def read_done(folder: Path) -> dict[str, bool]:
    """{item id: refused} over every part in a key's folder."""
    done: dict[str, bool] = {}
    for path in part_files(folder):
        table = pq.read_table(path, columns=["id", "refused"])
        done.update(zip(table.column("id").to_pylist(), table.column("refused").to_pylist(), strict=True))
    return done


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _atomic_bytes(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        # mkstemp makes the file private (0600); a result folder is meant to be shared and
        # published, so it gets the permissions any other new file would (0666 less the umask)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    def write(tmp: str) -> None:
        Path(tmp).write_text(text, encoding="utf-8", newline="\n")

    _atomic_bytes(Path(path), write)


def write_key_file(folder: Path, key: ResultKey) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "key.json"
    if not target.exists():
        atomic_write_text(target, json.dumps(key.as_dict(), indent=2, sort_keys=True) + "\n")


def write_part(folder: Path, shard: tuple[int, int], rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write rows as the next `part-<i>of<n>-<seq>.parquet` of this shard, atomically."""
    label = f"{shard[0]:05d}of{shard[1]:05d}"
    seqs = [int(m.group("seq")) for p in part_files(folder) if (m := _PART.match(p.name)) and m["shard"] == label]
    path = folder / f"part-{label}-{max(seqs, default=-1) + 1:06d}.parquet"
    table = pa.Table.from_pylist([{name: row.get(name) for name in RESULT_SCHEMA.names} for row in rows], RESULT_SCHEMA)
    _atomic_bytes(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))
    return path


def summarize(results: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """{config: {key slug: {key..., rows, refusals}}} for every key folder that has parts."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    data = Path(results) / "data"
    if not data.is_dir():
        return out
    for config_dir in sorted(p for p in data.iterdir() if p.is_dir()):
        for folder in sorted(p for p in config_dir.iterdir() if p.is_dir()):
            if not part_files(folder):
                continue
            done = read_done(folder)
            key_file = folder / "key.json"
            key = json.loads(key_file.read_text()) if key_file.is_file() else {}
            out.setdefault(config_dir.name, {})[folder.name] = {
                **key,
                "rows": len(done),
                "refusals": sum(done.values()),
            }
    return out


def read_manifest(results: Path) -> dict[str, Any]:
    path = Path(results) / MANIFEST_NAME
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ProbeError(f"{path}: not valid JSON ({exc}); move it away to start a new manifest") from exc


def update_manifest(results: Path, run_id: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """Record one run (a config + key + shard) in results_manifest.json, keeping the others."""
    manifest = read_manifest(results)
    manifest.setdefault("runs", {})[run_id] = dict(entry)
    manifest["runs"] = dict(sorted(manifest["runs"].items()))
    manifest["configs"] = summarize(results)
    atomic_write_text(Path(results) / MANIFEST_NAME, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def render_results_card(manifest: Mapping[str, Any], *, pretty_name: str, license: str) -> str:
    """README.md of a result folder: YAML front matter from data, prose from cards/results.md.j2."""
    from promptgen.cards import card_environment
    from promptgen.hubfolder import yaml_dump

    configs = manifest.get("configs", {})
    header = {
        "pretty_name": pretty_name,
        "license": license,
        "tags": ["social-bias", "llm-evaluation", "model-results"],
        "configs": [
            {"config_name": name, "data_files": [{"split": "test", "path": f"data/{name}/*/part-*.parquet"}]}
            for name in configs
        ],
    }
    runs = manifest.get("runs", {})
    body = (
        card_environment()
        .get_template(CARD_TEMPLATE)
        .render(pretty_name=pretty_name, configs=configs, runs=runs, first_config=next(iter(configs), "CONFIG"))
    )
    return f"---\n{yaml_dump(header)}---\n\n{body.lstrip()}"


def write_card(results: Path, manifest: Mapping[str, Any], *, pretty_name: str, license: str) -> Path:
    path = Path(results) / "README.md"
    atomic_write_text(path, render_results_card(manifest, pretty_name=pretty_name, license=license))
    return path
