"""Hub credentials (and a model server's key) kept out of everything the tools print and publish: the scrubber.

A Hugging Face token can reach a printed message in many ways: a mirror or proxy echoes the
request (headers included) into its error body, and datasets, huggingface_hub or transformers
repeat that body in the exception text we wrap into a `ProbeError`; a library's DEBUG line logs
the headers; a bug's traceback carries the same text. Every layer (promptgen, runners,
analysis, probes) may need to mask such text, so the scrubber lives here, in `promptgen.core`,
which imports nothing else of the project.

What is masked, and why:

- the known secrets: the values of `HF_TOKEN` / `HUGGING_FACE_HUB_TOKEN` and the tokens
  huggingface_hub saved at login (`hf auth login`: its token file and its stored named tokens),
  whatever their shape (a token need not start with `hf_`), and a model server's key
  (`OPENAI_API_KEY`, or the variable `--api-key-env` names: `watch_secret_env`);
- anything shaped like an OpenAI secret key (`sk-` and 16+ letters, digits, `-` or `_`);
- anything shaped like an HF token (`hf_` and 8+ letters or digits): a token other than the
  known ones (e.g. a mirror's own, a collaborator's) is just as secret;
- the value of an `Authorization` header and the credential after `Bearer` (any shape);
- `token=`/`token:` followed by a credential-looking value.

Invisible characters (zero-width ones, directional controls) are dropped from printed text first: one
inside a token would leave its tail unmasked while a person reads the token whole.

The saved tokens are read from huggingface_hub's files, not with `huggingface_hub.get_token()`:
that call may exchange an OIDC token or refresh an OAuth token over the network, and a
scrubber runs inside error handling and log filters, where it must never make a request.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import traceback
import warnings
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Any

#: environment variables huggingface_hub reads a token from
TOKEN_ENV_VARS: tuple[str, ...] = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
#: other services' keys this process may send (a model server's, `runners.backends.openai.client`): their
#: values are masked like the Hub's; `watch_secret_env` adds the variable a run was told to read
_WATCHED_ENV_VARS: list[str] = ["OPENAI_API_KEY"]
#: what replaces a secret
MASK = "***"

#: an HF user access token (real ones are `hf_` + 34 letters and digits; 8+ also catches cut ones)
HF_TOKEN_RE = re.compile(r"\bhf_[A-Za-z0-9]{8,}")
#: what must never be published, by kind: written so that Python's `re` and Arrow's RE2
#: (`pyarrow.compute.match_substring_regex`, no look-around) read them alike. A home path names
#: a person and a machine; `~/` and the Windows form are the same leak spelled otherwise.
#: not inside a URL or a longer path: `https://x.org/home/...` is fine; but a path glued after a doubled slash
#: (`models/private//tmp/x`, a server's `parent`) starts there all the same
PATH_START = r"""(?:^|[^A-Za-z0-9_.:/~-]|[^:/]/)"""
#: after a top-level folder's name: one more path segment
PATH_REST = r""")/[^/\s"']+"""
#: top-level folders where machines keep data outside home folders (shared clusters, containers,
#: notebooks): a path under one names a machine's layout, often a person's work folder too
DATA_ROOTS: tuple[str, ...] = (
    "tmp",
    "var",
    "mnt",
    "media",
    "opt",
    "srv",
    "data",
    "datasets",
    "scratch",
    "work",
    "workspace",
    "workspaces",
    "storage",
    "shared",
    "projects",
    "project",
    "lustre",
    "gpfs",
    "nfs",
    "net",
    "cluster",
    "private",
    "Volumes",
    "content",
    "kaggle",
    "dbfs",
    "fsx",
    "efs",
)
PUBLISH_LEAK_PATTERNS: dict[str, str] = {
    # a whole token only: the 8+ form that scrubbing masks would refuse a card naming `hf_transfer`;
    # user tokens (`hf_`) and organisation API tokens (`api_org_`), the shapes huggingface_hub knows
    "a Hugging Face token": r"\b(?:hf_|api_org_)[A-Za-z0-9]{30,}",
    # a model server's key (`sk-`, `sk-proj-`, ...), whoever's it is: 20+ so that `sk-learn` is a word
    "an OpenAI-style API key": r"\bsk-[A-Za-z0-9_-]{20,}",
    # `/home2/`, `/homes/`: clusters spread home folders over several roots
    "a home-folder path": (
        PATH_START
        + r"""(?:/home[A-Za-z0-9_-]*/[^/\s"']+|/Users/[^/\s"']+|/root(?:$|[/\s"'])|~/|[A-Za-z]:[\\/]Users[\\/])"""
    ),
    "an absolute local path": PATH_START + "/(?:" + "|".join(DATA_ROOTS) + PATH_REST,
    # a path in URL form (a served model's `root`): `file:///srv/x`, `file://host/share/x`
    "a file:// URL": r"(?i)\bfile:/",
    # a Windows share, `//host/share` or `\\host\share` (a host without dots: `//cdn.example.org/x` is a link)
    "a network share path": PATH_START + r"""(?://[A-Za-z0-9_$-]+/[^/\s"']|\\\\[A-Za-z0-9_$-]+\\[^\\\s"'])""",
}
#: the kinds of `PUBLISH_LEAK_PATTERNS` that are credentials (also looked for across line breaks)
SECRET_KINDS: tuple[str, ...] = ("a Hugging Face token", "an OpenAI-style API key")
#: characters that hide a token from a plain search but not from a reader (removed before matching): the
#: soft hyphen, the combining grapheme joiner, zero-width spaces, joiners and marks, the word joiner and
#: invisible operators, the bidirectional controls, Mongolian and Khmer invisibles, Hangul fillers,
#: variation selectors and the byte order mark
INVISIBLE_RE = (
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0]"
)
#: bidirectional controls (embeddings, overrides, isolates, the directional marks): in a name they make it
#: display as another (`org/\u202eevil` reads `org/live`, Trojan Source); refused in names and metadata
BIDI_CONTROLS_RE = "[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"

#: the value of an Authorization header, as a raw header line, a dict repr or JSON (`'authorization': '...'`)
_AUTH_HEADER_RE = re.compile(
    r"""(?i)(\bauthorization\b["']?\s*[:=]\s*["']?(?:(?:bearer|basic|token)\s+)?)[^"'\r\n,;}]+"""
)
#: a bearer credential of any shape, and `token=`/`token:` followed by a credential-looking value
_BEARER_RE = re.compile(r"""(?i)(\bbearer\s+)[^\s"',;}]+""")
_TOKEN_ASSIGN_RE = re.compile(r"(?i)(\btoken\s*[:=]\s*)[A-Za-z0-9._~+/=-]{8,}")
#: an OpenAI-style secret key (`sk-`, `sk-proj-`, ...): masked whoever's it is, like a token-shaped `hf_`
_SK_KEY_RE = re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")
#: known secrets shorter than this are not masked (masking "abc" everywhere would garble text)
_MIN_SECRET_LEN = 4


def known_secrets() -> tuple[str, ...]:
    """The token values this process could send to the Hub: environment first, then the saved login.

    Read on every call (cheaply: the saved files are re-read only when they change), so a token
    set or saved after start-up is masked too.
    """
    return tuple(named_secrets())


def named_secrets() -> dict[str, str]:
    """Each known secret (`known_secrets`, in that order) -> what it is, for a line that names it unshown."""
    named: dict[str, str] = {}
    for name in (*TOKEN_ENV_VARS, *_WATCHED_ENV_VARS):
        value = os.environ.get(name, "").strip()
        kind = f"a Hugging Face token held in ${name}" if name in TOKEN_ENV_VARS else f"a secret held in ${name}"
        if len(value) >= _MIN_SECRET_LEN:
            named.setdefault(value, kind)
    for value in _saved_tokens(*_saved_token_stamp()):
        if len(value) >= _MIN_SECRET_LEN:
            named.setdefault(value, "a Hugging Face token saved at login")
    return named


def watch_secret_env(name: str) -> None:
    """Mask the value of environment variable `name` from now on (a server key a run reads from it)."""
    if name not in _WATCHED_ENV_VARS:
        _WATCHED_ENV_VARS.append(name)


def _saved_token_paths() -> tuple[Path, Path]:
    """huggingface_hub's token file (`hf auth login`) and its stored named tokens."""
    from huggingface_hub import constants

    return Path(constants.HF_TOKEN_PATH), Path(constants.HF_STORED_TOKENS_PATH)


def _saved_token_stamp() -> tuple[tuple[str, int], ...]:
    """(path, mtime) of each saved-token file that exists: the cache key of `_saved_tokens`."""
    try:
        paths = _saved_token_paths()
    except Exception:  # huggingface_hub missing or broken: only the environment is known
        return ()
    stamp = []
    for path in paths:
        try:
            stamp.append((str(path), path.stat().st_mtime_ns))
        except OSError:
            continue
    return tuple(stamp)


@lru_cache(maxsize=8)
def _saved_tokens(*stamp: tuple[str, int]) -> tuple[str, ...]:
    """The tokens in the saved-token files named by `stamp` (re-read when a file's mtime changes).

    The token file holds one token; the stored-tokens file is an INI file with an `hf_token`
    (and, for OAuth logins, a refresh token) per named token. Parsed leniently rather than
    with huggingface_hub's private readers: every `*token* = value` counts.
    """
    tokens: list[str] = []
    for path, _mtime in stamp:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for line in map(str.strip, text.splitlines()):
            key, sep, value = line.partition("=")
            if not sep and line and not line.startswith(("[", "#", ";")):
                tokens.append(line)  # the token file: the token alone
            elif sep and "token" in key.lower():
                tokens.append(value.strip())
    return tuple(tokens)


def scrub(text: str, secrets: Iterable[str | None] | None = None) -> str:
    """`text` with every secret masked: the given ones (default: `known_secrets()`) and token-shaped text.

    Invisible characters (`INVISIBLE_RE`: zero-width ones, directional controls) are dropped first: one
    inside a token would hide its tail from the masks while a person reads the token whole.
    """
    values = known_secrets() if secrets is None else secrets
    text = re.sub(INVISIBLE_RE, "", text)
    for secret in sorted({s for s in values if s and len(s) >= _MIN_SECRET_LEN}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    text = HF_TOKEN_RE.sub(f"hf_{MASK}", text)
    text = _SK_KEY_RE.sub(f"sk-{MASK}", text)
    text = _AUTH_HEADER_RE.sub(lambda m: f"{m.group(1)}{MASK}", text)
    text = _BEARER_RE.sub(lambda m: f"{m.group(1)}{MASK}", text)
    return _TOKEN_ASSIGN_RE.sub(lambda m: f"{m.group(1)}{MASK}", text)


def scrub_value(value: Any, secrets: Iterable[str | None] | None = None) -> Any:
    """`value` with every string in it scrubbed (`scrub`): a string, or lists, tuples and dicts of them (keys too).

    What the project writes for people (a report's provenance and notes, sweep.json, a page's
    texts) is built from such values; other values (numbers, None) are returned as they are.
    """
    known = tuple(known_secrets() if secrets is None else (s for s in secrets if s))
    if isinstance(value, str):
        return scrub(value, known)
    if isinstance(value, dict):
        return {scrub_value(k, known): scrub_value(v, known) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(scrub_value(v, known) for v in value)
    return value


class ScrubbedStream:
    """A text stream that writes to `sys.<name>` (looked up at each write: tests and pipes swap it), scrubbed.

    The CLI's consoles print to it, so every line a command prints on stdout or stderr passes
    the one scrubber, whatever printed it: a string, a table, a library's progress line.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    @property
    def stream(self) -> Any:
        return getattr(sys, self.name)

    def write(self, text: str) -> int:
        self.stream.write(scrub(text))
        return len(text)

    def __getattr__(self, attr: str) -> Any:  # isatty, fileno, flush, encoding: the stream's own
        return getattr(self.stream, attr)


def scrubbed_traceback(exc: BaseException) -> str:
    """The full traceback of `exc` (with its causes) as Python prints it, scrubbed.

    For bugs: the traceback is still shown (it is what a bug report needs), only the secrets
    that an exception's text repeated from a Hub response are masked.
    """
    return scrub("".join(traceback.format_exception(exc)))


class ScrubTokens(logging.Filter):
    """Mask secrets in every log record a handler emits (`-v` turns on libraries' DEBUG lines,
    which may print request headers or URLs with credentials).

    The record is formatted here, scrubbed, and its args dropped, so no formatter can put the
    raw values back; a traceback attached to the record is formatted and scrubbed too. Without
    explicit `secrets`, the known ones are read for each record (`known_secrets`).
    """

    def __init__(self, secrets: Iterable[str | None] | None = None) -> None:
        super().__init__()
        self.secrets = None if secrets is None else tuple(s for s in secrets if s)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # args that do not fit the format: scrub the raw parts instead
            message = f"{record.msg} {record.args}"
        secrets = known_secrets() if self.secrets is None else self.secrets
        record.msg = scrub(message, secrets)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub(record.exc_text, secrets)
        if record.stack_info:
            record.stack_info = scrub(record.stack_info, secrets)
        return True


def install_log_scrubber(logger: logging.Logger | None = None) -> None:
    """Add one `ScrubTokens` to every handler of `logger` (the root logger by default), and scrub warnings.

    On the handlers, not the logger: records propagated from library loggers pass through the
    root's handlers but never through the root logger's own filters.
    """
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, ScrubTokens) for f in handler.filters):
            handler.addFilter(ScrubTokens())
    if warnings.showwarning is not _show_scrubbed_warning:
        warnings.showwarning = _show_scrubbed_warning


def _show_scrubbed_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, file=None, line: str | None = None
) -> None:
    """`warnings.showwarning` in Python's own format, scrubbed: a library's warning may quote a Hub response."""
    text = warnings.formatwarning(message, category, filename, lineno, line)
    with contextlib.suppress(OSError):  # stderr gone: as Python's own showwarning, drop the warning
        (file or sys.stderr).write(scrub(text))
