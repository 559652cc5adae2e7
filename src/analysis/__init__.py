"""Released prompt and result datasets -> the papers' metrics, tables, figures and report.

May import `runners` (to read result folders) and `promptgen` (constants of the probes);
never `probes`. Nothing below it imports it.

`load` reads and joins prompts and results, refusing through `result_checks` the result values
that cannot be results; `stats` holds the shared tests; `refusals` the one refusal rule; each
probe has an analysis package (its `spec.ANALYSIS`, which its `ProbeSpec` names; the contract is
`probe_part` and `probe_analysis`) with
its metric modules beside it (pure); `plots` draws them; `pipeline` runs collect -> compute ->
draw over the registered probes (`probes`); `headlines` and `report` write the tables, figures
and report.html.
"""
