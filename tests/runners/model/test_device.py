"""The `auto` defaults (runners.model.device) and the Ray resources of a replica, with the GPU facts mocked.

No GPU is lent to CI: `torch.cuda.is_available` and Ray's cluster resources are mocked, and
the numbers are checked against hand computations from the config.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from promptgen.core.errors import ProbeError
from runners.model import device
from runners_fixtures import require_extra


def _llama(**overrides) -> SimpleNamespace:
    """A Llama-3-8B-shaped config (meta-llama/Meta-Llama-3-8B config.json), or a variant of it."""
    values = dict(
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=128256,
        tie_word_embeddings=False,
        dtype="bfloat16",
    )
    return SimpleNamespace(**{**values, **overrides})


@pytest.mark.parametrize("available, want", [(True, "cuda"), (False, "cpu")])
def test_auto_device_follows_cuda_availability(monkeypatch: pytest.MonkeyPatch, available: bool, want: str) -> None:
    require_extra("hf")
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: available)
    assert device.resolve_device("auto") == want
    assert device.resolve_device("cuda:1") == "cuda:1" and device.resolve_device("cpu") == "cpu"


def test_auto_dtype_is_the_checkpoint_dtype() -> None:
    require_extra("hf")
    import torch

    assert device.resolve_dtype("auto", _llama(dtype=torch.bfloat16)) == "bfloat16"
    assert device.resolve_dtype("auto", SimpleNamespace(torch_dtype="float16")) == "float16"  # an older config
    assert device.resolve_dtype("auto", SimpleNamespace(dtype=None)) == "float32"  # states none: what loads
    assert device.resolve_dtype("float32", _llama()) == "float32"  # asked for


def test_parameter_estimate_of_llama_3_8b() -> None:
    # the published count of Meta-Llama-3-8B is 8.03B (norms, 0.3M, are left out of the estimate)
    assert abs(device.estimated_parameters(_llama()) - 8.03e9) < 0.01e9


def test_cpu_warning_for_gpu_models_only() -> None:
    small_fp32 = _llama(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, vocab_size=49152, dtype=None)
    assert device.cpu_warning(small_fp32, "m") is None
    message = device.cpu_warning(_llama(), "meta-llama/Meta-Llama-3-8B")
    assert "stored in bfloat16" in message and "8.0B parameters" in message and "--device cpu" in message
    assert "stored in bfloat16" in device.cpu_warning(_llama(num_hidden_layers=1, vocab_size=10), "tiny")


def test_cuda_token_budget_from_free_memory() -> None:
    config, free = _llama(), 60 * 2**30
    # per token: K and V in 32 layers of 8 heads x 128 dims in bf16, plus one layer's activations
    kv = 2 * 32 * 8 * 128 * 2
    activations = (4 * 4096 + 32 * 128 + 3 * 14336) * 2
    assert device.bytes_per_token(config, "bfloat16") == kv + activations
    logits = 4096 * 128256 * (2 + 4 + 4)
    want = int((free - logits) * device.CUDA_BUDGET_FRACTION // (kv + activations))
    assert device.cuda_token_budget(config, "bfloat16", free, 4096) == want
    assert device.cuda_token_budget(config, "bfloat16", 2**20, 4096) == 1024  # nothing free: the floor


@pytest.mark.parametrize(
    "message, oom",
    [
        ("CUDA out of memory. Tried to allocate 20.00 MiB", True),
        ("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", True),
        ("DefaultCPUAllocator: not enough memory: you tried to allocate 8 bytes", True),
        ("[enforce fail] DefaultCPUAllocator: can't allocate memory: out of memory", True),
        ("Expected all tensors to be on the same device", False),
    ],
)
def test_out_of_memory_messages(message: str, oom: bool) -> None:
    assert device.is_out_of_memory(RuntimeError(message)) is oom
    assert device.is_out_of_memory(ValueError(message)) is False  # only runtime errors are allocator failures


def test_torch_out_of_memory_error_is_out_of_memory() -> None:
    require_extra("hf")
    import torch

    assert device.is_out_of_memory(torch.OutOfMemoryError("anything"))


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch):
    """A fake `ray` module whose cluster has the resources the test sets."""
    resources: dict[str, float] = {}
    monkeypatch.setitem(sys.modules, "ray", SimpleNamespace(cluster_resources=lambda: dict(resources)))
    return resources


@pytest.mark.parametrize("device_name", ["auto", "cuda"])
def test_vllm_replicas_ask_for_the_tensor_parallel_size_in_gpus(cluster: dict, device_name: str) -> None:
    from runners.run.ray_driver import _worker_resources

    cluster.update(CPU=64.0, GPU=8.0)
    assert _worker_resources(device_name, 2, backend="vllm", gpus_per_replica=4) == {"num_gpus": 4.0}
    assert _worker_resources(device_name, 8, backend="vllm", gpus_per_replica=1) == {"num_gpus": 1.0}
    with pytest.raises(ProbeError, match=r"--ray-workers 3 needs 12 GPU\(s\) .*\(4 per replica\), it has 8"):
        _worker_resources(device_name, 3, backend="vllm", gpus_per_replica=4)


def test_hf_replicas_ask_for_one_gpu_on_cuda_and_a_cpu_otherwise(cluster: dict) -> None:
    from runners.run.ray_driver import _worker_resources

    cluster.update(CPU=16.0, GPU=2.0)
    assert _worker_resources("auto", 2, backend="hf") == {"num_gpus": 1.0}  # auto resolves to the cluster's GPUs
    assert _worker_resources("cuda", 2, backend="hf") == {"num_gpus": 1.0}
    assert _worker_resources("cpu", 2, backend="hf") == {"num_cpus": 1.0}
    assert _worker_resources("cpu", 2, backend="vllm") == {"num_cpus": 1.0}
    cluster.pop("GPU")  # a CPU-only cluster: auto is the CPU, for both backends
    assert _worker_resources("auto", 2, backend="hf") == {"num_cpus": 1.0}
    assert _worker_resources("auto", 2, backend="vllm", gpus_per_replica=2) == {"num_cpus": 1.0}


class _FakeCudaModel:
    """What `from_pretrained` returns on a GPU machine, as far as HFBackend looks at it."""

    def __init__(self, config: SimpleNamespace, dtype: str) -> None:
        import torch

        self.config, self.dtype = config, getattr(torch, dtype)
        self.device = torch.device("cuda", 0)
        self.hf_device_map = {"model.embed_tokens": 0, "model.layers.0": 0, "model.layers.1": 1, "lm_head": 1}

    def eval(self) -> _FakeCudaModel:
        return self


@pytest.mark.parametrize("device_map", [None, "auto"])
def test_hf_loads_straight_onto_the_gpu_with_a_budget_from_free_memory(
    monkeypatch: pytest.MonkeyPatch, device_map: str | None
) -> None:
    require_extra("hf")
    import torch
    import transformers

    from runners.backends.hf.backend import HFBackend
    from runners.backends.hf.spec import HfOptions

    seen: dict = {}

    def from_pretrained(model_id: str, **kwargs) -> _FakeCudaModel:
        seen.update(kwargs)
        return _FakeCudaModel(_llama(), "bfloat16")

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", from_pretrained)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (40 * 2**30, 80 * 2**30))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: f"NVIDIA H100 80GB HBM3 #{device}")
    backend = HFBackend.from_pretrained("m", HfOptions(device_map=device_map), dtype="bfloat16", device="cuda")
    # weights go straight to the GPU (or over all GPUs), never through host memory and .to()
    assert seen["device_map"] == (device_map or "cuda") and seen["dtype"] == torch.bfloat16
    assert backend.max_logit_rows == device.MAX_LOGIT_ROWS["cuda"] == 4096
    assert backend.max_batch_tokens == device.cuda_token_budget(_llama(), "bfloat16", 40 * 2**30, 4096)
    hardware = backend.hardware().manifest()
    assert hardware["dtype"] == "bfloat16" and hardware["device"] == "cuda:0" and hardware["device_map"] == ["0", "1"]
    assert hardware["gpu"].startswith("NVIDIA H100") and len(hardware["gpus"]) == 2
    given = HFBackend.from_pretrained(
        "m", HfOptions(max_batch_tokens=5000, max_logit_rows=7), dtype="bfloat16", device="cuda"
    )
    assert (given.max_batch_tokens, given.max_logit_rows) == (5000, 7)  # given values are kept
