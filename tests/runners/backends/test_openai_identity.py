"""What the manifest records of a served model (`runners.backends.openai.identity`): never a path of the server.

A server reports where it loaded the model (`root`, `parent` in `/v1/models`); vLLM gives the
checkpoint's folder, other servers a `file://` URL or a prefix glued to a path
(`models/private//tmp/...`). The manifest and the card are published, so each is cut to the
model's folder name, and the publish check (`probes.publish.content_check`) finds nothing in it.
"""

from __future__ import annotations

import pytest

from probes.publish.content_check import Needles
from promptgen.core.secrets import PUBLISH_LEAK_PATTERNS
from runners.backends.openai.identity import served_identity


@pytest.mark.parametrize(
    "where",
    [
        "file:///srv/models/llama-3",
        "FILE://fileserver/share/llama-3/",
        "file:/data/llama-3",
        "models/private//tmp/tmpab12/llama-3",
        "//fileserver/share/llama-3",
        "\\\\fileserver\\share\\llama-3",
    ],
)
def test_a_served_models_root_and_parent_are_recorded_without_the_servers_path(where: str) -> None:
    card = {"id": "org/llama-3", "root": where, "parent": where, "owned_by": "vllm"}
    revision, record = served_identity("http://127.0.0.1:8000/v1", "org/llama-3", card, None)
    assert record["root"] == record["parent"] == "llama-3 (a folder on the server)"
    assert record["id"] == record["served_name"] == "org/llama-3"  # a model name stays as served
    needles = Needles(PUBLISH_LEAK_PATTERNS, {})
    assert [needles.find(str(v), name=True) for v in record.values()] == [None] * len(record)
    # the digest still keys on what the server said: another root is another model
    other, _ = served_identity("http://127.0.0.1:8000/v1", "org/llama-3", {**card, "root": "/srv/x"}, None)
    assert other != revision
