"""Validate a whole results folder (`runners.results` layout): what `probes publish` requires of it.

A published result folder is cited and re-analysed by others, who cannot see how it was
made; what they load must be what its manifest and card describe. Checked:

- the folder holds only what its layout defines (`foreign_files`): the card, the manifest,
  and per key folder `data/<config>/<key>/` its key.json and the runner's part files;

and, per key folder (`validate_results`):

- every part is a readable parquet file (a truncated part from a full disk or a copy cut
  short raises only when someone loads the dataset);
- every part has exactly the columns and types of `runners.results.RESULT_SCHEMA`;
- every row's numbers keep `runners.results.rules` (a distribution free of NaN unless refused,
  summing to 1; `chosen_index` its argmax), named by part, row id and column;
- one row per (key, id): two rows for one item would count it twice in every mean, and which
  one a reader keeps would depend on file order;
- key.json is a JSON object (`runners.results.read_key_file`, the one reader of it), and the
  rows' key columns (model, revision, scoring, ...) hold exactly its values, so no row of
  another model or setting hides under this key;
- `results_manifest.json` lists exactly the key folders that hold parts, with their row counts;
- a finished run recorded each key folder, and an import all of its configs (`runners.results.unfinished_problem`,
  the rule `analyze` and `export` read by too): the parts of a run or import killed or stopped on an error have no
  record of the prompt build they were scored on, and are named with the command that finishes them;
- each config's runs were scored on one prompt build (`mixed_prompts`): item ids derive from an
  item's factors, not its text, so rows of two builds would join to one build's prompts.

Every problem is collected (not just the first) so one dry run names all of them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from promptgen.core.errors import ProbeError
from runners.results import (
    CARD_NAME,
    DATA_DIR,
    KEY_FILE,
    MANIFEST_NAME,
    RESULT_SCHEMA,
    KeyFileError,
    part_content,
    part_files,
    read_key_file,
    read_manifest,
    unfinished_problem,
)
from runners.results.rules import part_problems

#: the only files of a result folder outside its key folders
TOP_FILES = (CARD_NAME, MANIFEST_NAME)


def foreign_files(root: Path, paths: Iterable[str]) -> list[str]:
    """The posix paths among `paths` (relative to the result folder `root`) that its layout does not define."""
    foreign = []
    part_names: dict[str, set[str]] = {}
    for rel in paths:
        parts = rel.split("/")
        if len(parts) == 1 and rel in TOP_FILES:
            continue
        if len(parts) == 4 and parts[0] == DATA_DIR:
            key_dir = "/".join(parts[:3])
            if key_dir not in part_names:
                part_names[key_dir] = {p.name for p in part_files(root / key_dir)}
            if parts[3] == KEY_FILE or parts[3] in part_names[key_dir]:
                continue
        foreign.append(rel)
    return foreign


@dataclass
class ResultsReport:
    """What `validate_results` read and every problem it found (empty when publishable)."""

    configs: int = 0
    keys: int = 0
    parts: int = 0
    rows: int = 0
    problems: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The validation as the dry run shows it."""
        return [
            f"checked: {self.parts} parts of {self.keys} keys in {self.configs} configs are readable parquet "
            f"with the result schema; {self.rows:,} rows, one per (key, id); rows match their {KEY_FILE}",
            f"checked: {MANIFEST_NAME} lists exactly these keys with these row counts, each recorded by a finished run",
        ]


def _read_key(folder: Path, rel: str, problems: list[str]) -> dict[str, Any]:
    """The key folder's key, or {} with its problem named by the folder's path inside the result folder."""
    try:
        return read_key_file(folder)
    except KeyFileError as exc:
        problems.append(f"{rel}/{KEY_FILE} {exc.problem}")
        return {}


def schema_problems(part: str, schema: pa.Schema) -> list[str]:
    """How a part's columns differ from `RESULT_SCHEMA`: extra, missing or of another type, by name.

    Readers load the parts with the card's features, and an extra column publishes whatever was
    put there (a path, a prompt, a note): a part holds the runner's columns, nothing else.
    """
    problems = [
        f"part {part}: column {name!r} is not in the result schema"
        for name in schema.names
        if name not in RESULT_SCHEMA.names
    ]
    for expected in RESULT_SCHEMA:
        index = schema.get_field_index(expected.name)
        if index < 0:
            problems.append(
                f"part {part}: no column {expected.name!r} (the result schema has it; a part written before the "
                "column existed gets it, null, when `probes run` finishes that key again: nothing is rescored)"
            )
        elif not schema.field(index).type.equals(expected.type):
            problems.append(
                f"part {part}: column {expected.name!r} is {schema.field(index).type}, "
                f"the result schema says {expected.type}"
            )
    return problems


def _check_key_folder(root: Path, folder: Path, report: ResultsReport) -> int | None:
    """Check one key folder's parts; return its number of distinct ids (None when unreadable)."""
    rel = folder.relative_to(root).as_posix()
    key = _read_key(folder, rel, report.problems)
    seen: dict[str, list[str]] = defaultdict(list)
    contents: set[str] = set()
    readable = True
    for path in part_files(folder):
        report.parts += 1
        part = path.relative_to(root).as_posix()
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException) as exc:
            report.problems.append(f"unreadable part {part} ({' '.join(str(exc).split())})")
            readable = False
            continue
        contents |= {c for c in (part_content(table.schema),) if c}
        report.problems += schema_problems(part, table.schema)
        report.problems += part_problems(part, table)  # the numbers' rule (`runners.results.rules`)
        if "id" not in table.column_names:
            report.problems.append(f"part {part} has no `id` column")
            readable = False
            continue
        ids = table.column("id").to_pylist()
        if any(i is None for i in ids):
            report.problems.append(f"part {part} has rows without an id")
        for name, expected in key.items():
            if name in table.column_names:
                values = set(table.column(name).to_pylist())
                if values != {expected}:
                    other = sorted(map(str, values - {expected}))[:2]
                    report.problems.append(
                        f"part {part}: column {name!r} holds {other}, its {KEY_FILE} says {expected!r}"
                    )
        report.rows += len(ids)
        for i in ids:
            seen[i].append(path.name)
    if len(contents) > 1:
        report.problems.append(
            f"{rel}: rows scored on {len(contents)} prompt builds (a run on a rebuild did not check every stored "
            "item); rerun the config on one build over all its items, or score the builds into separate folders"
        )
    dups = {i: files for i, files in seen.items() if len(files) > 1}
    if dups:
        first = sorted(dups)[0]
        report.problems.append(
            f"duplicate ids under {rel}: {len(dups)} id(s) appear more than once, e.g. {first!r} in "
            f"{', '.join(sorted(dups[first]))}"
        )
    return len(seen) if readable else None


def prompt_identity(prompts: Mapping[str, Any]) -> str | None:
    """What names the prompt content a run scored (its manifest's `prompt_dataset`); None when nothing does.

    The build's fingerprint; else the Hub commit it was read at; else (a build whose
    build_manifest.json has no fingerprint, or a folder made by hand) `data_sha256`, the digest of
    the config's data files that `probes run` hashed (`runners.prompts`): the same bytes ask the
    same prompts wherever the folder is, and a path would name neither (it moves, and is private).
    None only for a run recorded before `data_sha256` was: an unknown build, the same as no other
    (`mixed_prompts`, `check_same_prompts`).
    """
    if prompts.get("fingerprint"):
        return f"fingerprint {str(prompts['fingerprint'])[:12]}"
    if prompts.get("commit"):
        return f"{prompts.get('repo_id')}@{str(prompts['commit'])[:12]}"
    if prompts.get("data_sha256"):
        return f"data files {str(prompts['data_sha256'])[:12]}"
    return None


#: how `mixed_prompts` and `check_same_prompts` name a build `prompt_identity` cannot name
UNKNOWN_BUILD = "a build of unrecorded identity"


def mixed_prompts(manifest: Mapping[str, Any]) -> list[str]:
    """One line per config whose recorded runs were scored on more than one prompt build.

    A run of unknown build (`prompt_identity` None) counts as a build of its own: beside any
    other run of its config, nothing shows they scored the same prompts.
    """
    builds: dict[str, set[str]] = defaultdict(set)
    for run_id, run in manifest.get("runs", {}).items():
        prompts = run.get("prompt_dataset", {})
        ident = prompt_identity(prompts)
        builds[str(prompts.get("config"))].add(ident if ident is not None else f"{UNKNOWN_BUILD} (run {run_id})")
    return [
        f"config {config!r} holds rows scored on {len(found)} prompt builds ({', '.join(sorted(found))}): one results "
        "folder holds the scores of one build of each config"
        for config, found in sorted(builds.items())
        if len(found) > 1
    ]


def check_same_prompts(results: Path, provenance: Mapping[str, Any], *, rescore_changed: bool = False) -> None:
    """Refuse, in one line, a run on another build of a config's prompts than the folder's rows were scored on.

    With `rescore_changed` (`probes run --rescore-changed`) such a run goes on: every stored
    item it selects is checked against this build (`runners.results.resume`) and rescored when its prompt
    changed. Items it does not select keep the other build's scores, which `validate_results`
    (publish) refuses until a run has checked them all.
    """
    if rescore_changed:
        return
    mine = prompt_identity(provenance)
    for run in read_manifest(results).get("runs", {}).values():
        theirs = run.get("prompt_dataset", {})
        if theirs.get("config") != provenance.get("config"):
            continue
        other = prompt_identity(theirs)
        if mine is None or other != mine:  # an unknown build is the same as no other, itself included
            other, mine = other or UNKNOWN_BUILD, mine or UNKNOWN_BUILD
            raise ProbeError(
                f"{Path(results) / MANIFEST_NAME}: config {provenance.get('config')!r} holds rows scored on another "
                f"build of its prompts ({other}; this run's: {mine}): score this build into another --out folder, "
                "or pass --rescore-changed to rescore the items whose prompt changed"
            )


def validate_results(root: Path, manifest: Mapping[str, Any]) -> ResultsReport:
    """Read every part of the result folder `root` and compare with its manifest; never raises for content."""
    report = ResultsReport()
    report.problems.extend(mixed_prompts(manifest))
    data = Path(root) / DATA_DIR
    counted: dict[tuple[str, str], int | None] = {}
    for config_dir in sorted(p for p in data.iterdir() if p.is_dir() and not p.name.startswith(".")):
        report.configs += 1
        for folder in sorted(p for p in config_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if not part_files(folder):
                continue
            report.keys += 1
            counted[(config_dir.name, folder.name)] = _check_key_folder(Path(root), folder, report)
    for config, key in sorted(counted):
        problem = unfinished_problem(Path(root), manifest, config, key)
        if problem is not None:
            report.problems.append(problem)
    listed = manifest.get("configs")
    if not isinstance(listed, dict):
        report.problems.append(f"{MANIFEST_NAME} has no `configs` summary of the parts")
        return report
    for (config, key), rows in sorted(counted.items()):
        entry = listed.get(config, {}).get(key) if isinstance(listed.get(config), dict) else None
        if not isinstance(entry, dict):
            report.problems.append(f"{MANIFEST_NAME} does not list {DATA_DIR}/{config}/{key}")
        elif rows is not None and entry.get("rows") != rows:
            report.problems.append(
                f"{MANIFEST_NAME} says {entry.get('rows')} rows for {DATA_DIR}/{config}/{key}, its parts hold {rows}"
            )
    for config, keys in sorted(listed.items()):
        for key in sorted(keys if isinstance(keys, dict) else {}):
            if (config, key) not in counted:
                report.problems.append(f"{MANIFEST_NAME} lists {DATA_DIR}/{config}/{key}, which has no parts")
    return report
