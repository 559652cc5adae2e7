"""Flags that several commands take together, declared once and handed to each command as one object.

`probes run`, `probes rewrite` and `probes plan` load or price a model with the same dozen
flags, `build`, `lint`, `curate-pairs`, `rewrite` and `demo` read sources with the same three:
re-typing them per command is how their names, defaults and help texts drift apart. An
`OptionGroup` lists its flags once (as `typer` parameters) with the function that turns their
values into the library's own object (`LoadOptions`, `SourceOptions`, the scoring flags given);
`@takes(GROUP, ...)` adds the flags to a command's signature, so `--help` lists them, and calls
the command with the object in the parameter the group names. Click's option groups and
transformers' `HfArgumentParser` dataclasses serve the same purpose.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class OptionGroup:
    """Flags (`name -> (Annotated type, default)`) that make one object (`make(**values)`) for parameter `param`."""

    param: str
    make: Callable[..., Any]
    flags: dict[str, tuple[Any, Any]]

    def parameters(self) -> list[inspect.Parameter]:
        return [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
            for name, (annotation, default) in self.flags.items()
        ]


def takes(*groups: OptionGroup) -> Callable[[F], F]:
    """Give a typer command every flag of `groups`; it receives each group's object in the group's `param`."""

    def decorate(command: F) -> F:
        signature = inspect.signature(command, eval_str=True)
        grouped = {group.param for group in groups}
        missing = grouped - set(signature.parameters)
        if missing:
            raise TypeError(f"{command.__name__} has no parameter {', '.join(sorted(missing))} for its option groups")
        own = [p for p in signature.parameters.values() if p.name not in grouped]
        added = [p for group in groups for p in group.parameters()]
        clash = {p.name for p in own} & {p.name for p in added}
        if clash:
            raise TypeError(f"{command.__name__} declares {', '.join(sorted(clash))} itself and through a group")
        keyword_only = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]

        @functools.wraps(command)
        def wrapper(**values: Any) -> Any:
            for group in groups:
                values[group.param] = group.make(**{name: values.pop(name) for name in group.flags})
            return command(**values)

        wrapper.__signature__ = signature.replace(parameters=[*keyword_only, *added])  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in [*keyword_only, *added]}
        return wrapper  # type: ignore[return-value]

    return decorate
