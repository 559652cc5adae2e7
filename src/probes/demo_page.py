"""The demo's landing page (`probes demo`'s report.html): a link to each probe's report, its notes and its steps."""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from pathlib import Path


@dataclass
class DemoStep:
    name: str
    seconds: float
    detail: str = ""


@dataclass
class DemoResult:
    """Where report.html is, how long each step took, and what the demo says of its runs."""

    report: Path
    steps: list[DemoStep] = field(default_factory=list)
    #: probes built from a synthetic stand-in for a missing corpus (their numbers test the pipeline only)
    synthetic: list[str] = field(default_factory=list)
    #: per probe, what the demo says of how it scored it (its plan's note)
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def synthetic_corpus(self) -> bool:
        return bool(self.synthetic)


def index_html(result: DemoResult, reports: dict[str, Path]) -> str:
    """The demo's landing page: a link to each probe's report and how long each step took."""
    links = "".join(
        f'<li><a href="{escape(str(path.relative_to(result.report.parent)))}">{escape(name)}</a></li>'
        for name, path in reports.items()
    )
    steps = "".join(
        f"<tr><td>{escape(s.name)}</td><td>{s.seconds:.1f} s</td><td>{escape(s.detail)}</td></tr>" for s in result.steps
    )
    synthetic = (
        f"<p><strong>{escape(', '.join(result.synthetic))} used a small synthetic corpus in its format</strong>"
        " (the corpus was not in --sources); its numbers test the pipeline only.</p>"
        if result.synthetic
        else ""
    )
    notes = "".join(f"<p>{escape(note)}</p>" for note in result.notes.values())
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>social-bias-probes demo</title>'
        "<style>body{font-family:system-ui,sans-serif;max-width:900px;margin:2rem auto}"
        "td{padding:.2rem .6rem;border-bottom:1px solid #eee}</style></head><body>"
        "<h1>social-bias-probes demo</h1><p>SmolLM2-135M-Instruct on small stratified subsets of the probes' datasets: "
        "a check that every stage runs, not a measurement of bias.</p>"
        f"{synthetic}{notes}<h2>Reports</h2><ul>{links}</ul><h2>Steps</h2><table>{steps}</table></body></html>"
    )
