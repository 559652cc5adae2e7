"""The intergroup empathy gap: this probe's analysis, in one package named as its `promptgen` package.

`spec` holds what the probe's spec names (`ProbeSpec.analysis`: its `ProbeAnalysis`), `probe` its
`TABLES` (the contract is `analysis.probe_analysis`): the report's tables, figures and headline.
`tables` is the project's reading of the paper (M0, M, δ and their tests), `paper` the paper's tables by the authors'
notebook rules, `figures` the heatmaps and t-SNE. Nothing outside this package, the probe's
`promptgen` package, its recipe and its card names the probe.
"""
