"""`probes plan` and the sweep's quote price generated configs (issue #48): prompt and decoded tokens, decode cost."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from probes.cli import app
from runners import plan
from runners_fixtures import LLAMA3_8B_SHAPE, load_folder, tiny_llama_folder

CONFIG = "religion_P0S0T0"
LLAMA3_8B = dict(model_type="llama", **LLAMA3_8B_SHAPE)


def _rows(dataset: Path, limit: int) -> list[dict[str, Any]]:
    """The config's first `limit` rows, as `probes run --limit` selects them (no protocol row selection here)."""
    from promptgen.hub.read import config_files

    return plan.ConfigRows(config_files(dataset, CONFIG, required=True)).read(0, limit)


def test_decode_step_is_the_larger_of_its_memory_and_its_flops_time() -> None:
    """`decode_step_seconds` against its definition, by hand: bf16 weights read once plus every sequence's KV cache
    over the bandwidth, or 2 x params x B FLOPs over peak x MFU, whichever is longer; `decode_seconds` sums steps."""
    from runners.plan.pricing import GPUS, decode_seconds, decode_step_seconds
    from runners.scoring.generate_accounting import DecodeGroup

    shape = plan.count_params(LLAMA3_8B)
    params = 8_030_261_248
    assert shape.params == params
    kv_per_token = 2 * 32 * (8 * 128) * 2  # keys and values, 32 layers, 8 heads x 128, 2 bytes
    assert shape.kv_bytes_per_token == kv_per_token == 131072
    assert [GPUS[g].memory_tb_s for g in ("h100", "h200", "a100", "a6000", "l40s")] == [3.35, 4.8, 2.039, 0.768, 0.864]
    for gpu, batch, cached in (("h100", 1, 300.0), ("h100", 1024, 200.0), ("a6000", 64, 150.0), ("h200", 256, 500.0)):
        memory_s = (2 * params + batch * cached * kv_per_token) / (GPUS[gpu].memory_tb_s * 1e12)
        compute_s = 2 * params * batch / (GPUS[gpu].bf16_tflops * 1e12 * 0.5)
        assert decode_step_seconds(shape, gpu, 0.5, batch, cached) == pytest.approx(max(memory_s, compute_s), rel=1e-12)
    # one sequence waits on memory (16 GB of weights: 4.8 ms on an H100); 1024 of them on the FLOPs (33 ms)
    assert decode_step_seconds(shape, "h100", 0.5, 1, 300) == pytest.approx(2 * params / 3.35e12, rel=0.01)
    assert decode_step_seconds(shape, "h100", 0.5, 1024, 200) == pytest.approx(2 * params * 1024 / 494.7e12)
    groups = [DecodeGroup(10, 4, 50.0), DecodeGroup(3.5, 300, 120.0)]
    want = 10 * decode_step_seconds(shape, "l40s", 0.4, 4, 50.0)
    want += 3.5 * decode_step_seconds(shape, "l40s", 0.4, 300, 120)
    assert decode_seconds(shape, groups, "l40s", 0.4) == pytest.approx(want, rel=1e-12)


def test_hf_generation_batches_decode_until_their_longest_answer() -> None:
    """hf: prompts sorted by length, cut under the budget (rows x (prompt + max_new_tokens)), each batch prefilled
    padded and decoding until its longest answer stops; the expected longest of k answers by enumeration."""
    from runners.backends.hf.accounting import hf_generate_counts
    from runners.scoring.generate_accounting import DecodedLengths, GenerateCall

    # lengths 5, 9, 7, 20 sorted: 5, 7, 9 (3 rows x (9 + 4) = 39 <= 40), then 20 alone (2 x 24 > 40)
    contexts = [tuple(range(n)) for n in (5, 9, 7, 20)]
    call = GenerateCall(contexts, 4, DecodedLengths.ceiling(4), max_batch_tokens=40, block_size=16)
    got = hf_generate_counts(call)
    assert got.prompt_tokens == 41 and got.computed_prompt_tokens == 3 * 9 + 1 * 20
    assert got.decoded_tokens == 4 * 4 and got.decode_positions == 3 * 3 + 1 * 3  # the first token is the prefill's
    assert [(g.steps, g.sequences, g.kv_tokens) for g in got.groups] == [(3, 3, 9 + 2), (3, 1, 20 + 2)]
    # answers of 1 or 4 tokens, equally likely: a batch of 3 decodes until its longest (mean of all 8 draws)
    lengths = DecodedLengths({1: 5, 4: 5})
    brute = sum(max(draw) for draw in itertools.product((1, 4), repeat=3)) / 8
    assert lengths.longest(3) == pytest.approx(brute) and lengths.mean == 2.5
    mixed = hf_generate_counts(GenerateCall(contexts, 4, lengths, max_batch_tokens=40, block_size=16))
    assert mixed.decode_positions == pytest.approx(3 * (brute - 1) + 1 * (2.5 - 1))  # one row: its own answer
    # sampled requests run alone (`hf.generate`): no padding, every row its own answer
    alone = hf_generate_counts(GenerateCall(contexts, 4, lengths, max_batch_tokens=40, block_size=16, sampled=True))
    assert alone.computed_prompt_tokens == 41 and alone.decode_positions == pytest.approx(4 * 1.5)


def test_vllm_decodes_up_to_its_default_sequences_with_no_padding() -> None:
    """vLLM: as many sequences as vLLM 0.32's offline default lets run (1024 on an H100, 256 on an A100) or the
    KV cache holds; each sequence decodes its own answer; prefix caching reuses whole blocks of earlier prompts."""
    from runners.backends.vllm.accounting import vllm_generate_counts
    from runners.plan.pricing import decode_machine
    from runners.scoring.generate_accounting import DecodedLengths, GenerateCall

    shape = plan.count_params(LLAMA3_8B)
    shared = tuple(range(1000, 1040))  # 40 tokens: two whole blocks of 16 shared
    contexts = [shared + tuple(range(k * 100, k * 100 + 10)) for k in range(2000)]
    lengths = DecodedLengths({2: 1, 10: 1})
    call = GenerateCall(contexts, 10, lengths, max_batch_tokens=1, block_size=16, machine=decode_machine(shape, "h100"))
    got = vllm_generate_counts(call)
    assert got.prompt_tokens == 2000 * 50
    assert got.computed_prompt_tokens == 50 + 1999 * (50 - 32)
    assert got.decode_positions == 2000 * (6 - 1)
    ((group,),) = [got.groups]
    assert group.sequences == pytest.approx(1024) and group.steps == pytest.approx(2000 * 5 / 1024)
    assert group.kv_tokens == pytest.approx(50 + 6 / 2)
    on_a100 = vllm_generate_counts(dataclasses.replace(call, machine=decode_machine(shape, "a100")))
    assert on_a100.groups[0].sequences == pytest.approx(256)
    # 2,000-token prompts on an A6000: its KV cache, 0.9 x 48 GiB less the 16 GB of weights, holds fewer than 256
    long = [tuple(range(k * 3000, k * 3000 + 2000)) for k in range(300)]
    on_a6000 = vllm_generate_counts(dataclasses.replace(call, contexts=long, machine=decode_machine(shape, "a6000")))
    fits = int((0.9 * 48 * 2**30 - 2 * shape.params) / 131072 // (2000 + 6))
    assert fits < 256 and on_a6000.groups[0].sequences == pytest.approx(fits)
    assert on_a6000.groups[0].steps == pytest.approx(300 * 5 / fits)


def test_plan_prices_an_empathy_build_as_generation_and_as_numbers_under_scoring_sentence(
    built_empathy_events12: Path, tmp_path: Path
) -> None:
    """The empathy configs' protocol is greedy generation of at most 128 tokens on the chat form: the plan
    prices that by default (prompt tokens as the run encodes them, 128 decoded tokens each, hours per
    backend), and the number modes under --scoring sentence, as `probes run --scoring sentence` scores them."""
    from transformers import AutoTokenizer

    from runners.rows import cached_digit_start_ids, generation_request, prepare_request
    from runners.scoring.settings import ScoringSettings, scoring_settings

    folder = tiny_llama_folder("float32")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    items = _rows(built_empathy_events12, 16)
    args = ["plan", str(built_empathy_events12), "--model", str(folder), "-c", CONFIG, "--limit", "16", "-q"]
    default = CliRunner().invoke(app, [*args, "--json", str(tmp_path / "default.json")], env={"COLUMNS": "240"})
    assert default.exit_code == 0, default.output
    priced = json.loads((tmp_path / "default.json").read_text())
    cell = priced["configs"][CONFIG]
    assert (cell["scoring"], cell["chat"], cell["generation"]["max_new_tokens"]) == ("generate", True, 128)
    settings = scoring_settings("generate", max_new_tokens=128)
    prompts = sum(len(generation_request(item, tokenizer, True, settings).context) for item in items)
    for backend in ("hf", "vllm", "openai"):
        (mode,) = cell[backend]
        assert mode == "generate" and cell[backend][mode]["items"] == 16
        assert cell[backend][mode]["prompt_tokens"] == prompts
        assert cell[backend][mode]["decoded_tokens"] == 16 * 128
    hf, vllm = cell["hf"]["generate"], cell["vllm"]["generate"]
    assert hf["hours"] == pytest.approx(hf["prefill_hours"] + hf["decode_hours"] + hf["fixed_hours"])
    assert hf["decode_hours"] > 0 and vllm["decode_hours"] > 0 and "prompts" in cell["openai"]["generate"]
    # the table's rows (the command prints them; its console's width is fixed when the CLI is imported)
    from runners.plan.output import plan_rows

    generated = [row for row in plan_rows(priced) if row[2] == "generate"]
    assert generated and all(row[9] == "128.0" for row in generated)

    numbers = CliRunner().invoke(app, [*args, "--scoring", "sentence", "--json", str(tmp_path / "numbers.json")])
    assert numbers.exit_code == 0, numbers.output
    cell = json.loads((tmp_path / "numbers.json").read_text())["configs"][CONFIG]
    assert cell["scoring"] == "sentence" and "generation" not in cell
    digits = cached_digit_start_ids(tokenizer)
    contexts = sum(len(prepare_request(i, tokenizer, True, ScoringSettings(), digits).context) for i in items)
    for backend in ("hf", "vllm", "openai"):
        assert set(cell[backend]) == {"exact", "first-token"}
        assert cell[backend]["exact"]["context_tokens"] == contexts
        assert cell[backend]["exact"]["continuation_positions"] > 0


def test_plan_of_8_items_equals_what_their_run_computed(
    built_empathy_events12: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run 8 empathy items (hf, greedy, 24 new tokens), then plan the same 8 with --profile on the results: the
    plan's prompt tokens, decoded tokens and padded prefill per item are those the run's batches computed
    (recorded inside the hf backend), within 10%, and the sweep's quote of them prices what the plan prices."""
    from transformers import AutoTokenizer

    from runners.backends.hf import generate as hf_generate
    from runners.backends.load import LoadOptions
    from runners.plan.pricing import GPUS, load_model_config
    from runners.plan.quote import quote_config
    from runners.prompts import load_prompt_config
    from runners.results import key_folders, read_key_rows
    from runners.run.request import RunRequest
    from runners.run.runner import run
    from runners.scoring.settings import scoring_settings

    model = load_folder()  # SmolLM2-135M-Instruct: real answers, which stop before the ceiling
    batches: list[tuple[list[int], list[int]]] = []
    real = hf_generate._generate_batch

    def spy(model: Any, tokenizer: Any, requests: list, eos: Any, pad: int) -> list:
        out = real(model, tokenizer, requests, eos, pad)
        # tokens generated: the kept ones, and the end-of-turn token the backend cut off where the answer stopped
        generated = [len(g.token_ids) + (g.finish_reason == "stop") for g in out]
        batches.append(([len(r.context) for r in requests], generated))
        return out

    monkeypatch.setattr(hf_generate, "_generate_batch", spy)
    results = tmp_path / "results"
    load = LoadOptions.of(backend="hf", device="cpu", dtype="float32", max_batch_tokens=8192)
    run(built_empathy_events12, CONFIG, str(model), results, limit=8, settings={"max_new_tokens": 24}, load=load)
    prompts = [n for lengths, _ in batches for n in lengths]
    answers = [n for _, tokens in batches for n in tokens]
    assert len(prompts) == 8 and max(answers) <= 24
    assert sum(answers) / 8 < 20, answers  # the model stops: a profile that is not the ceiling
    (key,) = key_folders(results, CONFIG)
    stored = read_key_rows(key, ["context_tokens"])["context_tokens"].to_pylist()
    assert sorted(stored) == sorted(prompts)

    request = plan.PlanRequest(
        built_empathy_events12,
        str(model),
        configs=(CONFIG,),
        limit=8,
        max_new_tokens=24,
        items_per_call=64,
        max_batch_tokens=8192,
        profile=results,
    )
    priced = plan.make_plan(request)
    cell = priced["configs"][CONFIG]["hf"]["generate"]
    assert cell["items"] == 8 and cell["exact"]
    assert cell["prompt_tokens_per_item"] == pytest.approx(sum(prompts) / 8, rel=0.10)
    assert cell["decoded_tokens_per_item"] == pytest.approx(sum(answers) / 8, rel=0.10)
    padded = sum(len(lengths) * max(lengths) for lengths, _ in batches)
    assert cell["computed_prompt_tokens"] == pytest.approx(padded, rel=0.10)
    steps = sum(len(tokens) * (max(tokens) - 1) for _, tokens in batches)
    assert cell["decode_positions"] == pytest.approx(steps, rel=0.10)
    assert "8 generated rows" in priced["generation_profile"]

    # the sweep's quote of the same rows (answers at the 24-token ceiling) prices them as the plan does
    ceiling = plan.make_plan(dataclasses.replace(request, profile=None))["configs"][CONFIG]["hf"]["generate"]
    assert ceiling["decoded_tokens_per_item"] == 24
    settings = scoring_settings("generate", max_new_tokens=24)
    run_request = RunRequest(built_empathy_events12, CONFIG, str(model), tmp_path / "q", settings=settings, chat=True)
    run_request = dataclasses.replace(run_request, limit=8, load=load)
    prompts_config = load_prompt_config(str(built_empathy_events12), CONFIG)
    quote = quote_config(
        prompts_config, run_request, AutoTokenizer.from_pretrained(model), items_per_call=64, max_batch_tokens=8192
    )
    shape = plan.count_params(load_model_config(str(model)))
    assert quote.computed_tokens == pytest.approx(ceiling["computed_prompt_tokens"], rel=1e-12)
    assert quote.decoded_tokens == 8 * 24
    assert quote.hours(shape, gpu="h100", mfu=0.5, tokens_per_s=None) == pytest.approx(ceiling["hours"], rel=1e-9)
    # on a CPU: prefill positions at the measured prefill rate, the decode's 8 x 23 positions at the decode rate
    fixed = ceiling["fixed_hours"]
    want = (quote.computed_tokens / 1000 + 8 * 23 / 50) / 3600 + fixed
    assert quote.hours(shape, gpu=None, mfu=0.5, tokens_per_s=1000, decode_tokens_per_s=50) == pytest.approx(want)
    assert GPUS["h100"].memory_tb_s == 3.35


def test_a_profile_for_a_plan_without_generated_configs_is_one_line(tmp_path: Path) -> None:
    """--profile without --number-tolerance measures generated answers: on configs priced as numbers it is one
    line, before any counting; a folder without generated rows is one line too."""
    from promptgen.core.errors import ProbeError
    from runners import results as res
    from runners_fixtures import number_items, write_prompt_folder

    dataset = write_prompt_folder(tmp_path / "ds", number_items(3))
    folder = tmp_path / "results" / "data" / "items" / "m-0123456789abcdef"
    folder.mkdir(parents=True)
    (tmp_path / "results" / res.MANIFEST_NAME).write_text("{}")
    res.write_part(folder, (0, 1), [{"id": "a", "scoring": '{"number_tolerance":0.01}', "trie_positions": 7}])
    model = str(tiny_llama_folder("float32"))
    request = plan.PlanRequest(dataset, model, chat=False, profile=tmp_path / "results")
    with pytest.raises(ProbeError, match="none of the configs priced is generated"):
        plan.make_plan(request)
    with pytest.raises(ProbeError, match="no generated rows"):
        plan.make_plan(dataclasses.replace(request, scoring="generate"))
    with pytest.raises(ProbeError, match="--scoring must be one of sentence, letter, generate"):
        plan.make_plan(dataclasses.replace(request, scoring="greedy"))
