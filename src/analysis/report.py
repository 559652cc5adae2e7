"""Writing an analysis: tables as CSV and parquet, figures as PNG, one self-contained report.html.

I/O only; every number comes from `analysis.pipeline`. The folder is assembled in a temporary
sibling and swapped into place, so a failed or killed analysis never leaves a half-written
report where a finished one was. The HTML embeds its figures (base64 PNG) and styles, so the
one file can be mailed or attached to a paper's supplement; the CSV/parquet files are the
full-precision tables.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
from jinja2 import Environment, FileSystemLoader, select_autoescape

from promptgen.core.errors import OutputError
from promptgen.core.files import make_staging_dir, removed_on_error, swap_into_place, writing
from promptgen.core.outputs import Input, Layout, Output, check_output, write_inventory
from promptgen.core.secrets import known_secrets, scrub, scrub_value
from promptgen.core.version import __version__

from . import pipeline
from .csv_cells import csv_text
from .headlines import RUN_LABEL, run_labels, with_run_label
from .pipeline import Analysis, AnalysisRequest
from .probe_options import probe_option_values
from .probes import OVERVIEW, probe_tables, section_headlines, section_of
from .probes import sections as section_order

TEMPLATES = Path(__file__).parent / "templates"
#: rows of a table shown in the HTML; the CSV next to it has them all
HTML_ROWS = 60
#: the overview's tables: what each is, shown above it (each probe's own are its `ProbeTables.descriptions`)
OVERVIEW_DESCRIPTIONS = {
    "refusals": "Items, refused items and refusal rate per config and model run (refused items are left out of means).",
}
#: the heading of the tables no probe claims (`analysis.probes.OVERVIEW`): after the probes' sections
OVERVIEW_TITLE = "Refusals"


@dataclass(frozen=True)
class TableTexts:
    """What the report says about the tables: each one's description, which open, the notes (every probe's)."""

    descriptions: dict[str, str]
    opened: frozenset[str]
    section_notes: dict[str, str]
    notes: tuple[Callable[[str, Any], Any], ...]

    @classmethod
    def of_probes(cls) -> TableTexts:
        computed = [tables for _, _, tables in probe_tables()]
        return cls(
            {**OVERVIEW_DESCRIPTIONS, **{k: v for t in computed for k, v in t.descriptions.items()}},
            frozenset({"refusals", *(name for t in computed for name in t.headline_tables)}),
            {k: v for t in computed for k, v in t.section_notes.items()},
            tuple(t.table_note for t in computed if t.table_note is not None),
        )

    def note(self, name: str, options: Any) -> Any:
        """The first note a probe's module has for this table (HTML), else empty."""
        return next((n for n in (note(name, options) for note in self.notes) if n), "")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if value != value:  # NaN
            return "NaN"
        return f"{value:.4g}"
    return str(value)


def table_html(table: pd.DataFrame) -> str:
    """The first HTML_ROWS rows as an HTML table, 4 significant digits, long cells wrapped."""
    shown = table.head(HTML_ROWS)
    return shown.to_html(
        index=False, border=0, classes="table", formatters=dict.fromkeys(shown.columns, _fmt), na_rep="NaN", escape=True
    )


def png_data_uri(png: bytes) -> str:
    """A PNG file's bytes as the `src` of an <img>: the report page embeds the very figure files it writes."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def render_html(analysis: Analysis, figure_uris: dict[str, str], generated: str) -> str:
    """The report page (pure: the figures come as data URIs).

    The page tells its story first: each probe section opens with the short labels of its runs
    and its headline numbers (`analysis.headlines`), then its figures, then its tables, each
    table's name a link to its `tables/<name>.csv`. The tables no probe claims (refusals) follow
    the probes' sections. In every table shown the run columns (model path, revision, scoring
    JSON) are one label column, and the labels are resolved once, in the provenance at the end.
    The CSV/parquet tables keep the full run columns.
    """

    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html", "j2"]))
    texts = TableTexts.of_probes()
    labels = run_labels(analysis.tables)
    sections: dict[str, dict[str, Any]] = {}

    def section(name: str) -> dict[str, Any]:
        if name not in sections:
            title = OVERVIEW_TITLE if name == OVERVIEW else name
            anchor = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
            sections[name] = {
                "title": title,
                "id": anchor,
                "note": "",
                "headline": None,
                "runs": set(),
                "figures": [],
                "tables": [],
            }
        return sections[name]

    for name, table in analysis.tables.items():
        shown = with_run_label(table, labels)
        entry = {
            "name": name,
            "description": texts.descriptions.get(name, ""),
            "note": texts.note(name, analysis.options),
            "rows": len(table),
            "html": table_html(shown),
            "open": name in texts.opened,
            "truncated": len(table) > HTML_ROWS,
        }
        section(section_of(name))["tables"].append(entry)
        for prefix, note in texts.section_notes.items():
            if name.startswith(prefix):
                section(section_of(name))["note"] = note
        if RUN_LABEL in shown.columns:
            section(section_of(name))["runs"].update(shown[RUN_LABEL])
    for name, frame in section_headlines(analysis.tables).items():
        section(name)["headline"] = table_html(frame)
    for sec, name, _ in analysis.figures:
        section(sec)["figures"].append({"name": name, "uri": figure_uris[name]})
    for entry in sections.values():
        entry["runs"] = sorted(entry["runs"])
    # each probe in registry order (`analysis.probes`), then the overview's tables: headlines come first
    order = [s for s in section_order() if s != OVERVIEW] + [OVERVIEW]
    runs = [
        {"label": label, "model": model, "model_revision": revision, "scoring": scoring}
        for (model, revision, scoring), label in labels.items()
    ]
    return env.get_template("report.html.j2").render(
        sections=[(s, sections[s]) for s in order if s in sections],
        provenance=analysis.provenance,
        options=analysis.options,
        probe_options=probe_option_values(analysis.options),
        problems=analysis.problems,
        warnings=getattr(analysis, "warnings", []),
        refused_all=getattr(analysis, "refused_all", []),
        notes=getattr(analysis, "notes", []),
        runs=runs,
        version=__version__,
        generated=generated,
    )


#: a report folder: what `write_report` writes, and nothing else (its marker: no file is added for it)
REPORT_OUTPUT = Output(
    "report",
    owns=Layout(
        required=("report.html",),
        files=("report.html", "tables/*.csv", "tables/*.parquet", "figures/*.png"),
        folders=("tables", "figures"),
    ),
)


def check_report_target(out_dir: str | Path, *, overwrite: bool, inputs: Sequence[Input] = ()) -> Path:
    """`promptgen.core.outputs.check_output` for a report folder: only an earlier report is ever replaced."""
    return check_output(out_dir, REPORT_OUTPUT, overwrite=overwrite, inputs=inputs)


def scrubbed_table(table: pd.DataFrame, secrets: Sequence[str]) -> pd.DataFrame:
    """`table` with every string cell and column name scrubbed (`promptgen.core.secrets.scrub`).

    A report's tables quote what models answered (the refusal table's first refused answers) and
    what users named (model names): either may hold a secret, and the tables are what people share.
    """
    out = table.rename(columns=lambda c: scrub_value(c, secrets))
    for column in out.columns[[pd.api.types.is_object_dtype(t) or pd.api.types.is_string_dtype(t) for t in out.dtypes]]:
        values = out[column].tolist()
        clean = {v: scrub(v, secrets) for v in set(values) if isinstance(v, str)}  # each distinct text once
        out[column] = [clean[v] if isinstance(v, str) else scrub_value(v, secrets) for v in values]
    return out


def for_people(analysis: Analysis) -> Analysis:
    """The analysis as a report shows it: every text scrubbed of secrets, the figures' texts too (in place).

    The one scrubber (`promptgen.core.secrets`) stderr, stdout and publish use: a report, its tables
    and its figures are the files people mail and attach, and they quote model answers verbatim.
    """
    secrets = known_secrets()
    for _, _, figure in analysis.figures:
        for text in figure.findobj(lambda artist: hasattr(artist, "get_text") and hasattr(artist, "set_text")):
            if isinstance(current := text.get_text(), str) and (clean := scrub(current, secrets)) != current:
                text.set_text(clean)
    return replace(
        analysis,
        tables={scrub(name, secrets): scrubbed_table(table, secrets) for name, table in analysis.tables.items()},
        provenance=scrub_value(analysis.provenance, secrets),
        problems=scrub_value(analysis.problems, secrets),
        warnings=scrub_value(analysis.warnings, secrets),
        refused_all=scrub_value(analysis.refused_all, secrets),
        notes=scrub_value(analysis.notes, secrets),
    )


def write_report(analysis: Analysis, out_dir: Path, *, overwrite: bool = False) -> Path:
    """Write tables/, figures/ and report.html into `out_dir` (atomically replaced as a whole), scrubbed of secrets."""
    analysis = for_people(analysis)
    out_dir = check_report_target(out_dir, overwrite=overwrite)
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = make_staging_dir(out_dir.parent, out_dir.name)
    except OSError as exc:  # a read-only parent: the first write fails here
        raise OutputError(f"cannot write the report into {out_dir.parent}: {exc.strerror or exc}") from exc
    with writing("the report", out_dir), removed_on_error(tmp):
        (tmp / "tables").mkdir()
        (tmp / "figures").mkdir()
        for name, table in analysis.tables.items():
            (tmp / "tables" / f"{name}.csv").write_text(csv_text(table), encoding="utf-8")
            table.to_parquet(tmp / "tables" / f"{name}.parquet", index=False)
        uris: dict[str, str] = {}
        for _, name, figure in analysis.figures:
            # drawn once: the page embeds the PNG file (drawing is most of a report's time)
            png = tmp / "figures" / f"{name}.png"
            figure.savefig(png, dpi=150, bbox_inches="tight")
            uris[name] = png_data_uri(png.read_bytes())
        generated = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        page = scrub(render_html(analysis, uris, generated))  # the page's own texts (labels, options) too
        (tmp / "report.html").write_text(page, encoding="utf-8")
        write_inventory(tmp)  # what --overwrite may replace next time (`REPORT_OUTPUT`)
        swap_into_place(tmp, out_dir, overwrite=overwrite)
    return out_dir


def analyze(
    request: AnalysisRequest | str | Path,
    results: Sequence[str | Path] | None = None,
    out_dir: str | Path | None = None,
    **options: Any,
) -> tuple[Analysis, Path]:
    """`probes analyze`: recompute every metric (`pipeline.analyze`) and write the report folder `request.out`.

    Takes an `AnalysisRequest`, or its fields: `analyze(prompts, results, out_dir, options=...)`.
    The output folder is checked before the analysis runs, so a folder that may not be
    replaced costs no computation.
    """
    if not isinstance(request, AnalysisRequest):
        request = AnalysisRequest(request, results, out_dir, **options)  # type: ignore[arg-type]
    elif results is not None or out_dir is not None or options:
        raise TypeError("analyze() takes an AnalysisRequest or its fields, not both")
    if request.out is None:
        raise TypeError("analyze() writes a report: give its folder (AnalysisRequest.out)")
    inputs = [("--prompts", request.prompts), *(("--results", r) for r in request.results)]
    out = check_report_target(request.out, overwrite=request.overwrite, inputs=inputs)
    analysis = pipeline.analyze(request)
    return analysis, write_report(analysis, out, overwrite=request.overwrite)
