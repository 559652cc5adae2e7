"""The side configs of the dataset: the release's single-actor templates and every identity's names.

They document what the items were built from: each template with its options and their
length ratio, each name with whether (and at which rank) it was sampled.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from datasets import List, Value

from .identities import Identity
from .lint import length_ratio
from .release import CAUSES, DIMENSIONS, GENDERS, Release

TEMPLATE_FEATURES = {
    "template_id": Value("string"),
    "outcome": Value("string"),
    "domain": Value("string"),
    "scenario": Value("int32"),
    "gender": Value("string"),
    "statement_template": Value("string"),
    "instruction": Value("string"),
    "options": List(Value("string")),
    "option_types": List(Value("string")),
    "option_keys": List(Value("string")),
    "option_length_ratio": Value("float64"),
}
IDENTITY_FEATURES = {
    "dimension": Value("string"),
    "identity": Value("string"),
    "identity_original": Value("string"),
    "corrected": Value("bool"),
    "gender": Value("string"),
    "name": Value("string"),
    "name_index": Value("int32"),
    "sampled": Value("bool"),
    "sample_rank": Value("int32"),
}


def template_rows(release: Release) -> Iterator[dict[str, Any]]:
    for t in release.single:
        yield {
            "template_id": t.template_id,
            "outcome": t.outcome,
            "domain": t.domain,
            "scenario": t.scenario,
            "gender": t.gender,
            "statement_template": t.statement,
            "instruction": t.instruction,
            "options": list(t.options),
            "option_types": list(CAUSES),
            "option_keys": [next(k for k in t.option_keys if k.startswith(f"opt{i + 1}_")) for i in range(4)],
            "option_length_ratio": round(length_ratio(t.options), 6),
        }


def identity_rows(identities: dict[str, list[Identity]]) -> Iterator[dict[str, Any]]:
    for dimension in DIMENSIONS:
        for ident in identities[dimension]:
            for gender in GENDERS:
                rank = {n.index: r for r, n in enumerate(ident.sampled[gender])}
                for n in ident.all_names[gender]:
                    yield {
                        "dimension": dimension,
                        "identity": ident.label,
                        "identity_original": ident.label_original,
                        "corrected": ident.label != ident.label_original,
                        "gender": gender,
                        "name": n.name,
                        "name_index": n.index,
                        "sampled": n.index in rank,
                        "sample_rank": rank.get(n.index),
                    }
