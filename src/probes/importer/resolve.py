"""How an import's config is resolved: as `probes run` resolves it, its protocol checked against the format's."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING

from promptgen.core.errors import ProbeError
from runners.run.request import ResolvedRun, RunRequest
from runners.run.runner import resolve_protocol

from .common import ImportFormat

if TYPE_CHECKING:
    from . import ImportRequest


def resolve_import(fmt: ImportFormat, request: ImportRequest, config: str, out: Path) -> ResolvedRun:
    """One config of an import resolved as `probes run` resolves it (`resolve_protocol`: the prompt build, the
    results folder's checks, the config's declared protocol), and that protocol checked against the format's.

    The key's scoring is the config's protocol, as a run's is: the files must have been scored the way the config
    says its paper scored it (the format's `scoring()`), else the rows would be keyed as a protocol they did not
    follow. A mismatch is one line naming the config and the first setting that differs.
    """
    request_run = RunRequest(
        request.prompts, config, request.model_name, out, revision=request.revision, model_name=request.model_name
    )
    run = resolve_protocol(request_run, limit_flag=None)
    if run.prompts.protocol is None:
        raise ProbeError(
            f"--prompts {request.prompts}: config {config!r} declares no scoring protocol, and an import is keyed by "
            f"it: import into a dataset built by probes build (its build_manifest.json declares each protocol)"
        )
    settings, chat = fmt.scoring()
    pairs = [
        ("chat", run.chat, chat),
        *((f.name, getattr(run.settings, f.name), getattr(settings, f.name)) for f in fields(settings)),
    ]
    differ = [(n, d, s) for n, d, s in pairs if d != s]
    if differ:
        name, declared, scored = differ[0]
        raise ProbeError(
            f"--prompts {request.prompts}: config {config!r} declares {name}={declared!r} in its protocol, but "
            f"--format {fmt.name}'s answers were scored with {name}={scored!r}: import them into a build whose "
            "protocol is the one they followed"
        )
    return run
