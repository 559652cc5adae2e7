"""The intergroup empathy gap's own `probes analyze` options (`ProbeAnalysis.options`).

Its own module, with no pandas, so the command line can build `--permutations` from it for
`--help` without importing the analysis.
"""

from __future__ import annotations

from dataclasses import dataclass

from promptgen.core.flags import option_flag


@dataclass(frozen=True)
class EmpathyOptions:
    """What the empathy tables compute with; the report records it."""

    #: draws of the structured permutation test of δ (`analysis.empathy.tables`, `analysis.empathy.paper`)
    n_permutations: int = option_flag("Permutations of the empathy gap test.", 10_000, flag="--permutations", min=1)
