"""The empathy authors' released code, loaded to run as the tests' oracle (tests/reference/README.md).

Each loader executes one unchanged file of `houyu0930/intergroup-empathy-bias` at cdfd1a6 (checked
against its sha256 pin first) and returns its namespace, so a test calls the authors' own
functions (`get_prompt_pair`, `prepare_prompts`, `extract_numbers`, the notebook's `get_delta`, ...)
on the same input as ours, instead of a copy of their strings or rules.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REFERENCE = Path(__file__).parent / "reference" / "intergroup_empathy_bias"
#: the release's narratives, as the recipe reads them (../shared/sources beside the checkout)
RELEASE_SOURCES = Path(__file__).resolve().parents[2] / "shared" / "sources"
RELEASE_DATA = RELEASE_SOURCES / "intergroup-empathy-release" / "data"

PINS: dict[str, str] = {
    "const.py": "b16b9c53e6410da40b08c163a92a8d51851fee744129257694f6204740deab02",
    "batch_pred_emotion.py": "6e6b9e221bdee8d5cec8735c6c0511886e12f1870edd44faf5fc2c859b39ae5b",
    "analysis/process_exp_results.py": "46186002f2c80d2c903190c1e1f14acd8a9cda96cf3e1e09b20d42ce4f2db171",
    "analysis/analysis_after_processing.ipynb": "e07d3a41d0079a5e4d669d5fdfd50e423730ac73414f3d0344e87af81c913405",
}


def source(name: str) -> str:
    """One reference file's text, after checking its pin (a changed copy is no oracle)."""
    data = (REFERENCE / name).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != PINS[name]:
        raise AssertionError(f"tests/reference/intergroup_empathy_bias/{name} is not the pinned file ({digest})")
    return data.decode("utf-8")


class _Namespace(dict):
    """Module globals in which the released `const.py`'s undefined `country_list1` is its own
    `country_list` (the file defines `country_list` and then reads `country_list1`, a NameError as
    released; docs/REPRODUCING.md). Nothing else is supplied."""

    def __missing__(self, key: str) -> Any:
        if key == "country_list1":
            return self["country_list"]
        raise KeyError(key)


def _module(name: str, text: str, filename: str) -> types.ModuleType:
    module = types.ModuleType(name)
    namespace = _Namespace(module.__dict__)
    exec(compile(text, filename, "exec"), namespace, namespace)
    module.__dict__.update(namespace)
    return module


def const() -> types.ModuleType:
    """`const.py`: `group_mappings`, `crowd_enVent_emotions`, `get_prompt_pair`, the prompt strings."""
    return _module("const", source("const.py"), str(REFERENCE / "const.py"))


def batch_pred_emotion() -> types.ModuleType:
    """`batch_pred_emotion.py` with its own `from const import ...` served by `const()`."""
    saved = sys.modules.get("const")
    sys.modules["const"] = const()
    try:
        return _module("batch_pred_emotion", source("batch_pred_emotion.py"), str(REFERENCE / "batch_pred_emotion.py"))
    finally:
        if saved is None:
            sys.modules.pop("const", None)
        else:
            sys.modules["const"] = saved


def process_exp_results() -> types.ModuleType:
    """`analysis/process_exp_results.py`: `extract_numbers`, `save_updated_processed_results`."""
    name = "analysis/process_exp_results.py"
    return _module("process_exp_results", source(name), str(REFERENCE / name))


def notebook_cells() -> list[str]:
    """The analysis notebook's code cells, in order (`analysis/analysis_after_processing.ipynb`)."""
    cells = json.loads(source("analysis/analysis_after_processing.ipynb"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


@contextlib.contextmanager
def working_directory(path: Path) -> Iterator[Path]:
    """The authors' code reads and writes paths relative to the working directory (`data/...`,
    `prompts/...`, `processed_results/...`): run it inside `path`, then come back."""
    before = Path.cwd()
    os.chdir(path)
    try:
        yield path
    finally:
        os.chdir(before)


def authors_prompts(workdir: Path, group_option: str, prompt_variation: str) -> Any:
    """The authors' prompt table for one group and variation, made as they made it: `read_all_data`
    on the release's TSVs, `prepare_prompts` writing `prompts/<group>_<variation>.tsv`, read back with
    `pandas.read_csv(sep='\\t')` as their `main` reads it before generation."""
    import pandas as pd

    code = batch_pred_emotion()
    data_link = workdir / "data"
    if not data_link.exists():
        data_link.symlink_to(RELEASE_DATA, target_is_directory=True)
    with working_directory(workdir):
        data = code.read_all_data(prompt_variation)
        code.prepare_prompts(data, prompt_variation, group_option)
        return pd.read_csv(f"prompts/{group_option}_{prompt_variation}.tsv", sep="\t")
