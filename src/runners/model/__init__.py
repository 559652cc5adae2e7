"""A model checked, keyed and loaded: `load` (`LoadOptions`, `load_backend`), `identity` (what a model is),
`device` (where and in which dtype it runs) and `context_length` (how long its context must be)."""
