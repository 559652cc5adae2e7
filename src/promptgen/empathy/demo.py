"""What `probes demo` scores of the intergroup empathy gap: the full religion matrix (6 x 6 identities, so δ
and its permutation test are defined) of one setting, on a few events.

The items are read by their number distribution (`--scoring sentence`), not the paper's greedy
answers: SmolLM2-135M answers "The person felt anger." to every item, so the paper's protocol
leaves nothing to analyse. It also puts only ~6% of its mass on numbers under the chat form,
under the default refusal threshold (0.5 of the mass), so the demo reads the renormalised
distribution whatever that mass (`refusal_threshold` 0; `valid_mass` stays in every row). The
paper's protocol runs on a few items beside it, into a results folder of its own, to show its
refusal accounting.
"""

from __future__ import annotations

from ..core.probe_spec import DemoPlan, DemoRun

#: the 0-10 scale (S1): its number trie has ~20 leaves, against ~180 for 0-100, so the demo stays short
CONFIG = "religion_P0S1T0"
PAPER_ITEMS = 6
NOTE = (
    "The paper's empathy protocol is greedy generation, parsed for a number; a 135M model does not answer in "
    "numbers, so the demo reads its distribution over 0-10 instead (--scoring sentence: the expected value of the "
    "distribution renormalised over the numbers, with no refusal threshold, since a 135M model puts only a few "
    "percent of its mass on numbers; each row keeps that mass as valid_mass). With the paper's protocol, "
    "{refused} of {items} items were refused ({results})."
)

DEMO = DemoPlan(
    runs=(
        DemoRun(CONFIG, settings={"scoring": "sentence", "refusal_threshold": 0.0}),
        DemoRun(CONFIG, limit=PAPER_ITEMS, results_suffix="-paper"),
    ),
    sizes={"max_events": 12},
    sized_build=("max_events",),
    note=NOTE,
)
