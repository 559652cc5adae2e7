"""Which rows of a prompt config a run scores: one `Selection`, selected by one function.

- `select`: `Selection` (where, shard, limit, sample and its seed) and `select_rows`, the one place the
  four steps are taken, in their one order;
- `where`: the rows whose columns hold given values (a protocol's rows, `--where`);
- `sample`: the seeded sample of a probe's units (`--sample N --sample-seed S`).

This package's `__init__` imports nothing: each caller imports the module it reads.
"""
