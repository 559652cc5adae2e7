"""What a served model IS, for the result key, when there are no weights to hash. Pure.

A model behind a server is known only by what the server says of it. The key's revision is a
digest of everything that names it and does not change between two reads of an unchanged server:

- where it is served: the base URL's host, port and path (never credentials or a query);
- the name it is served under (`--model`) and the `/v1/models` entry of that name: `id`, `root`
  (vLLM: the checkpoint the server loaded), `parent`, `owned_by` and `max_model_len` when given;
- the server's `system_fingerprint`, read from a one-token completion at load: vLLM's is its version
  and the hash of its engine config (`vllm_config.compute_hash()`: the model, its dtype, quantisation,
  attention backend, ...), so the same name served in bfloat16 instead of float32 is another key (vLLM's
  CPU build serves a float32 checkpoint in bfloat16 unless told `--dtype float32`);
- the tokenizer the prompts are tokenised with here (its revision: a Hub commit or a folder's
  content hash, `runners.model.identity`), since the token ids sent are what is scored.

`created` is recorded but left out of the digest: vLLM fills it with the time of the `/v1/models`
request itself (`ModelCard.created` defaults to `time.time()`), so keying on it would make every
run a new model and no run could resume. Hosted APIs report a fixed creation date there; it is
in the manifest either way. Whatever the server reports, it can swap the model behind a name
without notice, and a digest cannot catch it. What can be checked is: during a run, every answer's
fingerprint (one appearing or disappearing included) and the model it names (`backend._same_server`);
when a run resumes, one done item scored again must give the probabilities stored for it
(`runners.run.served_recheck`). Weights changed where neither looks (between two finished runs into
different folders, or to the same numbers) stay unseen: the result card says so (`cards/results.md.j2`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

#: the `/v1/models` fields that name a served model (and go into the digest)
CARD_FIELDS = ("id", "root", "parent", "owned_by", "max_model_len")


def portable_root(root: Any) -> Any:
    """A name as it may be published: a server-side path (a root, or a model served by its path) is cut to its
    last folder (it names a machine). A path also hides in a `file:` URL, a share (`//host/x`, `\\\\host\\x`)
    and after a prefix glued to it with a doubled slash (`models/private//tmp/x`)."""
    if not isinstance(root, str):
        return root
    path = re.sub(r"(?i)^file:", "/", root).replace(chr(92), "/")
    if path.startswith(("/", "~")) or re.match(r"[A-Za-z]:/", path) or re.search(r"[^:/]//", path):
        return f"{path.rstrip('/').rsplit('/', 1)[-1]} (a folder on the server)"
    return root


def served_identity(
    url: str,
    served_name: str,
    card: Mapping[str, Any],
    tokenizer_revision: str | None,
    fingerprint: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """(the key's revision, the manifest's record) of a served model (see the module docstring).

    `url` is already without credentials (`client.public_url`); `fingerprint` is None where the server gives none.
    """
    named = {field: card.get(field) for field in CARD_FIELDS if card.get(field) is not None}
    keyed = {"url": url, "served_name": served_name, "card": named, "tokenizer_revision": tokenizer_revision}
    if fingerprint is not None:  # keys made before a server gave one stay as they were
        keyed["system_fingerprint"] = fingerprint
    digest = hashlib.sha256(json.dumps(keyed, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    record = {
        "url": url,
        "served_name": portable_root(served_name),
        **{k: portable_root(v) if k in ("id", "root", "parent") else v for k, v in named.items()},
        "created": card.get("created"),
        "system_fingerprint": fingerprint,
        "tokenizer_revision": tokenizer_revision,
    }
    return f"served-{digest[:32]}", record
