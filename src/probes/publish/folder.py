"""What is published: a Hub-ready folder of a known kind, checked before anything is planned.

Only the files its format defines (a result folder's: `runners.results.check.foreign_files`),
a prompt folder's data files matching its manifest, a result folder read in full
(`runners.results.check.validate_results`), no leak in any file (`content_check`); the checks
made are kept as lines for `--dry-run` (package docstring).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from promptgen.core.errors import ProbeError
from promptgen.core.layout import BUILD_MANIFEST
from promptgen.hub.read import check_data_files, read_build_manifest
from runners.model.identity import model_name_problem
from runners.results import CARD_NAME, KEY_FILE, MANIFEST_NAME, read_key_file, read_manifest
from runners.results.check import foreign_files, validate_results

from .content_check import scan_folder
from .local import DATA_PREFIX, Kind, LocalFile, LocalFolder, entry_problems, refusal, scan_files, walk

#: the card of either kind of folder: the dataset card with the `configs:` the Hub loads
CARD = CARD_NAME
#: the only files a prompt dataset folder has (`probes build`, docs/DESIGN.md section 2)
PROMPT_FILE_RE = re.compile(r"^(README\.md|build_manifest\.json|data/[^/]+/test-[0-9]{5}-of-[0-9]{5}\.parquet)$")

LEAK_CHECK_LINE = (
    "checked: no token or home-folder path in the card, any JSON value or any string of any parquet column"
)


def inspect_folder(local_dir: Path | str) -> LocalFolder:
    """Check that `local_dir` is a complete Hub-ready folder of a known kind and hash its files."""
    root = Path(local_dir)
    if not root.exists():
        raise ProbeError(f"{root}: no such folder (give a folder written by `probes build` or `probes run`)")
    if not root.is_dir():
        raise ProbeError(f"{root} is not a folder")
    has_build = (root / BUILD_MANIFEST).is_file()
    has_results = (root / MANIFEST_NAME).is_file()
    if has_build and has_results:
        raise ProbeError(f"{root} has both {BUILD_MANIFEST} and {MANIFEST_NAME}; publish prompts and results apart")
    if not has_build and not has_results:
        raise ProbeError(
            f"{root} is neither a prompt dataset folder (no {BUILD_MANIFEST}; written by `probes build`) "
            f"nor a result folder (no {MANIFEST_NAME}; written by `probes run`)"
        )
    if not (root / CARD).is_file():
        raise ProbeError(f"{root} has no {CARD} (the dataset card with the `configs:` the Hub loads); not Hub-ready")
    kind: Kind = "prompt" if has_build else "results"
    paths, links, odd = walk(root)
    problems = entry_problems(root, links, odd) + _unknown_files(kind, root, paths)
    if problems:
        fix = "publish only what the folder's format defines: move other files out, replace links by files"
        raise ProbeError(refusal(root, problems, fix))
    files = scan_files(root)
    if not any(f.path.startswith(DATA_PREFIX) for f in files):
        raise ProbeError(f"{root} has no data files under {DATA_PREFIX}")
    return _prompt_folder(root, files) if has_build else _results_folder(root, files)


def _unknown_files(kind: Kind, root: Path, paths: Iterable[str]) -> list[str]:
    """Files that the folder's format does not define: refused rather than uploaded unasked."""
    if kind == "prompt":
        unknown = [rel for rel in paths if not PROMPT_FILE_RE.match(rel)]
    else:
        unknown = foreign_files(root, paths)
    return [f"not part of a {kind} folder: {rel}" for rel in unknown]


def _prompt_folder(root: Path, files: tuple[LocalFile, ...]) -> LocalFolder:
    """A prompt dataset folder: its build manifest complete, its data files the manifest's, no leaks."""
    path = root / BUILD_MANIFEST
    manifest = read_build_manifest(root)
    for key in ("name", "version", "fingerprint"):
        if not isinstance(manifest.get(key), str) or not manifest[key]:
            raise ProbeError(f"{path}: missing or empty `{key}`; rebuild the folder with `probes build`")
    _check_prompt_files(path, manifest, files)
    _refuse_leaks(root, files)
    checks = (
        f"checked: {len(files)} files, all defined by the prompt dataset format, none a symlink",
        f"checked: every data file matches {BUILD_MANIFEST} (sha256)",
        LEAK_CHECK_LINE,
    )
    name, version, fingerprint = manifest["name"], manifest["version"], manifest["fingerprint"]
    return LocalFolder(root, "prompt", name, version, fingerprint, files, checks)


def _results_folder(root: Path, files: tuple[LocalFile, ...]) -> LocalFolder:
    """A result folder: every part read and matched with its key and the manifest, no leaks."""
    report = validate_results(root, read_manifest(root))
    if report.problems:
        raise ProbeError(refusal(root, report.problems, "fix or rerun the affected configs with `probes run`"))
    _refuse_leaks(root, files)
    _refuse_bad_model_names(root, files)
    checks = (
        f"checked: {len(files)} files, all defined by the result folder format, none a symlink",
        *report.lines(),
        LEAK_CHECK_LINE,
    )
    return LocalFolder(root, "results", root.resolve().name, None, None, files, checks)


def _check_prompt_files(manifest_path: Path, manifest: Mapping[str, Any], files: Iterable[LocalFile]) -> None:
    """The data files must be exactly the manifest's, byte for byte (`promptgen.hub.read.check_data_files`).

    Publishing a folder whose parquet files were edited or mixed with another build would put
    rows on the Hub that the fingerprint and the card do not describe.
    """
    found = {f.path: (f.size, f.sha256) for f in files if f.path.startswith(DATA_PREFIX)}
    check_data_files(manifest_path.parent, manifest, found)


def _refuse_leaks(root: Path, files: Iterable[LocalFile]) -> None:
    """Refuse content that must not go public (`content_check`): tokens and private paths, named by place."""
    problems = scan_folder(root, [f.path for f in files])
    if problems:
        fix = "remove them from the files (rebuild or rerun without them); a published file stays in the repo's history"
        raise ProbeError(refusal(root, problems, fix))


def _refuse_bad_model_names(root: Path, files: Iterable[LocalFile]) -> None:
    """Refuse a key whose model name `probes run` and `probes import` would refuse (`model_name_problem`):
    `org/m1\u200b` displays as `org/m1`, fullwidth letters as others, `org/../../x` reads as a path."""
    problems = []
    for rel in sorted(f.path for f in files if f.path.endswith("/" + KEY_FILE)):
        name = read_key_file((root / rel).parent).get("model")
        problem = model_name_problem(name) if isinstance(name, str) else "is not a string"
        if problem:
            problems.append(f"{rel} $.model: the model name {problem}")
    if problems:
        fix = "rerun or import those results under a model name that --model-name accepts"
        raise ProbeError(refusal(root, problems, fix))
