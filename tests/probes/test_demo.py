"""`probes demo` end to end on the real sources and SmolLM2, at a smaller size than the default."""

from __future__ import annotations

import itertools
import re
import secrets
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from probes.cli import app
from probes.demo import demo
from promptgen.empathy.demo import CONFIG as EMPATHY_CONFIG

pytestmark = pytest.mark.slow  # the whole demo (build, SmolLM2 scoring, analysis): the slow tier (pytest -m slow)
#: each probe's demo sizes (its `DemoPlan`), shrunk
TINY = {
    "talent-or-luck": {"per_cell": 2},
    "trust-game-names": {"games_per_cell": 2, "probing_items": 3},
    "intergroup-empathy": {"max_events": 2},
}


def test_demo_builds_scores_analyses_and_resumes(
    shared_sources: Path, smollm2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "hf_" + secrets.token_hex(17)  # the user's Hub token: no file of the demo's folder may hold it (#69)
    monkeypatch.setenv("HF_TOKEN", token)
    lines: list[str] = []
    result = demo(tmp_path / "demo", sources=shared_sources, sizes=TINY, progress=lines.append)
    assert [p for p in (tmp_path / "demo").rglob("*") if p.is_file() and token.encode() in p.read_bytes()] == []
    assert not any(token in line for line in lines)
    assert not result.synthetic_corpus  # the authors' released narratives are among the shared sources
    # the demo builds only the talent-or-luck config it scores (the default build's release rows take minutes)
    (attribution,) = (tmp_path / "demo" / "datasets").glob("talent-or-luck*")
    assert attribution.name == "talent-or-luck-single_actor"
    assert sorted(p.name for p in (attribution / "data").iterdir()) == ["single_actor"]
    index = result.report.read_text()
    for probe in ("talent-or-luck", "trust-game-names", "intergroup-empathy"):
        report = tmp_path / "demo" / "reports" / probe / "report.html"
        assert report.is_file() and f"reports/{probe}/report.html" in index
        assert any((report.parent / "figures").glob("*.png")), probe
    tables = tmp_path / "demo" / "reports"
    single = pd.read_csv(tables / "talent-or-luck" / "tables" / "attribution_single_actor.csv")
    assert set(single["dimension"]) == {"religion"} and (single["n_items"] == 2).all()  # 2 per cell, 24 cells
    gap = pd.read_csv(tables / "intergroup-empathy" / "tables" / "empathy_gap.csv")
    assert set(gap["refused_items"]) == {"excluded", "included"}
    assert (tables / "trust-game-names" / "tables" / "trust_game_anova.csv").is_file()
    assert "synthetic corpus" not in index
    scored = [line for line in lines if re.match(r"\[demo\] score .*: ", line)]
    assert len(scored) == 5 and all("0 already done" in line for line in scored)
    # the empathy items are read by their distribution, and the demo says so (output, index, report)
    assert any("reads its distribution over 0-10" in line for line in lines)
    assert "reads its distribution over 0-10" in index
    empathy_report = (tables / "intergroup-empathy" / "report.html").read_text()
    assert "reads its distribution over 0-10" in empathy_report
    assert "no answered items" not in empathy_report and "Every item refused" not in empathy_report
    check_empathy_against_parquet(tmp_path / "demo")

    # a second run reuses the datasets and every scored item
    lines.clear()
    demo(tmp_path / "demo", sources=shared_sources, sizes=TINY, overwrite=True, progress=lines.append)
    scored = [line for line in lines if re.match(r"\[demo\] score .*: ", line)]
    assert len(scored) == 5 and all("(0 scored" in line for line in scored), scored
    assert [p.name for p in (tmp_path / "demo" / "datasets").glob("talent-or-luck*")] == [attribution.name]

    # the paper's protocol on the demo's empathy items, as a user runs it: SmolLM2 answers in words,
    # every item is refused, and the summary line says so with an answer seen
    dataset = next((tmp_path / "demo" / "datasets").glob("intergroup-empathy*"))
    argv = ["run", str(dataset), "-c", EMPATHY_CONFIG, "-m", str(smollm2), "--out", str(tmp_path / "paper")]
    ran = CliRunner().invoke(app, [*argv, "--limit", "3", "--backend", "hf"])
    assert ran.exit_code == 0, ran.output
    flat = " ".join(ran.output.split())  # the terminal wraps long lines
    assert f"{EMPATHY_CONFIG}: EVERY item was refused" in flat, ran.output
    assert re.search(r"first answers: '[^']+'", flat) and "--scoring sentence" in flat


def check_empathy_against_parquet(out: Path) -> None:
    """The demo's empathy M0, M, δ and p, recomputed here from its parquet files alone.

    M0 is the mean expected value per perceiver x experiencer cell, M its z-score over the
    36 cells (population sd), δ the mean of M over the specified same-identity cells minus
    the specified different-identity ones (`a person` in neither), and p the two-sided
    permutation p over all 5! x 5! row and column orders of the specified identities,
    enumerated exactly (the report draws 10,000 at random).
    """
    prompt_files = sorted(out.glob(f"datasets/intergroup-empathy*/data/{EMPATHY_CONFIG}/*.parquet"))
    result_files = sorted((out / "results" / "intergroup-empathy" / "data" / EMPATHY_CONFIG).glob("*/*.parquet"))
    prompts = pd.concat([pd.read_parquet(f) for f in prompt_files], ignore_index=True)
    results = pd.concat([pd.read_parquet(f) for f in result_files], ignore_index=True)
    joined = results.merge(prompts[["id", "perceiver", "experiencer"]], on="id", validate="one_to_one")
    assert not joined["refused"].any() and joined["expected_value"].notna().all()
    order = list(dict.fromkeys(prompts.sort_values("perceiver_order")["perceiver"]))
    m0 = joined.pivot_table(index="perceiver", columns="experiencer", values="expected_value").loc[order, order]
    values = m0.to_numpy()
    m = (values - values.mean()) / values.std()
    tables = out / "reports" / "intergroup-empathy" / "tables"
    cells = pd.read_csv(tables / "empathy_cells.csv")
    cells = cells[cells["refused_items"] == "excluded"]
    assert len(cells) == 36 and cells["m"].notna().all() and (cells["note"].isna() | (cells["note"] == "")).all()
    got = cells.pivot(index="perceiver", columns="experiencer", values="m").loc[order, order].to_numpy()
    np.testing.assert_allclose(got, m, rtol=0, atol=1e-12)
    got0 = cells.pivot(index="perceiver", columns="experiencer", values="m0").loc[order, order].to_numpy()
    np.testing.assert_allclose(got0, values, rtol=0, atol=1e-12)

    spec = m[1:, 1:]  # `a person` is the first row and column
    same = np.eye(len(spec), dtype=bool)

    def delta(x: np.ndarray) -> float:
        return x[same].mean() - x[~same].mean()

    d = delta(spec)
    null = np.array(
        [
            delta(spec[np.ix_(rows, cols)])
            for rows in itertools.permutations(range(len(spec)))
            for cols in itertools.permutations(range(len(spec)))
        ]
    )
    p_exact = float(np.mean(np.abs(null) >= abs(d) - 1e-12))
    gap = pd.read_csv(tables / "empathy_gap.csv")
    gap = gap[gap["refused_items"] == "excluded"].iloc[0]
    assert np.isfinite(gap["delta"]) and np.isfinite(gap["p_value"])
    assert gap["delta"] == pytest.approx(d, abs=1e-12)
    # 10,000 random draws against the exact value: within five Monte Carlo standard errors
    assert abs(gap["p_value"] - p_exact) <= 5 * np.sqrt(max(p_exact * (1 - p_exact), 1e-4) / 10_000) + 1e-4
