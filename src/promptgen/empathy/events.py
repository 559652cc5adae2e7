"""The per-event configs of `intergroup-empathy`: `events` (each event's three narrative forms) and
`rewrite_t2` (one LLM rewrite prompt per event, run with `probes rewrite`).

Split from `prompts` because these rows are one per event, independent of the identities and
settings that `prompts` expands: `probes.empathy.t2_rewrites` needs only `REWRITE_CONFIG` and
`rewrite_item_id`, and `prompts` stays the perceiver x experiencer x event expansion. Pure functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from datasets import Features, List, Value

from ..core.contract import contract_row, item_features, user_messages
from .corpus import Event
from .release import RELEASE_T2_METHOD, ReleaseEvent
from .third_person import REWRITE_STOP, RULE_METHOD, rewrite_prompt, to_third_person

EVENT_FEATURES = Features(
    {
        "text_id": Value("string"),
        "emotion": Value("string"),
        "intensity": Value("int32"),
        "narrative_t0": Value("string"),
        "narrative_t1": Value("string"),
        "narrative_t2": Value("string"),
        "t2_method": Value("string"),
        "hidden_emo_text": Value("string"),
        "authors_position": Value("int32"),
        "release_events": Value("int32"),
    }
)
#: `t2` build parameter values: the release's third-person texts, or the project's rule-based rewrite of T1
T2_SOURCES: tuple[str, ...] = ("release", "rules")


def event_rows(
    events: Iterable[ReleaseEvent],
    *,
    release_events: int,
    t2: str = "release",
    corpus: Mapping[str, Event] | None = None,
    rewrites: Mapping[str, tuple[str, str]] | None = None,
) -> list[dict[str, Any]]:
    """The three narrative forms per event, as the authors' prompts hold them.

    T0, T1 and T2 are the release's `generated_text`, `first_person_text` and `third_person_text`
    (`t2="rules"`: the project's rule-based rewrite of T1 instead). `rewrites` (text_id -> (T2
    text, method)) puts a model's rewrite in place of either. `corpus` (text_id -> the crowd-enVent
    corpus's event, an optional extra) adds the human intensity rating and the emotion-masked text.
    `authors_position` is the event's place among the `release_events` events the release holds:
    the last factor of the authors' `idx`, whatever subset a build keeps.
    """
    if t2 not in T2_SOURCES:
        raise ValueError(f"t2 must be one of {T2_SOURCES}, got {t2!r}")
    rows = []
    for e in events:
        if t2 == "rules":
            default = (to_third_person(e.first_person_text), RULE_METHOD)
        else:
            default = (e.third_person_text, RELEASE_T2_METHOD)
        narrative_t2, method = (rewrites or {}).get(e.text_id, default)
        extra = (corpus or {}).get(e.text_id)
        rows.append(
            {
                "text_id": e.text_id,
                "emotion": e.emotion,
                "intensity": extra.intensity if extra else None,
                "narrative_t0": e.generated_text,
                "narrative_t1": e.first_person_text,
                "narrative_t2": narrative_t2,
                "t2_method": method,
                "hidden_emo_text": extra.hidden_emo_text if extra else None,
                "authors_position": e.position,
                "release_events": release_events,
            }
        )
    return rows


#: the config of LLM rewrite prompts (one free-text item per event), run with `probes rewrite`
REWRITE_CONFIG = "rewrite_t2"
REWRITE_FEATURES = item_features(
    {"text_id": Value("string"), "emotion": Value("string"), "stop": List(Value("string"))}
)


def rewrite_item_id(text_id: str) -> str:
    return f"emp.rewrite.{text_id}"


def rewrite_rows(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One free-text item per event: docs/DESIGN.md section 4's rewrite prompt for its T1 narrative.

    Released with the dataset so the LLM rewrite is reproducible from the dataset alone
    (`probes run DATASET --config rewrite_t2 --scoring generate`). The prompt is a text to
    continue (it ends inside `Rewrite: {`); `messages` carries it as one user turn for
    runners that use a chat template.
    """
    rows = []
    for e in events:
        prompt = rewrite_prompt(e["narrative_t1"])
        rows.append(
            {
                **contract_row(rewrite_item_id(e["text_id"]), "empathy", "text", prompt, user_messages(prompt)),
                "text_id": e["text_id"],
                "emotion": e["emotion"],
                "stop": list(REWRITE_STOP),
            }
        )
    return rows
