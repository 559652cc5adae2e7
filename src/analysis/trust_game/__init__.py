"""The name-based Trust Game: this probe's analysis, in one package named as its `promptgen` package.

`spec` holds what the probe's spec names (`ProbeSpec.analysis`: its `ProbeAnalysis`), `probe` its
`TABLES` (the contract is `analysis.probe_analysis`): the report's tables, figures and headline. `tables` computes the
ANOVA, post hoc tests, cell means and probing accuracy, `figures` the interaction plots. Nothing
outside this package, the probe's `promptgen` package, its recipe and its card names the probe.
"""
