"""The Ray Data runner (runners.run.ray_driver, `probes run --ray`) against the plain loop, on a local Ray and SmolLM2.

Ray runs locally (`ray.init(num_cpus=2)`), two replicas, one CPU each. Without the `ray` extra
the tests are skipped with a reason on a developer machine and fail under CI.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from loop_items import FEATURES, IDS, ITEMS  # the loop tests' items: 4 choice, 3 number
from probes.cli import app
from promptgen.core.errors import ProbeError
from promptgen.hub.folder import ConfigData, card_front_matter, write_hub_folder
from runners.backends import load as models
from runners.backends.load import LoadOptions
from runners.model import identity as model_identity
from runners.prompts import PromptConfig, load_prompt_config
from runners.results import (
    PART_CONTENT,
    RESULT_SCHEMA,
    key_dir,
    part_files,
    prompt_sha256,
    write_key_file,
    write_part,
)
from runners.run import local_driver
from runners.run.request import RunRequest
from runners.run.session import result_key
from runners.scoring.settings import ScoringSettings
from runners_fixtures import load_folder, load_model, load_tokenizer, require_extra

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:ray.*")  # inside Ray's DataContext
pytestmark = [pytestmark, pytest.mark.slow]  # a local Ray cluster scoring with SmolLM2: the slow tier
#: the key arguments of a float32 hf run (the SmolLM2 test model is stored in float32)
HF32 = {"backend": "hf", "dtype": "float32"}
BATCH = 3  # items 0-2 done, then [3, 4, 5] and [6]: the loop and Ray score the very same batches


@pytest.fixture(scope="module", autouse=True)
def ray_session() -> Iterator[None]:
    require_extra("ray")
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(autouse=True, scope="module")
def _datasets_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A private datasets cache (local prompt folders are re-read into it on every load)."""
    import datasets

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path_factory.mktemp("hf-datasets"))
        yield


@pytest.fixture(scope="module")
def prompts(tmp_path_factory: pytest.TempPathFactory) -> PromptConfig:
    def card(manifest: dict, written: list) -> str:
        front = card_front_matter(pretty_name="t", license="cc0-1.0", tags=[], configs=written, default_config=None)
        return f"---\n{front}---\n# t\n"

    config = ConfigData("items", FEATURES, lambda: iter([{k: [r[k] for r in ITEMS] for k in FEATURES}]))
    manifest = {"recipe": {"sha256": "0" * 64}, "parameters": {}, "sources": []}
    folder = write_hub_folder(
        tmp_path_factory.mktemp("prompts"), "tiny", [config], manifest=manifest, render_card=card, rows_per_shard=100
    )
    return load_prompt_config(str(folder), "items")


def _loop(prompts: PromptConfig, out: Path, **kw: Any) -> local_driver.RunSummary:
    """A loop run in this process with one torch thread, as a Ray actor with one CPU has.

    A float32 matmul's last bits depend on how many threads split it (SmolLM2 here: 5.6e-6 nats
    between 1 and 2 threads), so the comparison with Ray holds the thread count fixed and tests
    what it is about: results that do not depend on which process or batch scored an item.
    """
    import torch

    from runners.backends.hf.backend import HFBackend

    folder = load_folder()
    backend = HFBackend(load_model(), model_id=str(folder))
    revision = model_identity.locate(str(folder)).revision
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        request = RunRequest(prompts.path, prompts.config, str(folder), out, chat=False, batch_size=BATCH, **kw)
        return local_driver.run_config(prompts, backend, load_tokenizer(), request, model_revision=revision)
    finally:
        torch.set_num_threads(threads)


def _rows(out: Path) -> list[dict[str, Any]]:
    (folder,) = (out / "data" / "items").iterdir()
    return sorted(pq.read_table(part_files(folder), schema=RESULT_SCHEMA).to_pylist(), key=lambda r: r["id"])


def _assert_same(got: Any, want: Any, where: str) -> None:
    if isinstance(want, float):
        assert (math.isnan(got) and math.isnan(want)) or abs(got - want) <= 1e-9, where
    elif isinstance(want, list):
        assert len(got) == len(want), where
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            _assert_same(g, w, f"{where}[{k}]")
    else:
        assert got == want, where


def test_ray_resumes_a_loop_run_and_matches_it(prompts: PromptConfig, tmp_path: Path) -> None:
    model = load_folder()
    key = result_key(
        str(model),
        model_identity.locate(str(model)).revision,
        ScoringSettings(),
        False,
        dtype="float32",
        backend="hf",
    )
    reference, out = tmp_path / "reference", tmp_path / "results"
    for results in (reference, out):  # the first batch, done before: both runs resume after it
        write_key_file(key_dir(results, "items", key), key)
        write_part(
            key_dir(results, "items", key),
            (0, 1),
            [{"id": item["id"], "refused": False, "prompt_sha256": prompt_sha256(item)} for item in ITEMS[:3]],
        )
    assert _loop(prompts, reference).items == 4  # batches [3, 4, 5] and [6]
    folder = key_dir(out, "items", key)  # the loop's key folder

    args = ["run", prompts.path, "-c", "items", "-m", str(model), "--out", str(out), "--no-chat", "-q"]
    ray_args = ["--batch-size", str(BATCH), "--flush-every", "1", "--ray", "--ray-workers", "2"]
    result = CliRunner().invoke(app, [*args, *ray_args])  # Ray scores the rest into the loop's folder
    assert result.exit_code == 0, result.output
    assert "4 items scored (3 already done)" in result.output

    rows, want = _rows(out), _rows(reference)
    assert [r["id"] for r in rows] == IDS  # every id exactly once
    assert [p.name for p in (out / "data" / "items").iterdir()] == [folder.name]  # the loop's key: one folder
    for row, expected in zip(rows, want, strict=True):
        for column in RESULT_SCHEMA.names:
            _assert_same(row[column], expected[column], f"{row['id']}.{column}")
    # the seeded part and one per Ray batch (flushed every row), compacted into one for the prompt content
    (part,) = part_files(folder)
    assert pq.read_schema(part).metadata[PART_CONTENT] == prompts.content.sha256.encode()

    manifest = json.loads((out / "results_manifest.json").read_text())
    (run,) = manifest["runs"].values()  # same run id as `probes run`: the entry is the latest run's
    assert run["ray"]["workers"] == 2 and (run["items"], run["skipped_done"]) == (4, 3)
    assert run["backend"] == "hf" and run["dtype"] == "float32" and run["model_revision"].startswith("sha256-")
    assert {w["device"] for w in run["hardware"]["workers"]} == {"cpu"}
    assert manifest["configs"]["items"][folder.name]["rows"] == 7
    assert "data/items/*/part-*.parquet" in (out / "README.md").read_text()

    again = CliRunner().invoke(app, [*args, "--ray"])  # nothing left: no replica is started
    assert again.exit_code == 0 and "0 items scored (7 already done)" in again.output
    assert part_files(folder) == [part]


def test_more_workers_than_the_cluster_holds_is_one_error(prompts: PromptConfig, tmp_path: Path) -> None:
    from runners.run.ray_driver import run_config_ray

    out = tmp_path / "results"
    with pytest.raises(
        ProbeError, match=r"--ray-workers 3 needs 3 CPU\(s\) in the Ray cluster \(1 per replica\), it has 2"
    ):
        request = RunRequest(prompts.path, prompts.config, str(load_folder()), out, chat=False, ray=True, ray_workers=3)
        run_config_ray(prompts, request)
    assert not out.exists()


def test_replica_reports_input_errors_as_rows(prompts: PromptConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    """The actor class, in this process: rows as `run_items` gives them, input errors as an `error` column.

    `load_backend` hands over the shared model (the Ray test loads it for real in each actor).
    """
    import pyarrow as pa

    from runners.backends.hf.backend import HFBackend
    from runners.run.ray_driver import ROW_SCHEMA, _Replica

    folder, settings = load_folder(), ScoringSettings()
    loaded = models.LoadedModel(
        HFBackend(load_model(), model_id=str(folder)),
        load_tokenizer(),
        model_identity.locate(str(folder)).revision,
        None,
    )
    monkeypatch.setattr(models, "load_backend", lambda model, load, **options: loaded)
    replica = _Replica(
        str(folder),
        result_key(str(folder), loaded[2], settings, False, dtype="float32", backend="hf"),
        settings,
        False,
        2,
        LoadOptions(),
    )
    bad = pa.Table.from_pylist([{**ITEMS[-1], "number_max": None}], FEATURES.arrow_schema)
    rejected = replica(bad)
    assert (
        rejected.schema == ROW_SCHEMA and "needs integer `number_min` and `number_max`" in rejected["error"][0].as_py()
    )
    table = pa.Table.from_pylist(ITEMS[:1], FEATURES.arrow_schema)
    (row,) = replica(table).to_pylist()  # the error was the item's, not the replica's
    assert row["error"] is None and row["scoring"] == replica.key.scoring and len(row["choice_probs"]) == 4
    assert json.loads(row["worker"])["device"] == "cpu"

    stale = result_key(str(folder), "local-0000", settings, False, dtype="float32", backend="hf")
    (row,) = _Replica(str(folder), stale, settings, False, 2, LoadOptions())(table).to_pylist()
    assert "at revision sha256-" in row["error"] and "keyed the run by local-0000" in row["error"]
