"""The empathy probe's own parts of `probes` (`ProbeSpec.commands`): `probes rewrite` and the authors' outputs."""

from __future__ import annotations

from promptgen.core.release_format import ReleaseFormat

from ..probe_part import ProbeCommands

COMMANDS = ProbeCommands(
    commands={"rewrite": "probes.empathy.cli:rewrite_cmd"},
    api={"rewrite": "probes.empathy.t2_rewrites:rewrite", "RewriteRun": "probes.empathy.t2_rewrites:RewriteRun"},
    import_formats={
        "empathy-authors": ReleaseFormat(
            format="probes.empathy.authors_import:FORMAT",
            help="the intergroup-empathy authors' batch_pred_emotion.py TSV files (<group>_<variation>_batch-<k>.tsv: "
            "idx, system_prompt, user_input, response), joined on the prompts' authors_index and parsed by their "
            "first-integer rule",
        )
    },
)
