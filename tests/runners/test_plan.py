"""`probes plan` (runners.plan): parameter counts, input errors, and counts equal to what the hf backend reports."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from probes.cli import app
from promptgen.core.errors import ProbeError
from runners import plan
from runners_fixtures import LLAMA3_8B_SHAPE, number_items, require_extra, write_prompt_folder

SHAPES: list[tuple[str, dict[str, Any]]] = [
    ("llama", LLAMA3_8B_SHAPE),  # Llama-3-8B: 8.03 B parameters
    (
        "llama",
        dict(
            vocab_size=1000,
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            attention_bias=True,
            mlp_bias=True,
            head_dim=32,
        ),
    ),
    (
        "qwen2",
        dict(
            vocab_size=1000,
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            tie_word_embeddings=True,
        ),
    ),
    (
        "qwen3",
        dict(
            vocab_size=1000,
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
        ),
    ),
    (
        "mistral",
        dict(
            vocab_size=1000,
            hidden_size=64,
            intermediate_size=96,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
        ),
    ),
    ("gpt2", dict(vocab_size=1000, n_embd=64, n_layer=2, n_head=4, n_positions=128, bos_token_id=0, eos_token_id=0)),
]


@pytest.mark.parametrize(("model_type", "shape"), SHAPES)
def test_param_count_equals_transformers(model_type: str, shape: dict[str, Any]) -> None:
    """The count from config.json equals the parameters transformers creates (on the meta device: no memory)."""
    require_extra("hf")
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(model_type, **shape)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    want = sum(p.numel() for p in model.parameters())
    assert plan.count_params(json.loads(config.to_json_string())).params == want
    if shape.get("vocab_size") == 128256:
        assert want == 8_030_261_248


def test_flops_and_hours_by_hand() -> None:
    shape = plan.ModelShape(8_000_000_000, 0, 32, 4096, 128256, "llama")
    tokens, keys = 1e9, 100.0
    assert plan.flops(shape, tokens, keys) == pytest.approx(2 * 8e9 * 1e9 + 4 * 32 * 4096 * 100 * 1e9)
    assert plan.GPUS["h100"].bf16_tflops == 989.4 and plan.GPUS["a100"].bf16_tflops == 312.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mfu", "0"], "--mfu must be above 0 and at most 1"),
        (["--mfu", "1.5"], "--mfu must be above 0 and at most 1"),
        (["--gpu", "tpu"], "--gpu must be one of h100, h200, a100, a6000, l40s, got 'tpu'"),
        (["--model-without-config"], "has no config.json"),
        (
            ["--number-tolerance", "0.001"],
            "give --profile RESULTS (a sample run at that tolerance) or --trie-positions",
        ),
        (["--trie-positions", "10"], "--trie-positions prices a bounded run: give its --number-tolerance too"),
        (["--number-tolerance", "1", "--trie-positions", "5"], "--number-tolerance must be at least 0 and below 1"),
        (["--number-tolerance", "0.01", "--trie-positions", "0"], "--trie-positions must be a positive number"),
        (["--number-tolerance", "0.01", "--profile", "nowhere"], "--profile nowhere is not a results folder"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    dataset = tmp_path / "prompts"
    (dataset / "data").mkdir(parents=True)
    model = tmp_path / "model"
    model.mkdir()
    if args != ["--model-without-config"]:
        (model / "config.json").write_text("{}")
        extra = args
    else:
        extra = []
    out = tmp_path / "plan.json"
    result = CliRunner().invoke(app, ["plan", str(dataset), "--model", str(model), "--json", str(out), *extra])
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0].replace("\n", " "), result.output
    assert not out.exists()


def _mixed_items(n: int) -> list[dict[str, Any]]:
    """Number items (0..10) and sentence-mode choice items, interleaved as a config might hold them."""
    from promptgen.core.contract import user_messages

    instruction = "You take part in a study of how people decide. Read the question, then answer it.\n"
    items = [{**item, "prompt": instruction + item["prompt"]} for item in number_items(n)]
    for k in range(0, n, 3):
        prompt = f"{instruction}Item {k}: Maria passed the exam. Why?\nAnswer:"
        items[k] = {
            **items[k],
            "id": f"c{k}",
            "probe": "attribution",
            "task": "choice",
            "prompt": prompt,
            "messages": user_messages(prompt),
            "choices": [" she worked hard", " she is able", " it was easy", " luck"],
            "choice_labels": ["A", "B", "C", "D"],
            "choice_types": ["effort", "ability", "difficulty", "luck"],
            "number_min": None,
            "number_max": None,
        }
    return items


def test_plan_counts_equal_the_hf_backends_reported_counts(tmp_path: Path) -> None:
    """On a small dataset (every call counted), the plan's hf computed tokens are those the backend reports."""
    require_extra("hf")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from runners.backends.hf.backend import HFBackend
    from runners.exchange import ScoreResult
    from runners.rows import cached_digit_start_ids, prepare_request
    from runners.scoring.settings import ScoringSettings
    from runners_fixtures import tiny_llama_folder

    # the comparison below needs the hf backend's own report: its absence is a failure, never a skip
    assert "computed_tokens" in {f.name for f in dataclasses.fields(ScoreResult)}, "ScoreResult lost computed_tokens"
    folder = tiny_llama_folder("float32")
    items = _mixed_items(40)
    dataset = write_prompt_folder(tmp_path / "prompts", items)
    result = plan.make_plan(
        plan.PlanRequest(
            dataset,
            str(folder),
            chat=False,
            items_per_call=16,
            max_batch_tokens=8192,
            sample_calls=100,
            modes=("exact",),
        )
    )
    counted = result["configs"]["items"]["hf"]["exact"]
    assert counted["exact"] and counted["items"] == 40

    tokenizer = AutoTokenizer.from_pretrained(folder)
    backend = HFBackend(AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32), max_batch_tokens=8192)
    digits = cached_digit_start_ids(tokenizer)
    reported = context = 0
    for start in range(0, len(items), 16):  # the run's calls: consecutive rows, 16 at a time on the CPU
        requests = [prepare_request(i, tokenizer, False, ScoringSettings(), digits) for i in items[start : start + 16]]
        reported += sum(r.computed_tokens for r in backend.score(requests))
        context += sum(len(r.context) for r in requests)
    assert counted["computed_tokens"] == reported
    assert counted["context_tokens"] == context
    assert counted["computed_context_tokens"] < context  # the calls' shared prefixes ran once


def test_sampled_tries_count_vllm_with_each_items_own_context() -> None:
    """A call counted from 2 tries equals the call counted from all of them, for both backends, when tries agree.

    vLLM's trie cost depends on the context's length (each level prompt recomputes the last
    partial block), so contexts of many lengths are used: scaling the picked tries' costs
    (the former estimator) is off here, counting each item with its own context is not.
    """
    require_extra("hf")
    from transformers import AutoTokenizer

    from runners.backends.vllm import accounting as vllm_accounting
    from runners.rows import cached_digit_start_ids, prepare_request
    from runners.scoring.settings import ScoringSettings
    from runners_fixtures import tiny_llama_folder

    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_folder("float32"))
    digits = cached_digit_start_ids(tokenizer)
    items = [
        {**item, "prompt": "Please " + "really " * (k * 5 % 13) + item["prompt"]}
        for k, item in enumerate(number_items(24))
    ]

    def prepare(batch: list[dict[str, Any]], mode: str) -> list[Any]:
        return [prepare_request(i, tokenizer, False, ScoringSettings(), digits) for i in batch]

    def contexts(item: dict[str, Any], candidates: tuple[int, ...]) -> Any:
        return plan.context_request(item, tokenizer, False, candidates or digits)

    settings = plan.PlanSettings(items_per_call=24, max_batch_tokens=8192, block_size=16, trie_items=None)
    full = plan.count_call(items, prepare, contexts, "exact", settings)
    sampled = plan.count_call(items, prepare, contexts, "exact", dataclasses.replace(settings, trie_items=2))
    requests = prepare(items, "exact")
    whole = vllm_accounting.vllm_token_counts(requests, block_size=16, items_per_call=None)
    assert len({len(r.context) % 16 for r in requests}) > 4  # the partial blocks differ between items
    for backend in ("hf", "vllm"):
        assert sampled[backend] == pytest.approx(full[backend], rel=1e-12)
    assert full["vllm"]["computed_context_tokens"] + full["vllm"]["continuation_positions"] == whole.computed_tokens
    picked = [requests[0], requests[12]]  # the tries count_call picks; scaling their costs would say:
    scaled = 12 * sum(
        vllm_accounting.vllm_token_counts([r], block_size=16, items_per_call=None).continuation_positions
        for r in picked
    )
    assert scaled != whole.continuation_positions


def test_bounded_plan_prices_the_positions_a_bounded_run_computes(tmp_path: Path) -> None:
    """With the bounded run's own mean trie positions, the plan's bounded hf count is what the backend reports."""
    require_extra("hf")
    import numpy as np
    import pyarrow.parquet as pq
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from runners.backends.hf.backend import HFBackend
    from runners.rows import run_items
    from runners.scoring.settings import ScoringSettings
    from runners_fixtures import tiny_llama_folder

    folder = tiny_llama_folder("float32")
    items = _mixed_items(40)
    dataset = write_prompt_folder(tmp_path / "prompts", items)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    backend = HFBackend(AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32), max_batch_tokens=8192)
    rows = run_items(items, backend, tokenizer, False, settings=ScoringSettings(number_tolerance=0.05), batch_items=16)
    positions = [r["trie_positions"] for r in rows if r["trie_positions"] is not None]
    assert len(positions) == sum(item["task"] == "number" for item in items)
    mean = float(np.mean(positions))
    request = plan.PlanRequest(
        dataset, str(folder), chat=False, items_per_call=16, max_batch_tokens=8192, sample_calls=100, modes=("exact",)
    )
    result = plan.make_plan(dataclasses.replace(request, number_tolerance=0.05, trie_positions=mean))
    bounded = result["configs"]["items"]["hf"]["bounded"]
    exact = result["configs"]["items"]["hf"]["exact"]
    assert bounded["computed_tokens"] == pytest.approx(sum(r["computed_tokens"] for r in rows), rel=1e-12)
    assert bounded["continuation_positions"] < exact["continuation_positions"]
    assert result["bounded"] == {
        "number_tolerance": 0.05,
        "trie_positions_per_item": mean,
        "profile": "--trie-positions",
    }
    vllm = result["configs"]["items"]["vllm"]
    assert vllm["bounded"]["continuation_positions"] < vllm["exact"]["continuation_positions"]

    # the same figure from a results folder (`--profile`), and one line for a profile at another tolerance
    model = str(folder)
    results = tmp_path / "results"
    run = ["run", str(dataset), "-c", "items", "--model", model, "--no-chat", "--number-tolerance", "0.05"]
    done = CliRunner().invoke(app, [*run, "--out", str(results), "--batch-size", "16", "-q"])
    assert done.exit_code == 0, done.output
    got = plan.make_plan(dataclasses.replace(request, number_tolerance=0.05, profile=results))
    assert got["bounded"]["trie_positions_per_item"] == pytest.approx(mean, rel=1e-12)
    out = tmp_path / "plan.json"
    cli = ["plan", str(dataset), "--model", model, "--no-chat", "--json", str(out), "--profile", str(results)]
    other = CliRunner().invoke(app, [*cli, "--number-tolerance", "0.01"])
    assert other.exit_code == 1 and "it has rows at tolerance 0.05" in other.output.replace("\n", " ")
    # results made before the tolerance existed: parts without the trie_positions column
    for part in results.glob("data/**/*.parquet"):
        table = pq.read_table(part)
        pq.write_table(table.drop_columns(["trie_positions", "number_bound"]), part)
    old = CliRunner().invoke(app, [*cli, "--number-tolerance", "0.05"])
    assert old.exit_code == 1 and "no number rows with trie_positions" in old.output.replace("\n", " ")
    assert not out.exists()


def test_a_profile_whose_scoring_is_not_json_is_one_line(tmp_path: Path) -> None:
    """A hand-edited `scoring` in a profile's results is one line naming the key folder, not a traceback."""
    from runners import results as res
    from runners.plan.profile import read_profile

    folder = tmp_path / "results" / "data" / "items" / "m-0123456789abcdef"
    folder.mkdir(parents=True)
    (tmp_path / "results" / res.MANIFEST_NAME).write_text("{}")
    res.write_part(folder, (0, 1), [{"id": "a", "scoring": "not json", "trie_positions": 7}])
    with pytest.raises(ProbeError, match="a row's `scoring` is not a scoring settings JSON"):
        read_profile(tmp_path / "results", 0.01)
    res.write_part(folder, (0, 1), [{"id": "a", "scoring": '{"number_tolerance":0.01}', "trie_positions": 7}])
    assert read_profile(tmp_path / "results", 0.01).trie_positions == 7


def test_a_chat_config_priced_or_run_with_a_base_model_is_one_line(tmp_path: Path) -> None:
    """A base model (no chat template) asked for the chat form: the sweep's quote and the run both stop with
    one line that names the config and --no-chat, before anything is scored; the plain form is priced."""
    from runners.plan.quote import quote_config
    from runners.prompts import load_prompt_config
    from runners.run.local_driver import run_config
    from runners.run.request import RunRequest
    from runners.scoring.settings import ScoringSettings
    from runners_fixtures import vocab_tokenizer

    tokenizer = vocab_tokenizer("llama-bpe")
    assert not getattr(tokenizer, "chat_template", None)
    prompts = load_prompt_config(str(write_prompt_folder(tmp_path / "ds", number_items(3))), "items")
    request = RunRequest(tmp_path / "ds", "items", "m", tmp_path / "out", chat=True, settings=ScoringSettings())
    with pytest.raises(ProbeError, match=r"config 'items' is scored on the chat form.*no chat template.*--no-chat"):
        quote_config(prompts, request, tokenizer)
    with pytest.raises(ProbeError, match=r"no chat template.*--no-chat"):
        loaded = SimpleNamespace(dtype="float32", model_id="m", name="hf")  # what the session reads of a backend
        run_config(prompts, loaded, tokenizer, dataclasses.replace(request, batch_size=1), model_revision="r")
    assert not (tmp_path / "out").exists()
    assert quote_config(prompts, dataclasses.replace(request, chat=False), tokenizer).items == 3


def test_plan_prices_each_configs_protocol_form_and_rows(tmp_path: Path) -> None:
    """Without --chat/--no-chat a config is priced as `probes run` scores it: its protocol's prompt form and
    rows (`where`), here the plain `base` rows of a config that also holds chat-only rows, with a tokenizer that
    has a chat template; --chat still overrides the form (and the base rows then have no chat messages)."""
    from datasets import Features, Value

    from promptgen.core.contract import ITEM_FEATURES, user_messages
    from promptgen.hub.folder import ConfigData, card_front_matter, write_hub_folder
    from runners_fixtures import load_folder, load_tokenizer

    items = []
    for k, item in enumerate(number_items(12)):
        base = k % 3 != 0
        items.append(
            {
                **item,
                "prompt": item["prompt"] if base else None,
                "messages": None if base else user_messages(item["prompt"]),
                "variant": "base" if base else "chat",
            }
        )
    features = Features({**ITEM_FEATURES, "variant": Value("string")})

    def card(manifest: dict, written: list) -> str:
        front = card_front_matter(pretty_name="t", license="cc0-1.0", tags=[], configs=written, default_config=None)
        return f"---\n{front}---\n# t\n"

    protocol = {"name": "paper", "description": "", "scoring": {}, "chat": False, "where": {"variant": ["base"]}}
    manifest = {"recipe": {"sha256": "0" * 64}, "parameters": {}, "sources": [], "protocols": {"games": protocol}}
    data = ConfigData("games", features, lambda: iter([{k: [r.get(k) for r in items] for k in features}]))
    dataset = write_hub_folder(tmp_path / "ds", "tiny", [data], manifest=manifest, render_card=card, rows_per_shard=100)

    tokenizer = load_tokenizer()
    assert tokenizer.chat_template
    result = plan.make_plan(plan.PlanRequest(dataset, str(load_folder()), sample_calls=100, modes=("exact",)))
    cell = result["configs"]["games"]
    assert (cell["chat"], cell["protocol"]) == (False, "paper")
    base = [i for i in items if i["variant"] == "base"]
    assert cell["hf"]["exact"]["items"] == len(base) == 8
    plain = sum(len(tokenizer(i["prompt"], add_special_tokens=False)["input_ids"]) for i in base)
    assert cell["hf"]["exact"]["context_tokens"] == plain
    with pytest.raises(ProbeError, match="no chat messages"):
        plan.make_plan(plan.PlanRequest(dataset, str(load_folder()), chat=True, sample_calls=100, modes=("exact",)))


def test_a_config_is_priced_with_its_fixed_cost_per_config_and_per_call() -> None:
    """Small configs are all fixed cost: hours = the model's FLOPs at the MFU + per config + per call."""
    from runners.plan.pricing import FIXED_COST, GPUS, hours
    from runners.plan.quote import Quote

    shape = plan.ModelShape(8_000_000_000, 0, 32, 4096, 128256, "llama")
    counts = {"computed_tokens": 32 * 300, "context_tokens_per_item": 299}
    priced = hours(shape, counts, "h100", 0.5, None, calls=3)
    model_s = plan.flops(shape, 32 * 300, 300) / (GPUS["h100"].bf16_tflops * 1e12 * 0.5)
    fixed_s = FIXED_COST["per_config_s"] + 3 * FIXED_COST["per_call_s"]
    assert priced["gpu_hours"] * 3600 == pytest.approx(model_s)
    assert priced["fixed_hours"] * 3600 == pytest.approx(fixed_s) and fixed_s > 0
    assert priced["hours"] == pytest.approx(priced["gpu_hours"] + priced["fixed_hours"])
    quote = Quote("c", 32, 32 * 300, 299, "choice", calls=3)
    assert quote.hours(shape, gpu="h100", mfu=0.5, tokens_per_s=None) * 3600 == pytest.approx(model_s + fixed_s)
    assert quote.hours(shape, gpu=None, mfu=0.5, tokens_per_s=1000.0) * 3600 == pytest.approx(9.6 + fixed_s)


def test_a_backend_without_token_accounting_is_quoted_by_its_prompts_and_not_priced(tmp_path: Path) -> None:
    """A plugin backend that declares no `token_counts` (the tests' third one): a sweep still quotes it, counting
    its prompts' tokens (the plain context, re-encoded here), and leaves its hours unknown instead of refusing."""
    import fake_backend
    from runners.backends.load import LoadOptions
    from runners.plan.pricing import count_params
    from runners.plan.quote import quote_config
    from runners.prompts import load_prompt_config
    from runners.run.request import RunRequest
    from runners.scoring.settings import ScoringSettings
    from runners_fixtures import vocab_tokenizer

    tokenizer = vocab_tokenizer("llama-bpe")
    items = number_items(5)
    prompts = load_prompt_config(str(write_prompt_folder(tmp_path / "ds", items)), "items")
    load = LoadOptions.of(backend=fake_backend.NAME)
    request = RunRequest(
        tmp_path / "ds", "items", "m", tmp_path / "out", chat=False, settings=ScoringSettings(), load=load
    )
    quote = quote_config(prompts, request, tokenizer)
    lengths = [len(tokenizer(item["prompt"], add_special_tokens=True)["input_ids"]) for item in items]
    assert (quote.items, quote.priced) == (5, False)
    assert quote.computed_tokens == pytest.approx(sum(lengths)) and quote.context_tokens_per_item == pytest.approx(
        sum(lengths) / 5
    )
    shape = count_params({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
                          "intermediate_size": 128})  # fmt: skip
    assert quote.hours(shape, gpu="h100", mfu=0.5, tokens_per_s=1e3) is None


@pytest.mark.slow  # transformers de-quantises the GGUF on load: about 50 s on 2 cores
def test_a_sweep_prices_a_gguf_model_by_the_config_it_loaded() -> None:
    """A model loaded from `--gguf-file` (a folder with no config.json) is priced by the config transformers read
    from the GGUF: its parameter count is the loaded model's. The sweep read `config.json` beside the model
    again, by the model's name (no revision, no GGUF), and failed there with a traceback after the load."""
    require_extra("hf")
    from runners.backends.load import LoadOptions, load_backend
    from runners.plan.loaded import price_loaded
    from runners.plan.pricing import count_params
    from runners.testmodel import ensure_smollm2

    gguf, _ = ensure_smollm2()
    assert not (gguf.parent / "config.json").exists()
    loaded = load_backend(str(gguf.parent), LoadOptions.of(backend="hf", device="cpu", gguf_file=gguf.name))
    try:
        assert count_params(loaded.config).params == sum(p.numel() for p in loaded.backend.model.parameters())
        plan = price_loaded([], loaded.backend, loaded.tokenizer, loaded.config, 0.4)
        assert plan.device == "cpu" and "computed tokens/s" in plan.rate and plan.hours == 0
    finally:
        loaded.backend.close()
