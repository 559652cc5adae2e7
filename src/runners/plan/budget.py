"""`probes plan --budget-hours H`: a run's hours from a plan's totals, and the largest sample size that fits H.

The price of a sample grows with its size (a larger sample holds a smaller one: DESIGN 9), so the
size is found by bisection, each size priced by the same counting `probes plan --sample N` does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from promptgen.core.errors import ProbeError
from runners.plan.configs import ConfigRows
from runners.plan.count import GENERATE
from runners.plan.totals import plan_totals

if TYPE_CHECKING:
    from runners.plan.make import PlanRequest


def run_hours(totals: Mapping[str, Any], backend: str, modes: tuple[str, ...], *, measured: bool = False) -> float:
    """A run's hours on `backend` from a plan's totals: its generated configs' and its scored ones' in the dearest
    number mode priced (a run reads numbers in one mode; which one is the run's flag, so the budget holds for any
    it can run). A mode the tokenizer cannot run (its `unavailable`) is left out; none left is infinite.
    `measured`: at `--tokens-per-s`."""
    key = "hours_at_tokens_per_s" if measured else "hours"
    cells = totals.get(backend, {})
    if "unavailable" in cells.get(GENERATE, {}):
        return math.inf
    number = [m for m in modes if m in cells]
    scored = [cells[m][key] for m in number if "unavailable" not in cells[m]]
    if number and not scored:
        return math.inf
    return (cells[GENERATE][key] if GENERATE in cells else 0.0) + (max(scored) if scored else 0.0)


def fit_budget(
    req: PlanRequest,
    rows: Mapping[str, ConfigRows],
    price_at: Callable[[int | None], dict[str, Any]],
    configs: list[str],
    modes: tuple[str, ...],
) -> tuple[int, dict[str, Any], list[tuple[int, float]]]:
    """The largest sample size whose hours on `req.backend` fit `req.budget_hours`, its per-config plan, and the
    sizes the bisection priced (size, hours). The price grows with the size, so bisection between 1 unit and
    the largest config's population (all of every config) finds it in log2 steps; a budget below one unit's
    price is one line."""
    budget, backend = float(req.budget_hours or 0), req.backend
    indexes = [rows[c].unit_index(req.sample_seed) for c in configs]
    # the largest size that still adds a unit (a config without units is taken whole at any size)
    everything = max((index.population for index in indexes if index.unit is not None), default=1)
    measured = bool(req.tokens_per_s)
    memo: dict[int, tuple[float, dict[str, Any]]] = {}

    def cost(size: int) -> float:
        if size not in memo:
            per_config = price_at(size)
            totals = plan_totals(per_config, configs, (*modes, GENERATE), tokens_per_s=measured)
            memo[size] = (run_hours(totals, backend, modes, measured=measured), per_config)
        return memo[size][0]

    if cost(everything) <= budget:
        best = everything
    else:
        if cost(1) > budget:
            raise ProbeError(
                f"--budget-hours {budget:g}: one unit of each config is priced at {cost(1):.3g} h on {backend} "
                f"({req.gpu} at MFU {req.mfu:g}); nothing smaller can be sampled"
            )
        lo, hi = 1, everything  # cost(lo) fits, cost(hi) does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if cost(mid) <= budget else (lo, mid)
        best = lo
    cost(best)
    return best, memo[best][1], [(n, memo[n][0]) for n in memo]
