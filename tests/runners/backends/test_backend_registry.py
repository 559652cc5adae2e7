"""The backend registry (`runners.backends`): a third backend added through it alone runs a config.

`fake_backend` (tests/fake_backend.py) is a new module with one `register(...)` call; nothing else in the project names
it. The run goes through the public `run` (`probes run` as one call), so loading, extras, the
driver and the result folder all find the backend by its spec.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from promptgen.core.errors import ProbeError
from runners.backends import BACKENDS, backend_spec, priced_backends, register
from runners.backends.load import LoadOptions
from runners.results import DATA_DIR


def test_the_built_in_backends_are_registered_with_their_loaders() -> None:
    assert list(BACKENDS)[:2] == ["hf", "vllm"]
    for spec in BACKENDS.values():
        module, _, name = spec.loader.partition(":")
        assert module and name  # resolved lazily: importing vllm is not needed to register it
    assert priced_backends()[:2] == ["hf", "vllm"]


def test_an_unknown_backend_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(ProbeError, match=r"--backend must be one of hf, vllm.*got 'tgi'"):
        backend_spec("tgi")
    with pytest.raises(ProbeError, match="--backend must be one of"):
        LoadOptions.of(backend="tgi")


def test_a_name_cannot_be_registered_twice_differently() -> None:
    spec = backend_spec("hf")
    assert register(spec) is spec  # the same spec again (a module imported twice) is fine
    with pytest.raises(ValueError, match="registered already"):
        register(type(spec)(name="hf", loader="elsewhere:load"))
    with pytest.raises(ValueError, match="registered already"):  # other options are another spec
        register(dataclasses.replace(spec, options=backend_spec("vllm").options))


def test_a_backend_module_imported_again_registers_the_same_spec(fake_backend) -> None:
    """Its options class is a new object of the same name: the same registration (the fixture imports it afresh)."""
    first = fake_backend.SPEC
    sys.modules.pop("fake_backend")
    again = importlib.import_module("fake_backend")
    assert again.FakeOptions is not first.options and backend_spec(fake_backend.NAME) is again.SPEC


@pytest.fixture()
def fake_backend(monkeypatch: pytest.MonkeyPatch):
    """The fake backend registered for one test: the registry is a copy, restored afterwards."""
    import runners.backends
    import runners.backends.registry

    copy = dict(runners.backends.registry.BACKENDS)
    monkeypatch.setattr(runners.backends.registry, "BACKENDS", copy)  # what register and the lookups read
    monkeypatch.setattr(runners.backends, "BACKENDS", copy)  # the package's name for it
    before = sys.modules.pop("fake_backend", None)
    try:
        yield importlib.import_module("fake_backend")
    finally:  # the module registered into the copy alone: a later `import fake_backend` must register again
        sys.modules.pop("fake_backend", None)
        if before is not None:
            sys.modules["fake_backend"] = before


def test_options_a_backend_does_not_take_are_refused_by_its_spec(fake_backend) -> None:
    fake = fake_backend
    with pytest.raises(ProbeError, match=r"--device-map works with --backend hf; for fake-third"):
        LoadOptions.of(backend=fake.NAME, device_map="auto")
    with pytest.raises(ProbeError, match=r"--tensor-parallel-size works with --backend vllm; for fake-third"):
        LoadOptions.of(backend=fake.NAME, tensor_parallel_size=2)


def test_a_third_backend_s_own_option_is_a_flag_of_probes_run_and_reaches_its_loader(fake_backend) -> None:
    fake = fake_backend
    load = LoadOptions.of(backend=fake.NAME, fake_note="from the flag")
    assert load.options == fake.FakeOptions("from the flag") and load.get("fake_note") == "from the flag"
    backend = backend_spec(fake.NAME).function("loader")("m", load.options, None)
    assert backend.hardware().manifest()["note"] == "from the flag"
    with pytest.raises(ProbeError, match=r"^--fake-note works with --backend fake-third$"):
        LoadOptions.of(backend="hf", fake_note="x")
    # the command line builds its flags from the registry: a plugin's option is listed with the backend taking it
    env = {
        **os.environ,
        "PROBES_PLUGINS": "fake_backend",
        "PYTHONPATH": os.pathsep.join([str(Path(fake.__file__).parent), *sys.path]),
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }
    done = subprocess.run(
        [sys.executable, "-m", "probes.cli", "run", "--help"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if "--fake-note" in line]
    assert "fake-third backend: a note the backend records" in line


def test_a_third_backend_registered_alone_scores_a_config(
    fake_backend, built_designed: Path, smollm2, tmp_path: Path
) -> None:
    from runners.run.runner import run

    fake = fake_backend
    fake.FakeBackend.requests.clear()
    summary = run(
        built_designed,
        "single_actor",
        str(smollm2),
        tmp_path / "results",
        model_name="smol",
        load=LoadOptions.of(backend=fake.NAME),
        limit=6,
    )
    assert summary.items == 6
    parts = sorted((tmp_path / "results" / DATA_DIR / "single_actor").glob("*/part-*.parquet"))
    rows = pq.read_table(parts).to_pylist()
    assert len(rows) == 6 and {r["backend"] for r in rows} == {fake.NAME}
    # every row's option log-probabilities are the fake's, recomputed from the requests it received
    assert len(fake.FakeBackend.requests) == 6
    # (the dataset's protocol scores options by their mean token log-probability: length-normalised)
    expected: dict[int, list[tuple[list[float], list[float]]]] = {}
    for r in fake.FakeBackend.requests:
        sums = [sum(fake.token_logprob(t) for t in cont) for cont in r.continuations]
        means = [s / len(cont) for s, cont in zip(sums, r.continuations, strict=True)]
        expected.setdefault(len(r.context), []).append((sums, means))
    for row in rows:
        candidates = expected[row["context_tokens"]]
        (means,) = [m for s, m in candidates if s == pytest.approx(row["choice_logprobs"], abs=1e-12)]
        total = sum(math.exp(x) for x in means)
        assert row["choice_probs"] == pytest.approx([math.exp(x) / total for x in means], abs=1e-9)
