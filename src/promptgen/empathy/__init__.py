"""The intergroup-empathy probe (docs/DESIGN.md section 4): crowd-enVent -> the `intergroup-empathy` dataset.

`corpus` reads the crowd-enVent TSV, `narratives` makes the T0/T1 forms, `third_person` the
rule-based T2 rewrite, `model_rewrites` carries a model's T2 rewrites into a build, `events` makes
the per-event `events` and `rewrite_t2` rows, `prompts` expands perceiver x experiencer x event x
setting (pure), `dataset` wires them to the writer;
`synthetic` writes a stand-in corpus in crowd-enVent's format where the real one is missing.
`spec` declares the probe to the registry. May import `promptgen.core`, `seeding`, `recipe`, `sources` and
`hub`; never another probe. The package imports nothing itself, so finding its `spec` costs no import of
`datasets`.
"""
