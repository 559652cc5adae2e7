"""`probes export` at the edges: read and check the results, convert (`analysis.export`), write the folder atomically.

Everything is checked before anything is written: the output target (`check_output`: never an
input, never another command's folder), the format and `--round`, the results against the
prompts (the fingerprint and prompt hashes of `analysis.pipeline.collect`), and what the
format can hold. The files are then written into a staging folder beside the target and
renamed into place, so a refused or failed export leaves nothing behind. The folder carries
`export_manifest.json` (what was exported, from which prompts and results), which also marks
it as an export that `--overwrite` may replace.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from promptgen.core.errors import OutputError, ProbeError
from promptgen.core.files import make_staging_dir, removed_on_error, swap_into_place, write_text, writing
from promptgen.core.outputs import Layout, Output, check_output
from promptgen.core.version import __version__

from .attribution.probe import ROWS as RELEASE_ROWS  # the `probe` value of the release's items
from .attribution.release import RELEASE_CONFIGS, is_release_config
from .csv_cells import csv_text
from .export import FORMATS, TALENT_OR_LUCK_CSV, check_decimals, jsonl_lines, release_csv_files
from .pipeline import collect

EXPORT_MANIFEST = "export_manifest.json"
#: the top folder of the release layout (the release's `outputs/closed_ended/...`)
RELEASE_TOP = "closed_ended"


def _exported_files(folder: Path) -> list[str] | None:
    """The files an export wrote into `folder`: its manifest and the files the manifest lists."""
    try:
        files = json.loads((folder / EXPORT_MANIFEST).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return [EXPORT_MANIFEST, *(f for f in files if isinstance(f, str))] if isinstance(files, dict) else None


#: an earlier export: its manifest and the files it lists (the JSONL files, or the release layout's
#: `closed_ended/<setting>/<dimension>/<model>/*.csv`), and nothing else anywhere in it
EXPORT_LAYOUT = Layout(
    required=(EXPORT_MANIFEST,),
    files=(EXPORT_MANIFEST, "*.jsonl", f"{RELEASE_TOP}/**/*.csv"),
    folders=(RELEASE_TOP, f"{RELEASE_TOP}/**"),
    listed=_exported_files,
)
EXPORT_OUTPUT = Output("export folder", owns=EXPORT_LAYOUT)


@dataclass(frozen=True)
class ExportRequest:
    """One `probes export`: a results folder, the prompts it was scored on, the format and the target folder."""

    results: str | Path
    prompts: str | Path
    out: str | Path
    format: str = TALENT_OR_LUCK_CSV
    #: decimals of the written probabilities (talent-or-luck-csv); None: full precision
    decimals: int | None = None
    configs: Sequence[str] | None = None
    revision: str | None = None
    results_revision: str | None = None
    overwrite: bool = False

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise ProbeError(f"--format must be one of {', '.join(FORMATS)}, got {self.format!r}")
        check_decimals(self.decimals)
        if self.decimals is not None and self.format != TALENT_OR_LUCK_CSV:
            raise ProbeError(f"--round applies to --format {TALENT_OR_LUCK_CSV}; {self.format} keeps every value")


@dataclass(frozen=True)
class ExportResult:
    """The folder written, and each file in it (relative path -> rows)."""

    path: Path
    files: dict[str, int] = field(default_factory=dict)
    #: configs of the results that the format cannot hold, left out (with why)
    skipped: list[str] = field(default_factory=list)


def export(request: ExportRequest) -> ExportResult:
    """`probes export`: check everything, convert, and write the export folder `request.out` (atomically)."""
    inputs = [("--prompts", request.prompts), ("RESULTS", request.results)]
    out = check_output(request.out, EXPORT_OUTPUT, inputs=inputs, overwrite=request.overwrite)
    collected = collect(
        request.prompts,
        [request.results],
        configs=request.configs,
        revision=request.revision,
        results_revision=request.results_revision,
        drop=(),
        allow_flag=None,  # an export writes the results as scored: it has no flag to take other prompts
    )
    joined = {config: frame for by_config in collected.joined.values() for config, frame in by_config.items()}
    if not joined:
        raise ProbeError(f"results {request.results}: no result rows to export")
    skipped: list[str] = []
    if request.format == TALENT_OR_LUCK_CSV:
        joined, skipped = _release_configs(request, collected.joined)
        frames = release_csv_files(joined, request.decimals)
        texts = {path: csv_text(frame) for path, frame in frames.items()}
        rows = {path: len(frame) for path, frame in frames.items()}
    else:
        texts = {f"{c}.jsonl": "".join(f"{line}\n" for line in jsonl_lines(frame)) for c, frame in joined.items()}
        rows = {f"{config}.jsonl": len(frame) for config, frame in joined.items()}
    manifest = _manifest(request, collected.provenance, sorted(joined), rows, skipped)
    _write(out, texts, manifest, overwrite=request.overwrite)
    return ExportResult(out, dict(sorted(rows.items())), skipped)


def _release_configs(
    request: ExportRequest, by_probe: dict[str, dict[str, pd.DataFrame]]
) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """The `*_release` configs to write, and the others left out; an error when nothing can be written."""
    foreign = {config: probe for probe, configs in by_probe.items() if probe != RELEASE_ROWS for config in configs}
    if foreign:
        config, probe = sorted(foreign.items())[0]
        raise ProbeError(
            f"results {request.results}: config {config!r} holds {probe} items, not Talent-or-Luck ones; "
            f"--format {TALENT_OR_LUCK_CSV} writes the Talent-or-Luck release's files only"
        )
    attribution = by_probe.get(RELEASE_ROWS, {})
    release = {c: f for c, f in attribution.items() if is_release_config(c)}
    others = sorted(set(attribution) - set(release))
    if request.configs is not None and others:
        raise ProbeError(
            f"--config {others[0]} cannot be written in the release's layout: only the release's own items "
            f"({', '.join(RELEASE_CONFIGS)}) can"
        )
    if not release:
        raise ProbeError(
            f"results {request.results} hold no *_release config (found {', '.join(others) or 'none'}); "
            f"--format {TALENT_OR_LUCK_CSV} needs a model scored on {', '.join(RELEASE_CONFIGS)} "
            "(probes run DATASET --config single_actor_release ...)"
        )
    return release, [f"{c}: not one of the release's configs" for c in others]


def _manifest(
    request: ExportRequest, provenance: dict[str, Any], configs: list[str], rows: dict[str, int], skipped: list[str]
) -> dict[str, Any]:
    return {
        "format": request.format,
        "decimals": request.decimals,
        "configs": configs,
        "skipped": skipped,
        "files": rows,
        "prompts": provenance.get("prompts", {}),
        "results": provenance.get("results", []),
        "exporter_version": __version__,
    }


def _write(out: Path, texts: dict[str, str], manifest: dict[str, Any], *, overwrite: bool) -> None:
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = make_staging_dir(out.parent, out.name)
    except OSError as exc:
        raise OutputError(f"cannot write the export into {out.parent}: {exc.strerror or exc}") from exc
    with writing("the export", out), removed_on_error(tmp):
        for relative, text in texts.items():
            path = tmp / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            write_text(path, text)
        write_text(tmp / EXPORT_MANIFEST, json.dumps(manifest, indent=2, sort_keys=True, default=str) + "\n")
        swap_into_place(tmp, out, overwrite=overwrite)
