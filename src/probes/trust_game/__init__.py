"""The Trust Game's own step at the top layer: `probes curate-pairs` (`cli`) and what it calls (`pair_curation`).

Named only by the probe's spec (`promptgen.trust_game.spec`: `commands`, `api`), which is how the
command line and `probes.api` find them.
"""
