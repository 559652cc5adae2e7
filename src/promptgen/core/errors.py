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


def dataset_load_errors() -> tuple[type[BaseException], ...]:
    """What `datasets.load_dataset` raises for a dataset or config it cannot find or reach.

    OSError covers the Hub's: `ConnectionError` ("Couldn't reach ... (OfflineModeIsEnabled)")
    with HF_HUB_OFFLINE=1 or no network, HTTP errors, a missing file. Every loader catches
    these and names the dataset and config in one line.
    """
    import datasets

    return (ValueError, OSError, datasets.exceptions.DatasetNotFoundError)
