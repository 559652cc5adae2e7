"""A model's third-person rewrites (T2) of the empathy narratives, as a build input (docs/DESIGN.md section 4).

The LLM half of T2: `probes.empathy.t2_rewrites.apply_rewrites` reads a model's `rewrite_t2` generations
from a results folder into `ModelRewrites`, and the empathy builder (`dataset`) puts them in
place of the rule-based T2 narratives, with `t2_method` = the model id and a version of its own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ModelRewrites:
    """One model's usable rewrites (text_id -> T2 text) and the record the manifest and card show."""

    model: str
    texts: Mapping[str, str]
    record: dict[str, Any] = field(default_factory=dict)

    def method(self) -> str:
        """The `t2_method` of a rewritten event: the model id as it was run (never `rules`)."""
        return self.model

    def version(self, recipe_version: str) -> str:
        """`1.0.0` -> `1.0.0+t2.<8 hex>`: another model, key or text is another version."""
        digest = hashlib.sha256(json.dumps([self.model, self.record, sorted(self.texts.items())]).encode())
        return f"{recipe_version}+t2.{digest.hexdigest()[:8]}"
