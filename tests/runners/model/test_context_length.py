"""vLLM's max_model_len follows the items, capped by the model (runners.run.sizing, runners.model.context_length).

A fixed default of 4096 did not load any 2048-position model (GPT-2, Phi-2, Falcon-7B) with
default options. The default is now what the longest items need, checked here against a
brute-force pass over every item, and a vLLM run on a 2048-position Llama works with no
option and exits 0.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from loop_items import ITEMS, write_loop_prompts
from promptgen.core.contract import user_messages
from promptgen.core.errors import ProbeError
from runners import results as res
from runners.model import context_length as cl
from runners.rows import prepare_request
from runners.run import sizing
from runners.scoring.settings import ScoringSettings
from runners.scoring.tokenize import digit_start_ids
from runners_fixtures import load_tokenizer, require_extra, tiny_llama_folder


def test_position_limit_reads_the_usual_config_keys() -> None:
    assert cl.position_limit({"max_position_embeddings": 2048, "n_positions": 1024}) == 2048
    assert cl.position_limit({"n_positions": 1024}) == 1024  # GPT-2
    assert cl.position_limit({"text_config": {"max_position_embeddings": 8192}}) == 8192
    assert cl.position_limit({"hidden_size": 64}) is None


def test_choose_max_model_len() -> None:
    assert cl.choose_max_model_len(None, 117, 2048, "m") == 256  # rounded up for headroom
    assert cl.choose_max_model_len(None, 300, 2048, "m") == 512
    assert cl.choose_max_model_len(None, 2000, 2048, "m") == 2048  # capped by the model
    assert cl.choose_max_model_len(None, 5000, None, "m") == 5120  # no stated limit
    assert cl.choose_max_model_len(1024, 117, 2048, "m") == 1024  # as asked
    with pytest.raises(ProbeError, match="above the 2048 positions of m"):
        cl.choose_max_model_len(4096, 117, 2048, "m")
    with pytest.raises(ProbeError, match="below the 300 positions"):
        cl.choose_max_model_len(256, 300, 2048, "m")
    with pytest.raises(ProbeError, match="need 3000 positions, more than the 2048 of m"):
        cl.choose_max_model_len(None, 3000, 2048, "m")


def _brute_force(items: list[dict], tokenizer, chat: bool, settings: ScoringSettings) -> int:
    digits = digit_start_ids(tokenizer)
    need = 0
    for item in items:
        request = prepare_request(item, tokenizer, chat, settings, digits)
        need = max(need, len(request.context) + max(len(c) for c in request.continuations) + 1)
    return need


@pytest.mark.parametrize("chat", [False, True])
def test_tokens_needed_equals_brute_force_over_every_item(chat: bool) -> None:
    """More items than the sample, lengths shuffled: the sample by characters still finds the longest."""
    from datasets import Dataset

    require_extra("hf")
    tokenizer = load_tokenizer()
    rng = random.Random(0)
    items = []
    for k in range(3 * cl.SAMPLE):
        base = dict(ITEMS[k % len(ITEMS)])
        words = " ".join(rng.choice(["effort", "ability", "luck", "the", "exam"]) for _ in range(rng.randint(1, 60)))
        base["prompt"] = (
            base["prompt"]
            .replace("Question:", f"Context: {words}.\nQuestion:")
            .replace("Choose the reason.", f"Choose the reason. {words}.")
        )
        base["messages"] = user_messages(base["prompt"])
        base["id"] = f"{base['id']}-{k}"
        items.append(base)
    dataset = Dataset.from_list(items)
    settings = ScoringSettings()
    got = sizing.tokens_needed(dataset, list(range(len(items))), tokenizer, chat, settings)
    assert got == _brute_force(items, tokenizer, chat, settings)
    generate = ScoringSettings(mode="generate", max_new_tokens=40)
    assert sizing.tokens_needed(dataset, [0, 1], tokenizer, chat, generate) > 40


@pytest.mark.slow
def test_vllm_with_default_options_runs_a_2048_position_model_and_exits_0(tmp_path: Path) -> None:
    require_extra("vllm")
    model = tiny_llama_folder("float32")
    assert json.loads((model / "config.json").read_text())["max_position_embeddings"] == 2048
    prompts = write_loop_prompts(tmp_path / "prompts", ITEMS)
    out = tmp_path / "results"
    cmd = [sys.executable, "-m", "probes.cli", "run", str(prompts), "-c", "items", "-m", str(model)]
    cmd += ["--backend", "vllm", "--no-chat", "--out", str(out), "-q"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    (folder,) = (d for d in (out / "data" / "items").iterdir() if d.is_dir())
    assert sorted(res.read_key_rows(folder).column("id").to_pylist()) == sorted(i["id"] for i in ITEMS)
    (run,) = json.loads((out / res.MANIFEST_NAME).read_text())["runs"].values()
    engine = json.dumps(run["hardware"])
    assert '"max_model_len": 256' in engine  # the items need under 256 positions
    too_long = subprocess.run([*cmd, "--max-model-len", "4096"], capture_output=True, text=True, timeout=300)
    assert too_long.returncode == 1 and "above the 2048 positions" in too_long.stderr
    assert "Traceback" not in too_long.stderr
