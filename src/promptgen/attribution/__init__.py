"""The Talent-or-Luck attribution probe (DESIGN section 3): release -> items -> the `talent-or-luck` dataset.

`release` reads the authors' JSON, `lint` checks it, `items` builds the three settings'
items (pure), `dataset` wires them to the writer. May import `promptgen.core`, `seeding`,
`recipe`, `sources` and `hub`; never another probe.
"""
