"""The one primitive every backend implements (docs/DESIGN.md section 6).

A backend gets token ids and returns log-probabilities, one result per request, in request order; a
generating backend also turns token ids into text. The requests and results themselves are
`runners.exchange`'s (below scoring, which makes the one and reads the other); this is what the drivers use
of a backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from runners.exchange import GenerateRequest, Generation, ScoreRequest, ScoreResult


@dataclass(frozen=True, kw_only=True)
class Hardware:
    """Where and how a backend runs (`Backend.hardware()`): what a sweep's price reads, and the manifest's record.

    A backend says it with its own subclass, whose fields are what the manifest records of it and whose
    `manifest()` is that record, key for key in the order written (`runners.run.session.Session.finish`).
    The fields here are what pricing reads of any backend (`runners.plan.loaded`), so it probes none for an
    attribute and imports no torch. A bare `Hardware()` records nothing (a test double's).
    """

    #: the GPU's name as torch reports it, when the model runs on one; None: not on a GPU
    gpu: str | None = None
    #: the in-process model a sweep times on the CPU (`runners.plan.quote.cpu_tokens_per_s`: the hf backend's
    #: transformers model); None: nothing here to time (an engine, a server). Never recorded
    timed_model: Any = field(default=None, compare=False, repr=False)

    def manifest(self) -> dict[str, Any]:
        """The manifest's record of it (JSON values, in the order written)."""
        return {}


@runtime_checkable
class Backend(Protocol):
    """What the drivers (`runners.run.local_driver`, `.ray_driver`, `runners.rows`) use of a backend, all of it.

    Every member is declared here, so no caller probes a backend for what it has: a backend
    with nothing to say for a member says None (or a bare `Hardware()` for `hardware`).
    """

    #: the backend's registered name (`runners.backends.BackendSpec.name`), recorded in results
    name: str
    #: model id or path, and the revision (commit) when known
    model_id: str
    model_revision: str | None
    #: the dtype the model actually runs in ("float32", "bfloat16"; what the numbers depend on),
    #: recorded in every row and in the result key; None: the backend does not say (the run
    #: then records the dtype it asked for)
    dtype: str | None
    #: where inputs go ("cpu", "cuda:0"), recorded in every row and the manifest; None: not known
    device: str | None
    #: the token budget of one forward pass (rows x padded length), after any out-of-memory
    #: halving; None: the backend batches by itself (vLLM's scheduler)
    max_batch_tokens: int | None

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """One result per request, in request order."""
        ...

    def hardware(self) -> Hardware:
        """Where and how the run ran (versions, dtype, device, GPU, memory settings): the manifest's record
        (`Hardware.manifest()`) and what a sweep's price reads (`Hardware.gpu`, `.timed_model`)."""
        ...

    def close(self) -> None:
        """Release what the backend holds beyond its Python objects (engine processes); unusable afterwards."""
        ...


@runtime_checkable
class GeneratingBackend(Backend, Protocol):
    """A backend that can also generate (generation mode); both project backends are."""

    def generate(self, requests: Sequence[GenerateRequest]) -> list[Generation]:
        """One generation per request, in request order."""
        ...
