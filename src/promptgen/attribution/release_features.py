"""The columns of the `*_release` configs (`release_items`): the item contract, where a row sits in the
release's list, then its setting's own columns (single actor, actor-actor, actor-observer)."""

from __future__ import annotations

from datasets import Features, List, Value

from ..core.contract import item_features

_COMMON: dict = {
    "setting": Value("string"),
    "domain": Value("string"),
    "scenario": Value("int32"),
    "length": Value("string"),
    "set_id": Value("string"),
    "release_index": Value("int32"),
    "release_seed": Value("int64"),
    "option_keys": List(Value("string")),
}
_STRING = Value("string")
_PERSONS_XY: dict = {
    "identity_x_release": _STRING,
    "identity_y_release": _STRING,
    "identity_x": _STRING,
    "identity_y": _STRING,
    "name_x": _STRING,
    "name_y": _STRING,
}
SINGLE_RELEASE_FEATURES: Features = item_features(
    {
        **_COMMON,
        "outcome": _STRING,
        "gender": _STRING,
        "dimension": _STRING,
        "identity_release": _STRING,
        "identity": _STRING,
        "name": _STRING,
    }
)
PAIR_RELEASE_FEATURES: Features = item_features(
    {
        **_COMMON,
        "outcome_config": _STRING,
        "outcome_x": _STRING,
        "outcome_y": _STRING,
        "gender_pair": _STRING,
        "gender_x": _STRING,
        "gender_y": _STRING,
        "dimension": _STRING,
        **_PERSONS_XY,
        "choice_person": List(_STRING),
    }
)
OBSERVER_RELEASE_FEATURES: Features = item_features(
    {
        **_COMMON,
        "outcome": _STRING,
        "gender": _STRING,
        "dimension": _STRING,
        "observer_cause": _STRING,
        "y_opt_key": _STRING,
        **_PERSONS_XY,
    }
)
