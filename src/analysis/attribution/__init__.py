"""Talent or Luck? (attribution bias): this probe's analysis, in one package named as its `promptgen` package.

`spec` holds what the probe's spec names (`ProbeSpec.analysis`: its `ProbeAnalysis`), `probe` its
`TABLES` (the contract is `analysis.probe_analysis`): the report's tables, figures and headline. `tables` computes the
designed configs' d tables, `observer` the actor-observer comparison, `release` and
`release_deltas` the release's own metrics on the `*_release` configs, `figures` the heatmaps and
shares. Nothing outside this package, the probe's `promptgen` package, its recipe and its card
names the probe; the import contracts keep it independent of the other probes (pyproject.toml).
"""
