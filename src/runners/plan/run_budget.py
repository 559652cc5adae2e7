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


@dataclass(frozen=True)
class BudgetTerms:
    """What a budget is priced under, as the run scores: the GPU and its MFU, the run's backend, its chat form,
    its scoring flags (`--scoring`, `--max-new-tokens`), `--limit`, the sample's seed and the model's revision
    (`--model-revision`: a Hub model's config and tokenizer at that revision)."""

    gpu: str = "h100"
    mfu: float = 0.5
    backend: str = "vllm"
    chat: bool | None = None
    settings: Mapping[str, Any] | None = None
    limit: int | None = None
    sample_seed: int = 0
    model_revision: str | None = None

    def plan_request(self, dataset: str | Path, configs: Sequence[str], model: str, **sample: Any) -> PlanRequest:
        """The plan of `configs` under these terms; `sample`: its sample fields (`budget_hours`)."""
        given = dict(self.settings or {})
        scoring = given.get("scoring")
        return PlanRequest(
            dataset=Path(dataset),
            model=model,
            configs=tuple(configs),
            model_revision=self.model_revision,
            gpu=self.gpu,
            mfu=self.mfu,
            chat=self.chat,
            scoring=scoring if isinstance(scoring, str) else None,
            max_new_tokens=given.get("max_new_tokens"),
            limit=self.limit,
            sample_seed=self.sample_seed,
            backend=self.backend,
            **sample,
        )

    def check(self) -> None:
        """A served backend's time is its server's: not priced in GPU hours."""
        if backend_spec(self.backend).served:
            raise ProbeError(
                f"--budget-hours prices GPU hours; --backend {self.backend} is a server's time: give --sample N instead"
            )


def check_local(dataset: str | Path) -> None:
    """The plan prices a local folder: a Hub id is one line (before its configs are looked up on the Hub)."""
    if not Path(dataset).is_dir():
        raise ProbeError(
            f"--budget-hours prices a local prompt dataset folder; {dataset} is not one "
            "(download it, or price it with `probes plan` and give --sample N)"
        )


def budget_sample(
    dataset: str | Path,
    configs: Sequence[str],
    model: str,
    budget_hours: float,
    terms: BudgetTerms,
    *,
    progress: Callable[[str], None] | None = None,
) -> BudgetSample:
    """The largest `--sample N` of `configs` whose price under `terms` fits `budget_hours` (one `ProbeError` line
    when the dataset is not a local folder, the backend is not priced in hours, or one unit costs more)."""
    check_local(dataset)
    terms.check()
    plan = make_plan(terms.plan_request(dataset, configs, model, budget_hours=budget_hours), progress=progress)
    sample = plan["sample"]
    hours = float(sample["hours"])
    return BudgetSample(int(sample["size"]), hours, float(budget_hours), terms.backend, terms.gpu, terms.mfu)


def split_budget(full: Mapping[str, float], hours: float) -> dict[str, float | None]:
    """Each dataset's share of a sweep's `hours`, by water-filling: None where the whole dataset fits its share.

    The datasets are taken cheapest first; one whose full price fits an equal share of what is left is
    taken whole, and what it leaves goes to the others; the rest get equal shares. So a small probe (the
    Trust Game) is never cut for a large one, and no share is smaller than an equal split's.
    """
    shares: dict[str, float | None] = {}
    left = float(hours)
    order = sorted(full, key=lambda name: full[name])
    for k, name in enumerate(order):
        share = left / (len(order) - k)
        if full[name] <= share:
            shares[name] = None
            left -= full[name]
        else:
            shares.update({rest: share for rest in order[k:]})
            break
    return shares


def sweep_samples(
    datasets: Mapping[str, tuple[Path, Sequence[str]]], model: str, budget_hours: float, terms: BudgetTerms
) -> dict[str, BudgetSample | None]:
    """`probes sweep --budget-hours H`: per dataset (its folder and configs), the sample it takes (None: whole).

    Each dataset is priced whole first (`make_plan`, as `probes plan`); `split_budget` shares H among them;
    a dataset cut to its share gets the largest sample whose price fits it (`budget_sample`).
    """
    terms.check()
    from runners.plan.budget import run_hours

    full: dict[str, float] = {}
    for name, (folder, configs) in datasets.items():
        request = terms.plan_request(folder, configs, model)
        full[name] = run_hours(make_plan(request)["totals"], terms.backend, request.priced_modes)
    fitted: dict[str, BudgetSample | None] = {}
    for name, share in split_budget(full, budget_hours).items():
        folder, configs = datasets[name]
        fitted[name] = None if share is None else budget_sample(folder, configs, model, share, terms)
    return fitted
