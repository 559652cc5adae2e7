"""`probes run --budget-hours H`: the sample size a run takes, priced as `probes plan --budget-hours H` prices it.

A run within a budget is a `--sample N` run (DESIGN 9): the same seeded, nested units, the same
result key, resumed by a larger budget later. N is the plan's: the largest size whose hours on the
run's backend fit H, each size counted as the run would select it (`runners.plan.budget.fit_budget`).
So `probes plan ... --budget-hours H` shows beforehand exactly what `probes run ... --budget-hours H`
then scores.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptgen.core.errors import ProbeError
from runners.backends import backend_spec
from runners.plan.make import PlanRequest, make_plan


@dataclass(frozen=True)
class BudgetSample:
    """The sample a budget buys: `size` units per config, priced at `hours` on `backend` (`gpu` at `mfu`)."""

    size: int
    hours: float
    budget_hours: float
    backend: str
    gpu: str
    mfu: float

    def line(self) -> str:
        """What the run prints before it loads the model."""
        return (
            f"--budget-hours {self.budget_hours:g}: --sample {self.size:,} ({self.hours:.3g} h on {self.backend}, "
            f"{self.gpu} at MFU {self.mfu:g}, as `probes plan --budget-hours` prices it)"
        )


def budget_sample(
    dataset: str | Path,
    configs: Sequence[str],
    model: str,
    budget_hours: float,
    *,
    gpu: str,
    mfu: float,
    backend: str,
    chat: bool | None = None,
    settings: Mapping[str, Any] | None = None,
    limit: int | None = None,
    sample_seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> BudgetSample:
    """The largest `--sample N` of `configs` whose price on `backend` fits `budget_hours` (one `ProbeError` line
    when the dataset is not a local folder, the backend is not priced in hours, or one unit costs more)."""
    if not Path(dataset).is_dir():
        raise ProbeError(
            f"--budget-hours prices a local prompt dataset folder; {dataset} is not one "
            "(download it, or price it with `probes plan` and give --sample N)"
        )
    if backend_spec(backend).served:
        raise ProbeError(
            f"--budget-hours prices GPU hours; --backend {backend} is a server's time: give --sample N instead"
        )
    given = dict(settings or {})
    scoring = given.get("scoring")
    request = PlanRequest(
        dataset=Path(dataset),
        model=model,
        configs=tuple(configs),
        gpu=gpu,
        mfu=mfu,
        chat=chat,
        scoring=scoring if isinstance(scoring, str) else None,
        max_new_tokens=given.get("max_new_tokens"),
        limit=limit,
        sample_seed=sample_seed,
        budget_hours=budget_hours,
        backend=backend,
    )
    plan = make_plan(request, progress=progress)
    sample = plan["sample"]
    return BudgetSample(int(sample["size"]), float(sample["hours"]), float(budget_hours), backend, gpu, mfu)
