"""A third backend that exists only in the tests: a new module and one registration, nothing else touched.

Its log-probabilities are a fixed function of each token id, so a test can recompute every
number it returns from the requests it received (`FakeBackend.requests`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from runners.backends import BackendOptions, BackendSpec, load_flag, register
from runners.backends.protocol import Hardware
from runners.exchange import ContinuationScore, ScoreRequest, ScoreResult

NAME = "fake-third"


def token_logprob(token: int) -> float:
    """The fake model's log-probability of any token, wherever it comes."""
    return -((token % 13) + 1) / 7


@dataclass(frozen=True, kw_only=True)
class FakeHardware(Hardware):
    """What the fake records of its run: its name and its flag's note."""

    note: str | None

    def manifest(self) -> dict[str, Any]:
        return {"backend": NAME, "note": self.note}


class FakeBackend:
    """Implements `runners.backends.protocol.Backend`; keeps every request it scored."""

    name = NAME
    dtype = "float32"
    device = "cpu"
    max_batch_tokens = None
    #: every request scored by any instance, in order (the run loads its own instance)
    requests: ClassVar[list[ScoreRequest]] = []

    def __init__(self, model: str, note: str | None = None) -> None:
        self.model_id = model
        self.model_revision = None
        self.note = note

    def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        FakeBackend.requests.extend(requests)
        out = []
        for request in requests:
            candidates = np.array([token_logprob(c) for c in request.candidates], dtype=float)
            continuations = tuple(
                ContinuationScore(
                    np.array([token_logprob(t) for t in cont], dtype=float),
                    np.tile(candidates, (len(cont), 1)),
                )
                for cont in request.continuations
            )
            out.append(ScoreResult(continuations, candidates, len(request.context)))
        return out

    def hardware(self) -> FakeHardware:
        return FakeHardware(note=self.note)

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class FakeOptions(BackendOptions):
    """Its own load option, declared here alone: `probes run` gains `--fake-note` from it (`load_flag`)."""

    fake_note: str | None = load_flag("a note the backend records in the run's hardware (a test double's flag).")


def load(model: str, options: FakeOptions, resolved: Any) -> FakeBackend:
    """The registry's loader: its own options, and the settings resolved for the machine (unused by a fake)."""
    return FakeBackend(model, options.fake_note)


SPEC = register(BackendSpec(name=NAME, loader=f"{__name__}:load", summary="a test double", options=FakeOptions))
