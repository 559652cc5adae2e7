"""A backend's own load options are its own: no shared module of `runners` reads one by name.

The loader, the drivers and the quotes ask the backend's options (`BackendOptions`' methods: `checkpoint_files`,
`tokenizer_source`, `settle`, `size_call`, `gpus_per_replica`), so a new backend settles its options in its
own package and nothing else changes. The scan below finds a read by name: the option's name as a string
where a string names what is read (`load.get("max_model_len")`, `getattr(backend, "max_batch_tokens")`,
`{"gguf_file": ...}`, `spec.takes("gpu_memory_utilization")`) or as an attribute of an options object
(`load.options.gguf_file`), in every module of `src/runners` outside the backends' own packages. A keyword
argument of a shared type whose field has the same name (`GenerateCall(max_batch_tokens=...)`) is no read.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterable
from pathlib import Path

import pytest

from promptgen.core.errors import ProbeError
from runners.backends import BACKENDS, BackendOptions, BackendSpec
from runners.backends.load import LoadOptions
from runners.backends.vllm.spec import VllmOptions
from runners.scoring.generate_accounting import DecodedLengths, GenerateCall

RUNNERS = Path(__file__).resolve().parents[3] / "src" / "runners"


def own_options() -> set[str]:
    """Every registered backend's own option names, less those every backend reads (`LoadOptions`'s)."""
    shared = {f.name for f in dataclasses.fields(LoadOptions)}
    return {name for spec in BACKENDS.values() for name in spec.option_names()} - shared


def own_packages(root: Path) -> set[Path]:
    """The folders of the registered backends' own packages under `root` (where each one's loader lives)."""
    folders = set()
    for spec in BACKENDS.values():
        parts = spec.loader.split(":")[0].split(".")
        if parts[:2] == ["runners", "backends"] and len(parts) > 3:
            folders.add(root / "backends" / parts[2])
    return folders


def _is_options(node: ast.expr) -> bool:
    """An options object: a name or attribute ending in `options` (`options`, `load.options`, `load_options`)."""
    if isinstance(node, ast.Name):
        return node.id.endswith("options")
    return isinstance(node, ast.Attribute) and node.attr.endswith("options")


#: the built-ins that take an attribute's name second (`getattr(options, "gguf_file")`)
BY_NAME = {"getattr", "hasattr", "setattr", "delattr"}


def _keys(node: ast.AST) -> list[ast.expr]:
    """The expressions where a string names what is read: a method's first argument (`load.get("x")`,
    `spec.takes("x")`), `getattr`'s second, an index (`d["x"]`), a dict's keys, a comparison's operands.
    Not any string: a message or a default (`getattr(t, "name_or_path", "tokenizer")`) names nothing."""
    if isinstance(node, ast.Call) and node.args:
        if isinstance(node.func, ast.Attribute):
            return [node.args[0]]
        if isinstance(node.func, ast.Name) and node.func.id in BY_NAME and len(node.args) > 1:
            return [node.args[1]]
    if isinstance(node, ast.Subscript):
        return [node.slice]
    if isinstance(node, ast.Dict):
        return [key for key in node.keys if key is not None]
    if isinstance(node, ast.Compare):
        return [node.left, *node.comparators]
    return []


def option_reads(root: Path, names: Iterable[str]) -> list[str]:
    """`path:line name` of each read of a backend's own option by name outside the backends' own packages."""
    names, owned = set(names), own_packages(root)
    found = []
    for path in sorted(root.rglob("*.py")):
        if any(folder in path.parents for folder in owned):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for key in _keys(node):
                if isinstance(key, ast.Constant) and key.value in names:
                    found.append(f"{path.relative_to(root)}:{key.lineno} {key.value!r}")
            if isinstance(node, ast.Attribute) and node.attr in names and _is_options(node.value):
                found.append(f"{path.relative_to(root)}:{node.lineno} .{node.attr}")
    return sorted(found)


def test_no_shared_module_reads_a_backends_option_by_name() -> None:
    names = own_options()
    assert {"max_model_len", "gpu_memory_utilization", "gguf_file", "tokenizer", "block_size"} <= names
    assert not {"backend", "revision", "dtype", "device"} & names
    assert own_packages(RUNNERS) >= {RUNNERS / "backends" / n for n in ("hf", "vllm", "openai")}
    assert option_reads(RUNNERS, names) == []


def test_the_scan_finds_a_read_by_name(tmp_path: Path) -> None:
    """What the old loader did (`load.get("max_model_len")`, `load.options.gguf_file`) is found; a backend's own
    package may read its options, and a field of another name (`located.tokenizer`) is no option read."""
    (tmp_path / "backends" / "vllm").mkdir(parents=True)
    (tmp_path / "backends" / "vllm" / "spec.py").write_text('x = options.max_model_len\ny = load.get("block_size")\n')
    (tmp_path / "load.py").write_text(
        'a = load.get("max_model_len")\nb = load.options.gguf_file\nc = located.tokenizer\nd = "--max-model-len"\n'
        'e = {"gguf_file": f}\nf = getattr(t, "name_or_path", "tokenizer")\ng = getattr(b, "max_batch_tokens", None)\n'
    )
    assert option_reads(tmp_path, own_options()) == [
        "load.py:1 'max_model_len'",
        "load.py:2 .gguf_file",
        "load.py:5 'gguf_file'",
        "load.py:7 'max_batch_tokens'",
    ]


def test_each_backend_s_options_answer_for_themselves() -> None:
    """What the shared modules ask instead: each backend's answer (`BackendOptions`' methods), and the defaults
    where a backend settles nothing, or has no options class at all (`LoadOptions.own`)."""
    load = LoadOptions.of(backend="hf", gguf_file="model.gguf")
    assert load.own.checkpoint_files() == {"gguf_file": "model.gguf"}
    assert LoadOptions().own.checkpoint_files() == {} == VllmOptions().checkpoint_files()
    served = LoadOptions.of(backend="openai", base_url="http://localhost:8000/v1", tokenizer="org/tok")
    assert served.own.tokenizer_source() == "org/tok" and load.own.tokenizer_source() is None
    assert VllmOptions(tensor_parallel_size=4).gpus_per_replica() == 4 and load.own.gpus_per_replica() == 1
    call = GenerateCall([[1, 2]], 4, DecodedLengths.ceiling(4), max_batch_tokens=8192, block_size=16)
    sized = LoadOptions.of(backend="hf", max_batch_tokens=300)
    assert sized.own.size_call(call) == dataclasses.replace(call, max_batch_tokens=300)
    assert VllmOptions(block_size=32).size_call(call) == dataclasses.replace(call, block_size=32)
    assert served.own.size_call(call) is call is VllmOptions().size_call(call)
    bare = BackendOptions()  # a backend with no options class (`BackendSpec.options` None) settles nothing
    assert (bare.checkpoint_files(), bare.tokenizer_source(), bare.gpus_per_replica()) == ({}, None, 1)
    assert bare.size_call(call) is call and bare.check_load(load) is None


def test_a_backend_s_options_must_be_backend_options() -> None:
    """Registration checks the type: a plain class (no methods to ask) is one line naming the backend."""

    @dataclasses.dataclass(frozen=True)
    class Plain:
        x: int | None = None

    says = r"backend 'plain': its options '.*Plain' must be a runners.backends.BackendOptions subclass"
    with pytest.raises(ProbeError, match=says):
        BackendSpec(name="plain", loader="nowhere:load", options=Plain)
