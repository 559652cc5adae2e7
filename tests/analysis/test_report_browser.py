"""report.html in a real headless browser (Chromium through Playwright), at a phone's and a desktop's width.

The report is the analysis of two models' results on a small synthetic empathy build, recorded
as finished runs record them. The page must load with no console error, page error or failed
request, and every figure must be decoded. It must tell its story first: the headline numbers,
then the figures, then the tables, each table's name a link to its CSV. At 375 px the page must
not be wider than the screen: wide tables scroll inside their own boxes. A screenshot of each
width is written to the test's folder. The browser is the system's Chromium
(scripts/report_browser.py, installed by scripts/setup.sh); without one the test is skipped,
and fails under CI.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

import runners.results as res
from analysis.pipeline import AnalysisOptions, analyze
from analysis.report import write_report
from envent_fixture import write_recipe, write_sources
from promptgen.build import build

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("report_browser", REPO / "scripts" / "report_browser.py")
browser_helper = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(browser_helper)

CONFIG = "religion_P0S0T0"
SCORING = '{"choice_mode":"sentence"}'
#: model -> (seed, in-group boost of the intensity)
MODELS = {"org/model-a": (1, 10.0), "org/model-b": (2, 3.0)}
#: how far the page may exceed the viewport's width (sub-pixel rounding)
SLACK_PX = 1


def _write_results(results: Path, dataset: Path) -> None:
    """Each model's intensities for the config's items, recorded in results_manifest.json as a finished run."""
    files = sorted((dataset / "data" / CONFIG).glob("*.parquet"))
    frame = pd.concat([pq.read_table(p, columns=["id", "perceiver", "experiencer"]).to_pandas() for p in files])
    for model, (seed, boost) in MODELS.items():
        values = 50 + (frame["perceiver"] == frame["experiencer"]).to_numpy() * boost
        values = values + np.random.default_rng(seed).normal(0, 5, len(frame))
        key = res.ResultKey(model, f"{model[-1]}-rev", SCORING)
        folder = res.key_dir(results, CONFIG, key)
        res.write_key_file(folder, key)
        run = {"model": model, "model_revision": key.model_revision, "scoring": SCORING, "refused": False}
        rows = [{**run, "id": i, "expected_value": float(v)} for i, v in zip(frame["id"], values, strict=True)]
        res.write_part(folder, (0, 1), rows)
        entry = {"prompt_dataset": {"config": CONFIG}, "model": model, "key": key.slug, "items": len(rows)}
        res.update_manifest(results, f"{CONFIG}/{key.slug}/shard-0of1", {**entry, "backend": "test"})


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """report.html of two models' analysis (its tables/ and figures/ beside it)."""
    if browser_helper.chromium_path() is None:
        reason = "no Chromium found (scripts/setup.sh installs chromium-headless-shell as root)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("report_browser")
    recipe, sources = write_recipe(root / "recipe.yaml"), write_sources(root / "sources")
    dataset = build(str(recipe), out_dir=root / "datasets", sources=sources, max_events=6, configs=[CONFIG]).path
    _write_results(root / "results", dataset)
    analysis = analyze(dataset, [root / "results"], options=AnalysisOptions.from_flags(n_permutations=100))
    assert len(analysis.figures) >= 2
    return write_report(analysis, root / "report") / "report.html"


#: [headline block, first figure, first table outside the headline]: the three in DOM order
ORDER = """() => {
  const headline = document.querySelector('.headline');
  const figure = document.querySelector('.figures img');
  const table = [...document.querySelectorAll('table')].find(t => !t.closest('.headline'));
  const before = (a, b) => !!(a && b && (a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING));
  return {headline: !!headline, figure: !!figure, table: !!table,
          headline_first: before(headline, figure), figure_second: before(figure, table)};
}"""
#: every <img>: decoded, with a width
IMAGES = "() => [...document.images].map(i => ({alt: i.alt, complete: i.complete, width: i.naturalWidth}))"
#: the page's width, and each box wider than what it shows with its overflow-x
WIDTHS = """() => ({
  page: document.documentElement.scrollWidth,
  boxes: [...document.querySelectorAll('.scroll, .headline')].filter(e => e.scrollWidth > e.clientWidth)
    .map(e => getComputedStyle(e).overflowX),
})"""
#: each table title's link
LINKS = "() => [...document.querySelectorAll('details summary a')].map(a => a.getAttribute('href'))"


@pytest.mark.slow  # a dataset build, an analysis with figures and two browser pages: about 13 s
@pytest.mark.parametrize("size", [browser_helper.PHONE, browser_helper.DESKTOP], ids=["375px", "1440px"])
def test_report_reads_in_a_browser(report: Path, size: tuple[int, int], tmp_path: Path) -> None:
    with browser_helper.chromium() as browser, browser_helper.opened(browser, report, size) as (page, problems):
        images = page.evaluate(IMAGES)
        order = page.evaluate(ORDER)
        widths = page.evaluate(WIDTHS)
        links = page.evaluate(LINKS)
        shot = tmp_path / f"report-{size[0]}px.png"
        page.screenshot(path=str(shot))
    assert problems == []
    figures = sorted((report.parent / "figures").glob("*.png"))
    assert len(images) == len(figures) > 0
    assert all(i["complete"] and i["width"] > 0 for i in images), images
    assert order == {"headline": True, "figure": True, "table": True, "headline_first": True, "figure_second": True}
    assert widths["page"] <= size[0] + SLACK_PX, widths  # no sideways scrolling of the page itself
    assert all(overflow in ("auto", "scroll") for overflow in widths["boxes"]), widths
    if size == browser_helper.PHONE:
        assert widths["boxes"], "at 375 px some table is wider than the screen and scrolls in its box"
    tables = sorted(p.name for p in (report.parent / "tables").glob("*.csv"))
    assert sorted(Path(link).name for link in links) == tables
    assert all(link.startswith("tables/") and (report.parent / link).is_file() for link in links), links
    assert shot.stat().st_size > 1000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
