"""`probes demo` end to end on the real sources and SmolLM2, at a smaller size than the default."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from probes.demo import DemoSizes, demo

pytestmark = pytest.mark.slow  # the whole demo (build, SmolLM2 scoring, analysis): the slow tier (pytest -m slow)
TINY = DemoSizes(attribution_per_cell=2, games_per_cell=2, probing_items=3, empathy_events=2)


def test_demo_builds_scores_analyses_and_resumes(shared_sources: Path, smollm2: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    result = demo(tmp_path / "demo", sources=shared_sources, sizes=TINY, progress=lines.append)
    assert result.synthetic_corpus  # the crowd-enVent corpus is not among the shared sources
    index = result.report.read_text()
    for probe in ("talent-or-luck", "trust-game", "intergroup-empathy"):
        report = tmp_path / "demo" / "reports" / probe / "report.html"
        assert report.is_file() and f"reports/{probe}/report.html" in index
        assert any((report.parent / "figures").glob("*.png")), probe
    tables = tmp_path / "demo" / "reports"
    single = pd.read_csv(tables / "talent-or-luck" / "tables" / "attribution_single_actor.csv")
    assert set(single["dimension"]) == {"religion"} and (single["n_items"] == 2).all()  # 2 per cell, 24 cells
    gap = pd.read_csv(tables / "intergroup-empathy" / "tables" / "empathy_gap.csv")
    assert set(gap["refused_items"]) == {"excluded", "included"}
    assert (tables / "trust-game" / "tables" / "trust_game_anova.csv").is_file()
    assert "synthetic corpus" in index
    scored = [line for line in lines if re.match(r"\[demo\] score .*: ", line)]
    assert len(scored) == 4 and all("0 already done" in line for line in scored)

    # a second run reuses the datasets and every scored item
    lines.clear()
    demo(tmp_path / "demo", sources=shared_sources, sizes=TINY, overwrite=True, progress=lines.append)
    scored = [line for line in lines if re.match(r"\[demo\] score .*: ", line)]
    assert len(scored) == 4 and all("(0 scored" in line for line in scored), scored
