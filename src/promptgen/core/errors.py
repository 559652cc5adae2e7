"""Errors a user can act on.

Every error raised for bad input names the file, and where it applies the row or JSON
path and the field, so the message alone says what to fix. The CLI prints these without a
traceback; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class ProbeError(Exception):
    """Base class of the errors caused by input (recipes, sources, flags)."""


class RecipeError(ProbeError):
    """A recipe in builders/ is malformed: unknown key, wrong type, missing field."""


class SourceError(ProbeError):
    """A source file is missing, cannot be downloaded, or has the wrong sha256."""


class SourceFormatError(ProbeError):
    """A source file was read but its content breaks the expected format."""

    def __init__(self, file: str, where: str, problem: str) -> None:
        self.file = file
        self.where = where
        self.problem = problem
        super().__init__(f"{file}: {where}: {problem}")


class OutputError(ProbeError):
    """The output location cannot be written as asked (exists, not a folder, ...)."""
