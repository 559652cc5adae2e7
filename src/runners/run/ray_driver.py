"""The Ray driver (docs/DESIGN.md section 7): the same scoring and the same result folder, on many model replicas.

`run_config_ray` is `local_driver.run_config` with the scoring moved onto a Ray actor pool; everything
that decides what a run writes is the local driver's:

1. Items are selected as in `probes run` (shard by a hash of the id, then `limit`, then the ids
   already present under the same `ResultKey` are skipped), and the key is `session.result_key` of
   (model, model revision, scoring settings, chat): it never depends on the number of workers,
   so Ray runs, `probes run` runs and `--shard` runs fill and resume the same key folder.
2. The not-yet-done items become a `ray.data.Dataset` with one block per batch of `batch_size`
   items, in row order: an actor scores exactly the batches `local_driver.run_config` would score, so
   (on the same hardware) the rows are the local driver's bit for bit, whatever the number of workers.
3. `map_batches` runs `_Replica`, a callable class: each actor loads the model once
   (`load.load_backend`; a GPU actor asks for one GPU with hf, the tensor-parallel size with vLLM
   (`_worker_resources`), a CPU actor for one CPU) and turns
   batches of items into result rows with `run_items`, in `RESULT_SCHEMA` (declared, so blocks
   whose optional columns are all null still have one schema).
4. The DRIVER is the only writer: it streams the actors' rows back with `iter_batches` and
   writes them with `results.write_part` every `flush_every` rows, under the run's shard label.
   Writing from the actors would need one part-name sequence per actor (`write_part` numbers
   parts per shard label by listing the folder, so two writers with one label could pick the
   same name and one part would silently replace the other), and a retried Ray task could
   write its rows twice; one writer keeps the local driver's atomic parts and resume semantics as they
   are, and its cost (rows are small next to a forward pass) is negligible. A killed run loses
   at most the rows since its last flush; rerunning resumes.
5. The manifest entry and card are the local driver's, plus a `ray` entry (workers, Ray version) and
   the hardware of every replica.

The driver loads no model: it validates the model source, loads the tokenizer (to decide
`chat`) and works out the key's model revision with the local driver's rule; every actor checks that
the model it loaded has that revision, so a worker that sees other weights fails instead of
writing rows under a wrong key. A local model folder must be at the same path on every node.

Ray is imported inside functions: `import runners.run.ray_driver` works without the `ray` extra.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable, Mapping
from dataclasses import replace

import pyarrow as pa

from promptgen.core.errors import ProbeError
from promptgen.core.plugins import load_extensions
from runners import results as res
from runners.backends import DEFAULT_BACKEND, backend_spec, load, require_for_scoring
from runners.backends.load import LoadOptions
from runners.model.device import AUTO, ITEMS_PER_CALL, device_type
from runners.prompts import PromptConfig
from runners.results.summary import RunSummary
from runners.rows import run_items
from runners.run.request import RunRequest
from runners.run.session import Session
from runners.run.sizing import needs_of
from runners.scoring.settings import ScoringSettings

#: what an actor returns per item: the result row, which replica scored it, an input error, and
#: the token positions its backend computed for it (summed by the session, not stored)
ROW_SCHEMA = (
    res.RESULT_SCHEMA.append(pa.field("worker", pa.string()))
    .append(pa.field("error", pa.string()))
    .append(pa.field("computed_tokens", pa.int64()))
)


class _Replica:
    """One model replica: loaded once per Ray actor, then called on batches of items.

    Input errors (a model that cannot be loaded, an item the scorer rejects) come back as an
    `error` column instead of an exception, because Ray re-raises actor exceptions as its own
    wrapper types with the traceback as text; the driver turns the message into one ProbeError.
    """

    def __init__(
        self,
        model: str,
        key: res.ResultKey,
        settings: ScoringSettings,
        chat: bool,
        batch_size: int,
        load_options: LoadOptions,
        needed_tokens: int | None = None,
        cpu_threads: int | None = None,
    ) -> None:
        self.key, self.settings, self.chat, self.batch_size = key, settings, chat, batch_size
        self.error: str | None = None
        self.worker = json.dumps({"node": platform.node(), "pid": os.getpid()})
        if cpu_threads:  # the CPUs Ray granted, exactly: a float32 matmul's last bits depend on the thread count
            import torch

            torch.set_num_threads(cpu_threads)
        try:
            load_extensions()  # a new process: a plugin's backend is registered here as in the driver's
            loaded = load.load_backend(model, load_options, needed_tokens=needed_tokens)
            self.backend, self.tokenizer, revision = loaded.backend, loaded.tokenizer, loaded.revision
        except ProbeError as exc:
            self.error = str(exc)
            return
        if revision != key.model_revision:
            self.error = (
                f"the worker on {platform.node()} loaded {model} at revision {revision}, the driver keyed the run "
                f"by {key.model_revision}: is the model the same on every node?"
            )
        keyed = json.loads(key.scoring).get("dtype")
        if self.error is None and keyed is not None and self.backend.dtype not in (None, keyed):
            self.error = (
                f"the worker on {platform.node()} loaded {model} in {self.backend.dtype}, the driver keyed the run "
                f"by {keyed}: pass an explicit --dtype this engine supports"
            )
        self.worker = json.dumps({**self.backend.hardware().manifest(), "node": platform.node()}, sort_keys=True)

    def __call__(self, batch: pa.Table) -> pa.Table:
        items, error = batch.to_pylist(), self.error
        if error is None:
            try:
                rows = run_items(
                    items, self.backend, self.tokenizer, self.chat, settings=self.settings, batch_items=self.batch_size
                )
            except ValueError as exc:  # an item the scorer rejects (as local_driver.run_config reports it)
                error = str(exc)
        if error is not None:
            rows = [{"id": item["id"], "error": error} for item in items]
        for row in rows:
            row.update(model_revision=self.key.model_revision, scoring=self.key.scoring, chat=self.chat)
            row["worker"] = self.worker
        return pa.Table.from_pylist([{name: row.get(name) for name in ROW_SCHEMA.names} for row in rows], ROW_SCHEMA)


def _uses_gpu(device: str, backend: str, cluster: Mapping[str, float]) -> bool:
    """Whether a replica runs on a GPU: `--device cuda`, or `auto` in a cluster with GPUs.

    A backend that does not follow `--device` (vLLM: a GPU install runs on the GPU) runs on the
    cluster's GPUs unless `--device cpu` is given explicitly.
    """
    if device_type(device) == "cuda":
        return True
    has_gpus = cluster.get("GPU", 0.0) > 0
    return has_gpus and (device == AUTO if backend_spec(backend).follows_device else device != "cpu")


def _worker_resources(
    device: str, num_workers: int, *, backend: str = DEFAULT_BACKEND, gpus_per_replica: int = 1
) -> dict[str, float]:
    """Ray resources of one replica; fails early when the cluster cannot hold `num_workers` of them.

    A GPU replica asks for its GPUs, so Ray makes exactly those visible to it
    (CUDA_VISIBLE_DEVICES): `gpus_per_replica` of them, as the backend's options say (`BackendOptions.gpus_per_replica`:
    vLLM's tensor parallel size, the GPUs its engine shards a model over), one elsewhere. A CPU replica asks for
    one CPU.
    """
    import ray

    have = ray.cluster_resources()
    if _uses_gpu(device, backend, have):
        name, amount = "GPU", float(gpus_per_replica)
    else:
        name, amount = "CPU", 1.0
    if have.get(name, 0.0) < amount * num_workers:
        raise ProbeError(
            f"--ray-workers {num_workers} needs {amount * num_workers:g} {name}(s) in the Ray cluster "
            f"({amount:g} per replica), it has {have.get(name, 0.0):g}"
        )
    return {"num_gpus": amount} if name == "GPU" else {"num_cpus": amount}


def run_config_ray(
    prompts: PromptConfig,
    request: RunRequest,
    *,
    on_start: Callable[[int, int], None] | None = None,
    on_advance: Callable[[int], None] | None = None,
) -> RunSummary:
    """Score the not-yet-done items of one shard of `prompts` on `request.ray_workers` Ray replicas (module docstring).

    `request.load.revision` is the Hub revision to load (`--model-revision`); the key's revision
    is resolved as `probes run` does. The rest of `request.load` goes to `load.load_backend` on
    every actor (e.g. vLLM's `gpu_memory_utilization`). Connects to the Ray cluster
    (`RAY_ADDRESS`), or starts a local one, unless Ray is initialised already. Ray Data's own
    progress bars are off during the run: `on_start(total, done)` and `on_advance(n)` report progress.
    """
    load_options, model, settings = request.load, request.model, request.scoring
    backend, device, num_workers = load_options.backend, load_options.device, request.ray_workers
    batch_size = request.batch_size
    require_for_scoring(backend=backend, ray=True, what="run_config_ray")
    started = time.perf_counter()
    located = load.locate_model(model, load_options)
    tokenizer, ref, weights = located.tokenizer, located.ref, located.dtype
    session = Session.start(
        prompts,
        request,
        tokenizer,
        model_id=model,
        revision=ref.revision,
        dtype=weights,
        backend=backend,
        batch_size=batch_size,
        started=started,
    )
    chat = session.chat
    needed = None  # the actors' engines fit the items (`runners.run.sizing.needs_of`): vLLM's context length
    if backend_spec(backend).sizes_context:
        needed = needs_of(prompts, settings, chat, rows=request.selection)(tokenizer)
    key = session.key  # under the name the folder already records, when a default name gave way
    todo = session.todo
    if on_start is not None:
        on_start(len(session.selected), len(session.selected) - len(todo))
    workers: dict[str, None] = {}  # the replicas' hardware, in order of first appearance

    if len(todo):  # a list, or an array (`Session.todo`), whose truth is ambiguous
        import ray
        import ray.data

        if not ray.is_initialized():
            ray.init()
        gpus = load_options.own.gpus_per_replica()
        resources = _worker_resources(device, num_workers, backend=backend, gpus_per_replica=gpus)
        if batch_size is None:
            batch_size = ITEMS_PER_CALL["cuda" if "num_gpus" in resources else "cpu"]
        table = prompts.dataset.select(todo).with_format("arrow")[:]
        blocks = [table.slice(start, batch_size) for start in range(0, len(todo), batch_size)]
        expected, seen = set(session.hashes), set()  # the ids of the items to score
        context = ray.data.DataContext.get_current()
        # a dataset copies the context when it is created: Ray's bars go off before that
        progress_bars, context.enable_progress_bars = context.enable_progress_bars, False
        try:
            replicas = ray.data.from_arrow(blocks).map_batches(
                _Replica,
                batch_size=batch_size,
                batch_format="pyarrow",
                compute=ray.data.ActorPoolStrategy(size=num_workers),
                fn_constructor_kwargs={
                    "model": model,
                    "key": key,
                    "settings": settings,
                    "chat": chat,
                    "batch_size": batch_size,
                    "cpu_threads": int(resources["num_cpus"]) if "num_cpus" in resources else None,
                    # every replica loads the commit and dtype the run is keyed by
                    "load_options": replace(load_options, revision=ref.load_revision, dtype=weights),
                    "needed_tokens": needed,
                },
                **resources,  # type: ignore[arg-type]  # num_gpus or num_cpus, floats: ray types each keyword apart
            )
            for batch in replicas.iter_batches(batch_size=None, batch_format="pyarrow"):
                rows = batch.to_pylist()  # type: ignore[union-attr]  # ray's type is every format's; this is pyarrow's
                errors = sorted({row["error"] for row in rows if row["error"] is not None})
                if errors:
                    raise ProbeError(f"{prompts.path} config {prompts.config!r}: {'; '.join(errors)}")
                for row in rows:
                    if row["id"] not in expected or row["id"] in seen:
                        raise RuntimeError(f"Ray returned item {row['id']!r} twice or unasked")  # a bug, not input
                    seen.add(row["id"])
                    workers.setdefault(row.pop("worker"))
                session.add(rows)
                if on_advance is not None:
                    on_advance(len(rows))
        finally:
            context.enable_progress_bars = progress_bars
            session.flush()  # keep what was scored before a failure: the rerun resumes after it
        if seen != expected:
            raise RuntimeError(f"Ray returned {len(seen)} of {len(expected)} items")  # a bug, not input
    return session.finish(
        backend=backend,
        dtype=weights,
        hardware={"workers": [json.loads(w) for w in workers]},
        extra={
            "batch_size": batch_size or ITEMS_PER_CALL["cpu"],
            "ray": {"version": _ray_version(), "workers": num_workers},
        },
    )


def _ray_version() -> str | None:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("ray")
    except PackageNotFoundError:  # a rerun with nothing left to do needs no Ray
        return None
