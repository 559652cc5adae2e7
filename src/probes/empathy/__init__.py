"""The empathy probe's own step at the top layer: `probes rewrite` (`cli`) and what it calls (`t2_rewrites`).

Named only by the probe's spec (`promptgen.empathy.spec`: `commands`, `api`), which is how the
command line and `probes.api` find them.
"""
