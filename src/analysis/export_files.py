"""`probes export` at the edges: read and check the results, convert (the format's writer), write the folder atomically.

Everything is checked before anything is written: the output target (`check_output`: never an
input, never another command's folder), the format and `--round`, the results against the
prompts (the fingerprint and prompt hashes of `analysis.pipeline.collect`), and what the
format can hold. The files are then written into a staging folder beside the target and
renamed into place, so a refused or failed export leaves nothing behind. The folder carries
`export_manifest.json` (what was exported, from which prompts and results), which also marks
it as an export that `--overwrite` may replace.

The formats: `jsonl` (`analysis.export`), the project's own, and each probe's own, declared by its
analysis (`ProbeAnalysis.export_formats`), which this module finds through the registry and names none of.
Without `--format`, the results' probe's first format is written where it has one (its paper's
tool reads it), else JSONL (`default_format`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promptgen.core.errors import OutputError, ProbeError
from promptgen.core.files import make_staging_dir, removed_on_error, swap_into_place, write_text, writing
from promptgen.core.outputs import Layout, Output, check_output
from promptgen.core.release_format import load_format
from promptgen.core.version import __version__
from promptgen.probe_registry import probes

from . import export as jsonl
from .export_format import ExportFormat, ExportRows, check_decimals, format_helps
from .pipeline import collect
from .probe_part import analysis_of, export_formats

EXPORT_MANIFEST = "export_manifest.json"


def export_format(name: str) -> ExportFormat:
    """The writer of `--format NAME`: `jsonl`, or the probe's that declares it (`ProbeAnalysis.export_formats`)."""
    if name == jsonl.JSONL:
        return jsonl.FORMAT
    return load_format(name, export_formats()[name])


def default_format(row_probes: Sequence[str]) -> str:
    """`--format`'s default for results holding these `probe` values: their probe's first export format when
    they are one probe's rows and it has one (its paper's tool reads them), else `jsonl`."""
    owners = {spec.name: spec for spec in probes().values() for value in row_probes if value in spec.row_probes}
    if len(owners) == 1:
        (spec,) = owners.values()
        return analysis_of(spec).default_export or jsonl.JSONL
    return jsonl.JSONL


def _rounding_check(name: str, decimals: int | None) -> None:
    if decimals is not None and not export_format(name).rounds:
        rounding = [n for n in format_helps() if export_format(n).rounds]
        raise ProbeError(f"--round applies to --format {', '.join(rounding)}; {name} keeps every value")


def _exported_files(folder: Path) -> list[str] | None:
    """The files an export wrote into `folder`: its manifest and the files the manifest lists."""
    try:
        files = json.loads((folder / EXPORT_MANIFEST).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return [EXPORT_MANIFEST, *(f for f in files if isinstance(f, str))] if isinstance(files, dict) else None


def export_output() -> Output:
    """An earlier export: its manifest and the files it lists (any format's: the JSONL files, the release
    layout's `closed_ended/<setting>/<dimension>/<model>/*.csv`, ...), and nothing else anywhere in it."""
    formats = [export_format(name) for name in format_helps()]
    layout = Layout(
        required=(EXPORT_MANIFEST,),
        files=(EXPORT_MANIFEST, *(pattern for fmt in formats for pattern in fmt.files)),
        folders=tuple(pattern for fmt in formats for pattern in fmt.folders),
        listed=_exported_files,
    )
    return Output("export folder", owns=layout)


@dataclass(frozen=True)
class ExportRequest:
    """One `probes export`: a results folder, the prompts it was scored on, the format and the target folder."""

    results: str | Path
    prompts: str | Path
    out: str | Path
    #: None: the results' probe's own format where it has one, else jsonl (`default_format`)
    format: str | None = None
    #: decimals of the written probabilities (formats that round); None: full precision
    decimals: int | None = None
    configs: Sequence[str] | None = None
    revision: str | None = None
    results_revision: str | None = None
    overwrite: bool = False

    def __post_init__(self) -> None:
        known = format_helps()
        if self.format is not None and self.format not in known:
            raise ProbeError(f"--format must be one of {', '.join(known)}, got {self.format!r}")
        check_decimals(self.decimals)
        if self.format is not None:
            _rounding_check(self.format, self.decimals)


@dataclass(frozen=True)
class ExportResult:
    """The folder written, and each file in it (relative path -> rows)."""

    path: Path
    files: dict[str, int] = field(default_factory=dict)
    #: configs of the results that the format cannot hold, left out (with why)
    skipped: list[str] = field(default_factory=list)
    #: the format written (the default's choice, when none was given)
    format: str = jsonl.JSONL


def export(request: ExportRequest) -> ExportResult:
    """`probes export`: check everything, convert, and write the export folder `request.out` (atomically)."""
    inputs = [("--prompts", request.prompts), ("RESULTS", request.results)]
    out = check_output(request.out, export_output(), inputs=inputs, overwrite=request.overwrite)
    collected = collect(
        request.prompts,
        [request.results],
        configs=request.configs,
        revision=request.revision,
        results_revision=request.results_revision,
        drop=(),
        allow_flag=None,  # an export writes the results as scored: it has no flag to take other prompts
    )
    if not any(collected.joined.values()):
        raise ProbeError(f"results {request.results}: no result rows to export")
    name = request.format or default_format(list(collected.joined))
    _rounding_check(name, request.decimals)
    rows = ExportRows(collected.joined, request.decimals, request.configs is not None, str(request.results))
    files = export_format(name).export(rows)
    manifest = _manifest(request, name, collected.provenance, files.configs, files.rows, files.skipped)
    _write(out, files.texts, manifest, overwrite=request.overwrite)
    return ExportResult(out, dict(sorted(files.rows.items())), files.skipped, name)


def _manifest(
    request: ExportRequest,
    name: str,
    provenance: dict[str, Any],
    configs: list[str],
    rows: dict[str, int],
    skipped: list[str],
) -> dict[str, Any]:
    return {
        "format": name,
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
