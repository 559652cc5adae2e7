"""The Talent-or-Luck attribution probe (docs/DESIGN.md section 3): release -> items -> the `talent-or-luck` dataset.

`release` reads the authors' JSON, `lint` checks it, `params` validates the recipe's
parameters and corrections, `identities` samples names per identity group, `item_rows`
renders one item's rows, `items` builds the three settings' items (pure), `release_items`
the release's own scorer items byte for byte (the `*_release` configs; their columns are
`release_features`), `side_configs` the templates and identities configs, `dataset` wires them to the writer. May import
`promptgen.core`, `seeding`, `recipe`, `sources` and `hub`; never another probe.
"""
