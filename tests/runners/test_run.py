"""`runners.run.runner`: a run without scoring flags follows the dataset's declared protocol (the paper's scoring)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from promptgen.core.errors import ProbeError
from runners.run.runner import run, run_many
from runners.scoring.settings import scoring_settings
from runners_fixtures import reference_option_logprobs, tiny_llama_folder


def _result_rows(out: Path, config: str) -> list[dict]:
    return [
        row for path in sorted((out / "data" / config).rglob("*.parquet")) for row in pq.read_table(path).to_pylist()
    ]


def _prompt_rows(folder: Path, config: str) -> dict[str, dict]:
    return {
        r["id"]: r for p in sorted((folder / "data" / config).glob("*.parquet")) for r in pq.read_table(p).to_pylist()
    }


def test_talent_or_luck_default_is_the_release_scorer(built_small_release: Path, tmp_path: Path) -> None:
    """Softmax of the MEAN option token log-probability after the plain prompt, as a full transformers pass gives."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = tiny_llama_folder("float32")
    config = "single_actor_release"  # the release scorer's own items, scored as its cappr call did
    summary = run(built_small_release, config, str(model_dir), tmp_path / "r", limit=5, batch_size=2)
    assert summary.items == 5
    assert summary.protocol == "protocol: talent-or-luck release (cappr) (the paper's)"
    assert summary.protocol in summary.line()
    rows = _result_rows(tmp_path / "r", config)
    assert len(rows) == 5
    prompts = _prompt_rows(built_small_release, config)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    for row in rows:
        assert json.loads(row["scoring"])["length_normalize"] is True
        item = prompts[row["id"]]
        sums, counts = reference_option_logprobs(model, tokenizer, item["prompt"], item["choices"])
        mean = np.array(sums) / np.array(counts)
        expected = np.exp(mean - mean.max()) / np.exp(mean - mean.max()).sum()
        assert np.abs(np.array(row["choice_probs"]) - expected).max() <= 1e-4, row["id"]
    key = json.loads((next((tmp_path / "r").rglob("key.json"))).read_text())
    assert json.loads(key["scoring"])["chat"] is False  # the plain prompt, though the tokenizer has a template


def test_a_flag_replaces_its_part_and_the_summary_says_so(built_small_release: Path, tmp_path: Path) -> None:
    model_dir = tiny_llama_folder("float32")
    summary = run(
        built_small_release,
        "single_actor",
        str(model_dir),
        tmp_path / "r",
        limit=2,
        settings={"length_normalize": False},
    )
    assert summary.protocol.startswith("protocol: custom (differs from the paper's talent-or-luck release")
    (row,) = {r["scoring"] for r in _result_rows(tmp_path / "r", "single_actor")}
    assert json.loads(row)["length_normalize"] is False
    explicit = run(
        built_small_release, "single_actor", str(model_dir), tmp_path / "r", limit=2, settings=scoring_settings()
    )
    assert "length_normalize" in explicit.protocol  # a complete ScoringSettings is used as given


def test_a_flag_that_does_not_apply_keeps_the_papers_key(built_small_release: Path, tmp_path: Path) -> None:
    """`--number-tolerance` and `--temperature` on a choice config score into the paper's key, said in the summary."""
    model_dir = tiny_llama_folder("float32")
    out = tmp_path / "r"
    first = run(built_small_release, "single_actor_release", str(model_dir), out, limit=2)
    for settings in ({"number_tolerance": 0.01}, {"temperature": 0.5}):
        again = run(built_small_release, "single_actor_release", str(model_dir), out, limit=2, settings=settings)
        assert again.key_dir == first.key_dir and again.items == 0 and again.skipped == 2
        assert again.protocol.startswith("protocol: talent-or-luck release (cappr) (the paper's); --")
        assert "ignored: not used by this config's items" in again.line()


def test_trust_game_default_scores_the_papers_plain_variants(built_trust_game: Path, tmp_path: Path) -> None:
    """The protocol's row selection (variant base, inst) and plain prompts; `--where` picks the chat rows."""
    games = built_trust_game
    model_dir = tiny_llama_folder("float32")
    summary = run(games, "probing", str(model_dir), tmp_path / "r", limit=6)
    assert summary.selected == 6 and "(the paper's)" in summary.protocol
    prompts = _prompt_rows(games, "probing")
    scored = _result_rows(tmp_path / "r", "probing")
    assert {prompts[r["id"]]["variant"] for r in scored} <= {"base", "inst"}
    assert all(r["number_probs"] for r in scored)  # the number distribution, not a generation
    with pytest.raises(ProbeError, match="no column 'colour'"):
        run(games, "probing", str(model_dir), tmp_path / "r2", where={"colour": ["red"]})
    with pytest.raises(ProbeError, match=r"no row has variant in \(nope\)"):
        run(games, "probing", str(model_dir), tmp_path / "r2", where={"variant": ["nope"]})


def test_empathy_default_is_greedy_generation_on_the_chat_form(tmp_path: Path) -> None:
    """The paper's method: the chat template, temperature 0, the number parsed from the text."""
    from envent_fixture import write_recipe, write_sources
    from promptgen.build import build

    folder = build(
        str(write_recipe(tmp_path / "r.yaml")), out_dir=tmp_path / "ds", sources=write_sources(tmp_path / "src")
    ).path
    model_dir = tiny_llama_folder("float32")
    summary = run(folder, "religion_P0S1T0", str(model_dir), tmp_path / "out", limit=3)
    assert summary.items == 3 and "(the paper's)" in summary.protocol
    rows = _result_rows(tmp_path / "out", "religion_P0S1T0")
    scoring = json.loads(rows[0]["scoring"])
    assert scoring["mode"] == "generate" and scoring["temperature"] == 0.0 and scoring["chat"] is True
    assert all(r["generated_text"] is not None and r["number_probs"] is None for r in rows)


def test_several_configs_share_one_model_load(built_small_release: Path, tmp_path: Path, monkeypatch) -> None:
    """`config` as names and globs: every match is scored, the model loads once, each config has its summary."""
    from runners.backends import load as models
    from runners.run.runner import expand_configs

    assert expand_configs(built_small_release, ["single_actor*", "actor_observer", "single_actor"]) == [
        "single_actor",
        "single_actor_release",
        "actor_observer",
    ]
    with pytest.raises(ProbeError, match=r"--config 'race_\*' matches no config of .* \(configs: actor_actor, "):
        expand_configs(built_small_release, ["race_*"])
    loads = []
    real = models.load_backend
    monkeypatch.setattr(models, "load_backend", lambda *a, **k: loads.append(a) or real(*a, **k))
    summaries = run_many(
        built_small_release, ["actor_observer", "single_*"], str(tiny_llama_folder("float32")), tmp_path / "r", limit=2
    )
    assert [s.config for s in summaries] == ["actor_observer", "single_actor", "single_actor_release"]
    assert len(loads) == 1 and all(s.items == 2 and "(the paper's)" in s.protocol for s in summaries)
    for config in ("actor_observer", "single_actor", "single_actor_release"):
        assert len(_result_rows(tmp_path / "r", config)) == 2
    # a bad config among good ones fails before the model loads
    with pytest.raises(ProbeError):
        run_many(
            built_small_release, ["single_actor", "nope"], str(tiny_llama_folder("float32")), tmp_path / "r2", limit=2
        )
    assert len(loads) == 1
    # `run` scores one config and returns its summary; a list or a pattern is `run_many`'s
    for configs in (["single_actor"], "single_*"):
        with pytest.raises(TypeError, match="run_many"):
            run(built_small_release, configs, str(tiny_llama_folder("float32")), tmp_path / "r3", limit=2)
    assert len(loads) == 1


def _refuse_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    from runners.backends import load as models

    def never(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a model was loaded before the request was checked")

    monkeypatch.setattr(models, "load_backend", never)


def test_a_results_folder_of_another_build_is_refused_before_the_model_loads(tmp_path: Path, monkeypatch) -> None:
    """Every config `run_many` resolves is checked against the builds its results folder records before the one load:
    a folder holding another build's rows costs no model load (a sweep: no scoring of the configs before it)."""
    from runners import results as res
    from runners_fixtures import number_items, write_prompt_folder

    prompts = write_prompt_folder(tmp_path / "prompts", number_items(4))
    out = tmp_path / "out"
    other = {"prompt_dataset": {"name": "tiny", "config": "items", "fingerprint": "f" * 64}, "key": "k1"}
    res.update_manifest(out, "items/k1/shard-0of1", other)
    _refuse_loads(monkeypatch)
    with pytest.raises(ProbeError, match=r"config 'items' holds rows scored on another build of its prompts"):
        run_many(prompts, ["items"], "org/model", out, settings=scoring_settings("sentence"))
    assert not (out / "data").exists()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("limit", 0, "--limit must be positive, got 0"),
        ("batch_size", 0, "--batch-size and --flush-every must be positive"),
        ("flush_every", 0, "--batch-size and --flush-every must be positive"),
        ("ray_workers", 0, "--ray-workers must be positive"),
    ],
)
def test_a_run_s_counts_are_refused_as_the_request_is_made(
    tmp_path: Path, monkeypatch, field: str, value: int, message: str
) -> None:
    from runners.run.request import RunRequest

    _refuse_loads(monkeypatch)
    with pytest.raises(ProbeError, match=re.escape(message)):
        RunRequest(tmp_path, "items", "org/model", tmp_path / "out", **{field: value})
    with pytest.raises(ProbeError, match=re.escape(message)):  # the keyword form of `run` makes the same request
        run(tmp_path, "items", "org/model", tmp_path / "out", **{field: value})


def test_a_driver_scores_resolved_settings_or_the_defaults(tmp_path: Path) -> None:
    """`RunRequest.scoring`, what both drivers and the session read: the settings as resolved, the project's defaults
    when none were given (a driver called directly), and a bug's TypeError for flags nobody resolved."""
    from runners.run.request import RunRequest
    from runners.scoring.settings import ScoringSettings

    def request(settings: object) -> RunRequest:
        return RunRequest(tmp_path, "items", "org/model", tmp_path / "out", settings=settings)

    assert request(None).scoring == ScoringSettings()
    letter = scoring_settings("letter")
    assert request(letter).scoring is letter
    with pytest.raises(TypeError, match=re.escape("resolve flags with runners.run.runner.resolve_protocol")):
        _ = request({"scoring": "letter"}).scoring


def test_run_many_scores_a_list_of_requests_with_one_load(
    built_small_release: Path, tmp_path: Path, monkeypatch
) -> None:
    """`run_many(requests)`: each request's own config, settings, limit and folder, the model loaded once; the rows
    equal those of one `run` per request."""
    from runners.backends import load as models
    from runners.run.request import RunRequest

    model = str(tiny_llama_folder("float32"))
    requests = [
        RunRequest(built_small_release, "single_actor", model, tmp_path / "a", limit=3),
        RunRequest(built_small_release, "actor_observer", model, tmp_path / "b", limit=2,
                   settings=scoring_settings("letter")),
    ]  # fmt: skip
    loads = []
    real = models.load_backend
    monkeypatch.setattr(models, "load_backend", lambda *a, **k: loads.append(a) or real(*a, **k))
    summaries = run_many(requests)
    assert len(loads) == 1 and [(s.config, s.items) for s in summaries] == [("single_actor", 3), ("actor_observer", 2)]
    for request in requests:
        alone = tmp_path / f"alone-{request.config}"
        run(dataclasses.replace(request, results=alone))
        together = {r["id"]: r for r in _result_rows(Path(request.results), request.config)}
        assert {r["id"]: r["choice_probs"] for r in _result_rows(alone, request.config)} == {
            i: r["choice_probs"] for i, r in together.items()
        }
    assert all(
        json.loads(r["scoring"])["choice_mode"] == "letter" for r in _result_rows(tmp_path / "b", "actor_observer")
    )
    with pytest.raises(ValueError, match="every request names the same model"):
        run_many([requests[0], dataclasses.replace(requests[1], model="other/model")])
    with pytest.raises(TypeError, match="a non-empty list of RunRequests"):
        run_many([])
    with pytest.raises(TypeError, match="not both"):
        run_many(requests, ["single_actor"])
