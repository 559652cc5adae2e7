"""The Talent-or-Luck import tests' shared release: built, scored through a run's session, exported as its CSVs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analysis.attribution.release import RELEASE_CONFIGS
from analysis.export_files import ExportRequest, export
from promptgen.build import build
from release_fixture import write_recipe, write_release
from runners.prompts import load_prompt_config
from runners.run.session import Session, result_key
from runners.scoring.settings import resolve_scoring

#: the model the release's rows are scored and imported as
MODEL = "org/model-a"


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The synthetic release built, its three `*_release` configs scored (Dirichlet probabilities through a run's
    session, as a fake backend would give them), and the results exported at full precision."""
    root = tmp_path_factory.mktemp("import-tol")
    sources = write_release(root / "sources")
    prompts = build(str(write_recipe(root / "recipe.yaml", sources)), out_dir=root / "datasets", sources=sources).path
    rng = np.random.default_rng(3)
    for config in RELEASE_CONFIGS:
        loaded = load_prompt_config(str(prompts), config)
        settings = resolve_scoring(loaded.protocol, None, None).settings
        key = result_key(MODEL, "a" * 40, settings, False, dtype="float32", backend="fake-third")
        session = Session.open(loaded, root / "results", key, chat=False, batch_size=None)
        rows = []
        for item in loaded.dataset.select_columns(["id", "choices"]).to_list():
            p = rng.dirichlet(np.ones(len(item["choices"])))
            rows.append(
                {
                    "id": item["id"],
                    "backend": "fake-third",
                    "dtype": "float32",
                    "device": "cpu",
                    "choice_logprobs": np.log(p).tolist(),
                    "choice_probs": p.tolist(),
                    "choice_tokens": [3] * len(p),
                    "chosen_index": int(p.argmax()),
                    "valid_mass": float("nan"),
                    "refused": False,
                    "context_tokens": 40,
                }
            )
        session.add(rows)
        session.finish(backend="fake-third", dtype="float32", hardware={})
    outputs = export(ExportRequest(root / "results", prompts, root / "outputs")).path
    return {"root": root, "prompts": prompts, "results": root / "results", "outputs": outputs}
