"""The empathy authors' analysis notebook, run as the oracle of `analysis.empathy.paper`.

`simulate` makes one matrix's intensities (refusals in a few cells); `write_processed_results`
writes them as the authors' `processed_results/<group>_<variation>_<model>_<persona>_<experiencer>.tsv`
files (6,050 rows each, `intensity` -1 where refused), which the notebook's unchanged functions
then read (`notebook`, executed from the pinned copy by `empathy_reference.notebook_cells`).

The notebook imports seaborn (not a dependency of this project) and plots with it in
`draw_heatmap`; `notebook` puts a stub `seaborn` in `sys.modules` while its first cell runs,
whose `heatmap` records what the notebook would draw (the z-scored matrix, vmin/vmax, the mask)
and returns a real matplotlib Axes, so `draw_heatmap` runs to its `plt.savefig`. `NumpyRecorder`
stands in for the notebook's `np` to record the unrounded values its functions print rounded
(μ, σ, min, max) and the rounded M0 it builds. Nothing of the notebook's code is changed.
"""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd

from empathy_reference import notebook_cells

#: the notebook's `assert len(intensity_list) == 6050`: every cell holds every event
EVENTS = 6050
#: our category and setting names -> the notebook's group_option and prompt_variation
GROUP_OPTION = {"race": "ethnicity", "nationality": "nationality", "religion": "religion"}
VARIATION = {
    "P0S0T0": "origin",
    "P1S0T0": "persona-1",
    "P2S0T0": "persona-2",
    "P3S0T0": "persona-3",
    "P0S1T0": "10-scale",
    "P0S0T1": "1-person",
    "P0S0T2": "3-person",
}
MODEL_ID = "sim"


def simulate(
    identities: pd.DataFrame,
    *,
    setting: str = "P0S0T0",
    refusals: dict[tuple[int, int], int],
    copies: dict[tuple[int, int], tuple[int, int]] | None = None,
    seed: int = 0,
) -> pd.DataFrame:
    """One matrix's items as `analysis.empathy.tables.intensity_frame` returns them.

    Integer intensities 0..10 (as the authors' parsed numbers are): 5 + a perceiver effect, an
    experiencer effect, an in-group boost (same group column), an event effect shared by every
    cell (what makes the paired tests paired) and noise, rounded and clipped. The effects are
    small, so some cells differ from their diagonal references beyond `get_mask_cells`' threshold
    and some do not. `refusals[(i, j)] = k`: k events of cell (i, j), drawn among the first 300
    (so cells overlap), are refused (intensity NaN, refused True). `copies[(i, j)] = (k, l)`: cell
    (i, j) repeats cell (k, l) event by event (identical lists: `ttest_rel` gives p NaN).
    """
    rng = np.random.default_rng(seed)
    n = len(identities)
    group = identities["group"].to_numpy()
    names = identities["identity"].to_numpy()
    same = (group[:, None] == group[None, :]).astype(float)
    mu = 5.0 + rng.normal(0, 0.08, n)[:, None] + rng.normal(0, 0.08, n)[None, :] + 0.12 * same
    event = rng.normal(0, 1.0, EVENTS)
    noise = rng.normal(0, 1.5, (n, n, EVENTS))
    value = np.clip(np.rint(mu[:, :, None] + event[None, None, :] + noise), 0, 10)
    for (i, j), (k, ref) in (copies or {}).items():
        value[i, j] = value[k, ref]
    refused = np.zeros(value.shape, bool)
    for (i, j), k in refusals.items():
        refused[i, j, rng.choice(300, size=k, replace=False)] = True
    return pd.DataFrame(
        {
            "model": MODEL_ID,
            "category": identities["category"].iat[0],
            "setting": setting,
            "perceiver": pd.Categorical.from_codes(np.repeat(np.arange(n), n * EVENTS), categories=names),
            "experiencer": pd.Categorical.from_codes(np.tile(np.repeat(np.arange(n), EVENTS), n), categories=names),
            "text_id": np.tile(np.arange(EVENTS), n * n),
            "intensity": np.where(refused, np.nan, value).ravel(),
            "refused": refused.ravel(),
        }
    )


def write_processed_results(workdir: Path, frame: pd.DataFrame) -> None:
    """`frame` (one matrix, every cell x every event) as the authors' processed files: one TSV per
    (persona, experiencer), rows in event order, `intensity` an integer and -1 where refused."""
    folder = workdir / "processed_results"
    folder.mkdir(parents=True, exist_ok=True)
    category, setting = frame["category"].iat[0], frame["setting"].iat[0]
    prefix = f"{GROUP_OPTION[category]}_{VARIATION[setting]}_{MODEL_ID}"
    for (persona, experiencer), g in frame.groupby(["perceiver", "experiencer"], observed=True, sort=False):
        g = g.sort_values("text_id")
        assert len(g) == EVENTS and (g["text_id"].to_numpy() == np.arange(EVENTS)).all()
        intensity = np.where(g["refused"], -1, g["intensity"].fillna(-1)).astype(int)
        text = "intensity\n" + "\n".join(map(str, intensity)) + "\n"
        (folder / f"{prefix}_{persona}_{experiencer}.tsv").write_text(text, encoding="utf-8")


class SeabornStub(types.ModuleType):
    """`import seaborn as sns` for the notebook: `heatmap` records its arguments, returns an Axes."""

    def __init__(self) -> None:
        super().__init__("seaborn")
        self.drawn: list[dict[str, Any]] = []

    def set_style(self, *args: Any, **kwargs: Any) -> None:
        return None

    def heatmap(self, data: Any, **kwargs: Any) -> Any:
        import matplotlib.pyplot as plt

        self.drawn.append({"data": np.array(data, copy=True), **kwargs})
        return plt.gca()


class NumpyRecorder:
    """numpy, for the notebook's `np` global, recording what `zeros`, `mean`, `std`, `amin` and
    `amax` return: the notebook prints μ, σ, min, max rounded; these are its unrounded values,
    and the array `zeros` made is the matrix it filled with the rounded cell means (M0) before
    it rebinds the name to the z-scored M."""

    RECORDED = ("zeros", "mean", "std", "amin", "amax")

    def __init__(self) -> None:
        self.calls: dict[str, list[Any]] = {name: [] for name in self.RECORDED}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(np, name)
        if name not in self.RECORDED:
            return attr

        def recorded(*args: Any, **kwargs: Any) -> Any:
            out = attr(*args, **kwargs)
            self.calls[name].append(out)
            return out

        return recorded


class Replay:
    """`random` for the notebook's `permute_matrix`: each `shuffle` takes the next given order,
    rows then columns per call, so `get_interval` permutes exactly as a given draw does."""

    def __init__(self, rows: np.ndarray, cols: np.ndarray) -> None:
        self._orders = iter(order for pair in zip(rows, cols, strict=True) for order in pair)

    def shuffle(self, x: list[int]) -> None:
        x[:] = [int(v) for v in next(self._orders)]


def definition_cells() -> list[str]:
    """The notebook's cells that define (imports, constants, functions); the others run the
    analysis over the authors' own files and are left out."""
    keep = []
    for cell in notebook_cells():
        lines = cell.splitlines()
        if any(line.startswith(("def ", "import ", "from ")) for line in lines):
            keep.append(cell)
    return keep


def notebook() -> dict[str, Any]:
    """The notebook's definitions in one namespace, with `seaborn` stubbed (`ns["sns"].drawn`)."""
    namespace: dict[str, Any] = {"__name__": "analysis_after_processing"}
    saved = sys.modules.get("seaborn")
    sys.modules["seaborn"] = SeabornStub()
    try:
        for cell in definition_cells():
            exec(compile(cell, "analysis_after_processing.ipynb", "exec"), namespace)  # the pinned reference, unchanged
    finally:
        if saved is None:
            sys.modules.pop("seaborn", None)
        else:
            sys.modules["seaborn"] = saved
    return namespace


@contextlib.contextmanager
def recording(namespace: dict[str, Any]) -> Iterator[NumpyRecorder]:
    """Within the block the notebook's `np` is a `NumpyRecorder`."""
    before = namespace["np"]
    recorder = NumpyRecorder()
    namespace["np"] = recorder
    try:
        yield recorder
    finally:
        namespace["np"] = before
