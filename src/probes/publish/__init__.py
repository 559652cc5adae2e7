"""Publish a Hub-ready folder (docs/DESIGN.md section 2) to a Hugging Face dataset repo, idempotently.

Two kinds of folder can be published:

- a prompt dataset folder written by `probes build` (has `build_manifest.json` with `name`,
  `version` and `fingerprint`), tagged `v<version>` so that
  `load_dataset("ORG/NAME", CONFIG, revision="v<version>")` gives the local rows;
- a result folder written by `probes run` (has `results_manifest.json`).

Decisions, and why:

- One commit per publish (`HfApi.create_commit`): a version is either fully on the Hub or not
  at all, and the commit id is a single citable revision.
- Content is compared file by file before anything is uploaded, so re-publishing identical
  content makes no commit. The remote tree (`list_repo_tree`, recursive; `expand` is not needed
  because the plain listing already carries the git blob id and the LFS metadata) gives, per
  file, the git blob sha1 (`RepoFile.blob_id`) and, for LFS/Xet files, the sha256 of the content
  (`RepoFile.lfs.sha256`; the blob id of an LFS file is the hash of its pointer, not of the
  content). Local files are hashed both ways in one pass; a file is unchanged when its sha256
  equals the remote LFS sha256, or, for a regular file, when its git blob sha1 equals the
  remote blob id. Which files the Hub stores in LFS is the remote's business (`.gitattributes`),
  so the local side never guesses.
- Every commit records a `publish-fingerprint:` line (sha256 over the sorted (path, sha256) of
  all published files) in its description. When the branch head already carries the local
  fingerprint, the tree listing is skipped. The build manifest's own `fingerprint` is recorded
  too, but is not used for the shortcut: it covers the data, not the dataset card, so a card
  fix must still be publishable under the same build fingerprint.
- Remote files under `data/` that are not in the local folder are deleted in the same commit.
  The folder is the complete, self-describing snapshot (its manifest and card list exactly its
  files), and the cards load data with globs (`data/<config>/test-*.parquet`,
  `data/<config>/*/part-*.parquet`): a stale shard left behind (e.g. `test-00002-of-00003` after
  a rebuild into two shards) would silently be loaded with the new rows. Nothing is lost:
  older commits and tags keep the old files. Files outside `data/` (`.gitattributes`, extra
  docs added on the Hub) are never deleted. A result folder is likewise published as a whole:
  merge workers' parts into one folder (as `probes run --out` does) before publishing.
- Tags: prompt folders are always tagged `v<version>` from the manifest (`--revision-tag` may
  only repeat it; to publish other content, bump the recipe's version). Result folders have no
  version (they grow as runs resume and configs are added), so they get no tag unless
  `--revision-tag` names one, e.g. the snapshot a paper cites. An existing tag is never moved:
  if it holds identical content the publish is a no-op (even when the branch has moved on to a
  newer version, which is not reverted); if it holds other content, that is an error raised
  before anything is written.
- The token comes only from huggingface_hub (`hf auth login` or `HF_TOKEN`), never from a flag
  (flags end up in shell history and job logs). Every Hub error is re-raised as a `ProbeError`
  whose text has the token (and anything shaped like an HF token) replaced by `***`, raised
  `from None` so the original text is not printed as the cause either.
- Strict about the folder: only the files its format defines are published (prompts: README.md,
  build_manifest.json, data/<config>/test-*.parquet as listed in the manifest; results: README.md,
  results_manifest.json, data/<config>/<key>/key.json and the runner's part files), anything else
  and every symlink is refused by name (a link would upload what it points to). A result
  folder's parts are all read first (`runners.results.check`): readable, one row per key and id, rows
  matching key.json, manifest counts matching the parts, columns exactly the result schema, numbers
  keeping `runners.results.rules` (no NaN distribution of a row not refused, each summing to 1,
  `chosen_index` its argmax). Then
  every file's content (`content_check`): a token or a home-folder path anywhere (card, JSON
  value, any string of any parquet column) is refused, named by file and line, JSON path or row
  id and column. `--dry-run` prints these checks.
- `--dry-run` only reads. When the Hub cannot be read (offline, no such repo, no access) it
  says so and plans against an empty repo, i.e. every file is an "add".

One module per job:

- `target`: the repo id and the tag, checked before anything is read;
- `local`: the folder's files, walked and hashed, and the one-line refusal;
- `folder`: which kind of folder it is and the checks before planning (`content_check`: leaks;
  `runners.results.check`: a result folder's layout and parts);
- `plan`: the file-by-file plan against a remote tree (pure);
- `commit_message`: the commit's title and description, and its fingerprint line read back;
- `hub`: the Hub client wrapper that scrubs every error;
- `upload`: `publish` itself, from reading the refs to the commit and the tag;
- `result`: what a publish did, as lines and a table for the CLI.
"""

from __future__ import annotations

from .folder import inspect_folder
from .hub import HubApi, HubError, RepoNotFound
from .local import LocalFile, LocalFolder, hash_file, scan_files
from .plan import PlanEntry, PublishPlan, RemoteFile, identical_plan, plan_publish
from .result import PublishResult, plan_table
from .target import resolve_tag
from .upload import MAX_FILES_PER_COMMIT, publish

__all__ = [
    "MAX_FILES_PER_COMMIT",
    "HubApi",
    "HubError",
    "LocalFile",
    "LocalFolder",
    "PlanEntry",
    "PublishPlan",
    "PublishResult",
    "RemoteFile",
    "RepoNotFound",
    "hash_file",
    "identical_plan",
    "inspect_folder",
    "plan_publish",
    "plan_table",
    "publish",
    "resolve_tag",
    "scan_files",
]
