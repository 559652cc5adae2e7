"""The README's "Use from Python" block runs as it is, and does what the command line does.

The block is taken from README.md (not copied here), run in a fresh folder laid out like the
repository root (`../shared/sources` beside it), and its outputs are checked against what the
same steps give through the `probes` command line.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from runners_fixtures import require_extra

REPO = Path(__file__).resolve().parents[1]


def readme_python_block() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Use from Python\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 1, "the section has one python block"
    return blocks[0]


def test_the_block_uses_the_api_for_every_stage():
    code = readme_python_block()
    for call in ("api.build(", "api.run(", "api.curate_pairs(", "api.analyze(", "api.publish("):
        assert call in code


def _rows(folder: Path) -> list[str]:
    """Result rows of a results folder, sorted by id, as `repr` (floats to the bit, NaN equal to NaN)."""
    rows = [r for part in sorted(folder.rglob("part-*.parquet")) for r in pq.read_table(part).to_pylist()]
    return [repr(r) for r in sorted(rows, key=lambda r: r["id"])]


@pytest.mark.slow
def test_the_readme_python_block_runs_and_matches_the_cli(shared_sources, tmp_path):
    require_extra("hf")
    work = tmp_path / "repo"
    work.mkdir()
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "sources").symlink_to(shared_sources, target_is_directory=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-c", readme_python_block()], cwd=work, env=env, capture_output=True, text=True, timeout=1200
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = work / "py-demo"
    assert (out / "report" / "report.html").is_file()
    assert "single_actor: 8 items scored" in done.stdout
    assert any(line.startswith(str(Path("py-demo") / "report" / "report.html")) for line in done.stdout.splitlines())
    curated = out / "curated" / "trust-game-names"
    # either the model qualifies surnames (a new version with its pairs) or the one clear error, nothing written
    if (curated / "data" / "pairs_smollm2").is_dir():
        assert "+pairs." in done.stdout
    else:
        assert "no surname qualifies for any race" in done.stdout and not curated.exists()

    # the same run through the command line gives the same rows, to the bit
    from typer.testing import CliRunner

    from probes.cli import app
    from runners.testmodel import ensure_smollm2

    args = ["run", str(out / "datasets" / "talent-or-luck-single_actor"), "--config", "single_actor", "--model"]
    args += [str(ensure_smollm2()[1]), "--model-name", "HuggingFaceTB/SmolLM2-135M-Instruct", "--limit", "8"]
    args += ["--dtype", "float32", "--out", str(tmp_path / "cli-results"), "-q"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert _rows(tmp_path / "cli-results") == _rows(out / "results")
