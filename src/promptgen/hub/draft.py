"""What a builder hands to the writer: configs, effective parameters and a build report.

The options a build is asked for are `promptgen.core.build_options.BuildOptions`; each probe's
drafter (named by its `ProbeSpec`) reads the ones it takes. This module sits below the probes and
names none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .folder import ConfigData


@dataclass
class DatasetDraft:
    """A dataset ready to be written: nothing has touched the output folder yet.

    `report` goes into the manifest (`build_report`) and the card; `card_context` is
    extra template context only the card uses (examples, counts, prose tables). `version`
    replaces the recipe's when the build adds inputs the recipe does not name (curated pairs).
    """

    name: str
    configs: list[ConfigData]
    parameters: dict[str, Any]
    report: dict[str, Any] = field(default_factory=dict)
    card_context: dict[str, Any] = field(default_factory=dict)
    default_config: str | None = None
    rows_per_shard: int = 200_000
    version: str | None = None
