"""Sources -> prompt datasets (the bottom stage; it imports no other package of the project).

Everything here is deterministic: the same recipe and the same source bytes give
byte-identical parquet files and the same fingerprint.

Owns, from the bottom up (each imports only what is below it; pyproject `[tool.importlinter]`):

- `core`: errors, the item contract, atomic files and hashes, recipe-block validation, version;
- `seeding` (deterministic sampling, cited by the dataset cards) and `assets` (where recipes are);
- `recipe` (load + validate `builders/*.yaml`) and `sources` (local folder, cache or download);
- `hub`: the Hub-ready folder writer, the build plan, the dataset cards;
- one package per probe, never importing each other, each with a `spec.py` that declares it
  (`core.probe_spec.ProbeSpec`: its builder, rows, and references to its upper parts);
- `probe_registry`: the probes found in those packages and registered by plugins;
- `build`: `probes build` and `probes lint` as functions, through each recipe's probe.
"""
