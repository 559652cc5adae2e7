"""Strict validation of the mappings read from recipes (top level, sources, parameters).

One checker for every recipe block, so an unknown key, a missing key or a wrong type is
reported the same way everywhere: `<file>: <path.to.key> ...`. Unknown keys are errors
because a misspelt parameter must never fall back silently to a default.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .errors import RecipeError


def take(
    where: str,
    data: Any,
    required: dict[str, Any],
    optional: dict[str, Any] | None = None,
    *,
    positive_ints: bool = False,
) -> dict[str, Any]:
    """`data` as a dict after checking its keys and value types.

    `int` excludes `bool`; `float` accepts an int (YAML reads `1` as one); with
    `positive_ints`, every int value must be at least 1 (sizes and counts).
    """
    optional = optional or {}
    if not isinstance(data, dict):
        raise RecipeError(f"{where} must be a mapping, got {type(data).__name__}")
    allowed = {**required, **optional}
    unknown = set(data) - set(allowed)
    if unknown:
        raise RecipeError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
    missing = set(required) - set(data)
    if missing:
        raise RecipeError(f"{where}: missing key(s) {sorted(missing)}")
    for key, value in data.items():
        expected = allowed[key]
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            continue
        if expected is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise RecipeError(f"{where}.{key} must be an integer, got {value!r}")
        if expected is int and positive_ints and value < 1:
            raise RecipeError(f"{where}.{key} must be a positive integer, got {value!r}")
        if not isinstance(value, expected):
            names = " or ".join(t.__name__ for t in expected) if isinstance(expected, tuple) else expected.__name__
            raise RecipeError(f"{where}.{key} must be a {names}, got {type(value).__name__} ({value!r})")
    return data


def choose(where: str, values: Iterable[str], allowed: Iterable[str]) -> tuple[str, ...]:
    """A non-empty selection from `allowed` without repeats, in the order given."""
    values, allowed = tuple(values), tuple(allowed)
    bad = [v for v in values if v not in allowed]
    if bad or not values:
        raise RecipeError(f"{where}: {list(values)} must be a non-empty subset of {list(allowed)}")
    repeated = [v for i, v in enumerate(values) if v in values[:i]]
    if repeated:
        raise RecipeError(f"{where}: {list(values)} must hold distinct values; {repeated[0]!r} appears twice")
    return values


def positive(where: str, value: int) -> int:
    """A count or size that must be at least 1."""
    if value < 1:
        raise RecipeError(f"{where} must be a positive integer, got {value!r}")
    return value
