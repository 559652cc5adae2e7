"""An options class whose fields are also command-line flags: declared once, in the room that owns them.

A backend's load options (`runners.backends.registry.load_flag`) and a probe's analysis options
(`analysis.probe_analysis.analysis_flag`) are frozen dataclasses of such fields. The command line
builds its flags from them (`probes.cli.options`), so a flag's name, type, default, bounds and help
are written once, beside the code that reads the value: transformers' `HfArgumentParser` does the
same with dataclass fields' metadata. Nothing here imports typer; the fields are plain dataclass
fields, so the classes stay usable from Python without a command line.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any


def option_flag(help: str, default: Any = None, *, flag: str | None = None, elsewhere: str = "", **limits: Any) -> Any:
    """A field of an options class that is also a flag.

    `help` is its `--help` text, `flag` its declaration when not `--<name>` (e.g. "--x/--no-x"),
    `elsewhere` what to use instead where it does not apply (added to the line refusing it there),
    `limits` click's bounds (`min`, `max`).
    """
    return field(default=default, metadata={"help": help, "flag": flag, "elsewhere": elsewhere, "limits": limits})


@dataclass(frozen=True)
class DeclaredFlag:
    """One field of an options class as a flag, types resolved; `owner` is who declares it (a backend, a probe)."""

    owner: str
    name: str
    #: the value's type without None (`int`, `float`, `str`, `bool`)
    kind: type
    #: the field's default, which applies when the flag is not given
    default: Any
    help: str
    #: its declaration when not `--<name>` (e.g. "--x/--no-x")
    flag: str | None
    elsewhere: str
    limits: Mapping[str, Any]

    @property
    def declaration(self) -> str:
        return self.flag or flag_name(self.name)


def declared_flags(owner: str, options: type | None) -> list[DeclaredFlag]:
    """The fields of `options` (an options class of `option_flag` fields; None: none) as flags, in field order."""
    if options is None:
        return []
    hints = typing.get_type_hints(options)
    flags = []
    for option in fields(options):
        kind = next((t for t in typing.get_args(hints[option.name]) if t is not type(None)), hints[option.name])
        meta = option.metadata
        default = None if option.default is MISSING else option.default
        flags.append(
            DeclaredFlag(
                owner, option.name, kind, default, meta.get("help", ""), meta.get("flag"),
                meta.get("elsewhere", ""), meta.get("limits", {}),
            )
        )  # fmt: skip
    return flags


def flags_by_name(flags: Iterable[DeclaredFlag]) -> dict[str, list[DeclaredFlag]]:
    """Flags grouped by name, in the order given (two owners may declare the same name): the command line
    makes one flag of each name (`probes.cli.options`)."""
    grouped: dict[str, list[DeclaredFlag]] = {}
    for flag in flags:
        grouped.setdefault(flag.name, []).append(flag)
    return grouped


def flag_name(option: str) -> str:
    """`max_batch_tokens` -> `--max-batch-tokens`."""
    return "--" + option.replace("_", "-")
