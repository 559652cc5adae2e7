"""The result dataset folder (docs/DESIGN.md section 2 and 7): keyed parts, atomic writes, card, manifest.

Layout::

    <results>/README.md                                   card; `configs:` globs each config's parts
    <results>/results_manifest.json                       provenance of the runs (one entry per config+key)
    <results>/data/<config>/<key-slug>/key.json           the key the folder holds
    <results>/data/<config>/<key-slug>/part-<shard>-<time>-<writer>.parquet

A result is keyed by (item id, model revision, scoring): the revision is the model's content
(`runners.model.identity`), the scoring JSON holds the scoring settings, chat or plain, the
dtype and the backend. They make a `ResultKey`, whose digest names the folder its rows live in
(after a readable model name, which is not part of the identity), so a run with anything
changed never sees (or reuses) another key's rows. Each row also carries `prompt_sha256`, a
hash of what was scored (prompt, messages, options, range): a resumed item whose prompt
changed is scored again, never reused.

A part's metadata (`PART_CONTENT`) names the prompt content its rows were scored on: a run on
that content trusts their `prompt_sha256` unhashed; other rows are hashed (`runners.results.resume`).

Every part is written to a hidden temporary file and renamed into place, so a killed run
leaves only complete parts; its name holds the writing time and a per-process writer tag, so
concurrent writers never collide. Readers merge on read: when an id appears in several parts
of a key (two processes on one key, or an item rescored after its prompt changed), the row of
the newest part wins, deterministically. At the end of a run the key folder is compacted
under a lock (the merged rows rewritten as one part per prompt content, with the current
schema, the parts read removed), so a finished folder has one row per id and one schema, as
`probes publish` requires. A writer whose rows are new and each id once (`probes import`, millions
of rows) merges its own parts instead, a row group at a time (`merge_parts`), where compaction
would read them back whole; a part known to hold each id once says so (`PART_UNIQUE`), so the
manifest's row counts read its `refused` column, not its ids. The manifest is updated under a lock too.

This package is the one home of the layout, in four modules: `layout` (the file names
`CARD_NAME`, `MANIFEST_NAME`, `DATA_DIR`, `KEY_FILE`, the result key and its folder), `parts`
(the parquet parts: schema, atomic writes, merged reads, compaction), `manifest` (the
provenance file and the card), `check` (a folder validated before publishing), and `resume`
(what a run may reuse). Every stage imports the readers from here (`read_manifest`,
`read_key_file`, `part_schema`, `read_key_rows`), which re-exports them.
"""

from .layout import (
    CARD_NAME,
    DATA_DIR,
    KEY_FILE,
    MANIFEST_NAME,
    PROMPT_FIELDS,
    TOP_ENTRIES,
    KeyFileError,
    ResultKey,
    key_dir,
    key_folders,
    named_elsewhere,
    parse_shard,
    prompt_sha256,
    read_key_file,
    result_configs,
    shard_of,
    short_model_name,
    write_key_file,
)
from .manifest import (
    CARD_TEMPLATE,
    IMPORTS,
    KeyRows,
    check_manifest_shape,
    finished_keys,
    finishing_command,
    load_key_rows,
    planned_imports,
    read_manifest,
    record_import,
    recorded_keys,
    render_results_card,
    summarize,
    unfinished_problem,
    update_manifest,
    write_card,
)
from .parts import (
    PART_CONTENT,
    PART_UNIQUE,
    RESULT_SCHEMA,
    PartWriter,
    compact_key,
    merge_parts,
    missing_columns,
    newest_rows,
    part_content,
    part_files,
    part_schema,
    read_key_rows,
    read_listed,
    read_part,
    row_counts,
    rows_table,
    write_part,
)

__all__ = [
    "CARD_NAME",
    "CARD_TEMPLATE",
    "DATA_DIR",
    "IMPORTS",
    "KEY_FILE",
    "MANIFEST_NAME",
    "PART_CONTENT",
    "PART_UNIQUE",
    "PROMPT_FIELDS",
    "RESULT_SCHEMA",
    "TOP_ENTRIES",
    "KeyFileError",
    "KeyRows",
    "PartWriter",
    "ResultKey",
    "check_manifest_shape",
    "compact_key",
    "finished_keys",
    "finishing_command",
    "key_dir",
    "key_folders",
    "load_key_rows",
    "merge_parts",
    "missing_columns",
    "named_elsewhere",
    "newest_rows",
    "parse_shard",
    "part_content",
    "part_files",
    "part_schema",
    "planned_imports",
    "prompt_sha256",
    "read_key_file",
    "read_key_rows",
    "read_listed",
    "read_manifest",
    "read_part",
    "record_import",
    "recorded_keys",
    "render_results_card",
    "result_configs",
    "row_counts",
    "rows_table",
    "shard_of",
    "short_model_name",
    "summarize",
    "unfinished_problem",
    "update_manifest",
    "write_card",
    "write_key_file",
    "write_part",
]
