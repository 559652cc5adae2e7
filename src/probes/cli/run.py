"""`probes run`: configs of a prompt dataset + a model -> a result folder (`probes.api.run_many`, one model load)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from promptgen.core.errors import ProbeError
from runners.backends import backend_spec

from . import options as opt
from .groups import takes
from .shared import _ENGINE_THREADS, _progress, _progress_hooks, _warn, err, out, parse_where


@takes(opt.LOAD, opt.SCORING, opt.RUN)
def run(
    dataset: Annotated[str, typer.Argument(help="Prompt dataset: a local Hub-ready folder or a Hub repo id.")],
    configs: Annotated[
        list[str],
        typer.Option(
            "--config",
            "-c",
            help="Config of the prompt dataset to score; repeat it, or give a glob ('race_*'), to score several "
            "with one model load.",
        ),
    ],
    model: opt.Model,
    results: Annotated[
        str,
        typer.Option(
            "--out",
            help="Result dataset folder (created; shared by shards and reruns; never a prompt dataset, "
            "an input or a folder of other files).",
            metavar="DIR",
        ),
    ],
    load: Any,
    scoring: Any,
    run_fields: Any,
    where: opt.Where = None,
    limit: opt.Limit = None,
    sample: opt.SampleSize = None,
    sample_seed: opt.SampleSeed = 0,
    budget_hours: Annotated[
        float | None,
        opt.budget_hours(
            "Instead of --sample: the largest sample whose hours on --backend fit H, priced as `probes plan "
            "--budget-hours H` prices it (on --gpu at --mfu; a local DATASET folder). Prints N, then scores it."
        ),
    ] = None,
    gpu: opt.BudgetGpu = "h100",
    mfu: Annotated[
        float, typer.Option("--mfu", help="--budget-hours: model FLOPs utilisation, above 0 and at most 1.")
    ] = 0.5,
    revision: opt.Revision = None,
    use_ray: Annotated[
        bool, typer.Option("--ray", help="Score on a Ray Data actor pool (RAY_ADDRESS, else a local Ray); same OUT.")
    ] = False,
    ray_workers: Annotated[
        int,
        typer.Option(
            "--ray-workers",
            min=1,
            help="--ray: model replicas (on GPUs: one GPU each for hf, --tensor-parallel-size GPUs for vllm).",
        ),
    ] = 1,
    quiet: opt.QuietRun = False,
) -> None:
    """Score one config of a prompt dataset with a model into a Hub-ready result folder.

    Without scoring flags it scores the way the dataset's paper did: the protocol its build
    manifest declares for the config (the dataset card describes each); each flag given replaces
    that part, and the summary says whether the paper's protocol ran.

    Resumable: rerunning the same command skips the items already scored with the same model
    revision and scoring settings. `--shard i/n` workers can fill one OUT folder together. The
    config is checked (item contract, build manifest) before a model loads.
    """
    from probes import api

    if budget_hours is not None:
        if sample is not None:
            raise ProbeError("give --sample N or --budget-hours H (which picks N), not both")
        if where:
            raise ProbeError("--budget-hours prices whole configs' samples, not a --where selection: give --sample N")
        api.check_budget_dataset(dataset)
        priced = api.budget_sample(
            dataset,
            api.expand_configs(dataset, configs, revision=revision),
            model,
            budget_hours,
            api.BudgetTerms(
                gpu,
                mfu,
                load.backend,
                run_fields.get("chat"),
                scoring,
                limit=limit,
                sample_seed=sample_seed,
                model_revision=load.revision,
            ),
        )
        err.print(priced.line(), highlight=False)
        sample = priced.size
    _ENGINE_THREADS["started"] |= backend_spec(load.backend).starts_engine
    progress = _progress(quiet)
    with progress:
        summaries = api.run_many(
            dataset,
            configs,
            model,
            results,
            revision=revision,
            settings=scoring,
            load=load,
            where=parse_where(where),
            limit=limit,
            sample=sample,
            sample_seed=sample_seed,
            ray=use_ray,
            ray_workers=ray_workers,
            on_config=lambda request: _progress_hooks(progress, request.config),
            on_warning=_warn,
            **run_fields,
        )
    for summary in summaries:
        err.print(summary.line(), highlight=False)
    for key_dir in dict.fromkeys(str(summary.key_dir) for summary in summaries):
        out.print(f"results: {key_dir}", highlight=False)
