"""The name-based Trust Game probe (docs/DESIGN.md section 5): Census surnames -> the `trust-game-names` dataset.

`census` ranks surnames (steps 1-6), `race_probe` asks the model which race a name reads as,
`curation` keeps the pairs it reads as intended (step 7, pure), `paper_pairs` holds the
paper's own pairs (step 8), `games` builds the games and probing questions, `params` parses
the recipe block, `report` summarises what the steps measured for the build report, `dataset`
wires them to the writer. May import `promptgen.core`, `seeding`, `recipe`, `sources` and `hub`;
never another probe.
"""
