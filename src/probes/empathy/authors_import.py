"""`--format empathy-authors`: the intergroup-empathy authors' generation files -> result rows.

The authors' release (houyu0930/intergroup-empathy-bias, cdfd1a6; docs/DESIGN.md section 4)
generates with `batch_pred_emotion.py`, which writes `<exp_id>/<group>_<variation>_batch-<k>.tsv`
with the columns `idx, system_prompt, user_input, response`. Their group is `ethnicity`,
`nationality` or `religion` (our categories `race`, `nationality`, `religion`), their variation
one of `origin`, `persona-1`, `persona-2`, `persona-3`, `10-scale`, `1-person`, `3-person` (our
settings P0S0T0, P1S0T0, P2S0T0, P3S0T0, P0S1T0, P0S0T1, P0S0T2); a file answers the config
`<category>_<setting>` (e.g. `race_P0S0T0`).

Each file is read as their `process_exp_results.py` reads it, `pandas.read_csv(path, sep='\\t')`
with pandas' defaults, and each answer as `str(response)` (an empty answer is the text "nan").
A row joins the prompt row whose `authors_index` is its `idx`, and its `system_prompt` and
`user_input` must be that item's system and user messages byte for byte: anything else is one
line naming the file and the idx, before anything is written. The answer is read by their rule
(`runners.scoring.parse.read_number` with the `first-integer` parser) into the row a
`--scoring generate` run writes (`runners.rows.generated_row`: `generated_text`, `parsed_value`,
`parse_status`, `refused`), under the scoring key of their protocol: greedy generation
(temperature 0) of at most 128 new tokens on the chat form, the `first-integer` parser. What the
files do not say is left empty: `context_tokens`, `finish_reason`.
"""

from __future__ import annotations

import io
import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from probes.importer.common import ParsedFile, SourceFile, first, first_difference, need_columns, row_error
from promptgen.core.contract import arrow_table
from promptgen.core.errors import ProbeError
from promptgen.core.secrets import known_secrets
from promptgen.empathy.prompts import AUTHORS_GROUPS, AUTHORS_VARIATIONS
from runners.exchange import GenerateRequest, Generation
from runners.prompts import PromptConfig
from runners.rows import generated_row
from runners.scoring.settings import ScoringSettings, scoring_settings

NAME = "empathy-authors"
#: the authors' group (`--group_option`) -> our category; variation (`--prompt_variation`) -> our setting
GROUPS, VARIATIONS = AUTHORS_GROUPS, AUTHORS_VARIATIONS
LAYOUT = (
    "the authors' generation folder (batch_pred_emotion.py's <exp_id>/): <group>_<variation>_batch-<k>.tsv with "
    f"columns idx, system_prompt, user_input, response; group {', '.join(GROUPS)}; "
    f"variation {', '.join(VARIATIONS)}"
)
_GROUP = "|".join(GROUPS)
_VARIATION = "|".join(map(re.escape, VARIATIONS))
_FILE = re.compile(rf"^(?P<group>{_GROUP})_(?P<variation>{_VARIATION})_batch-(?P<batch>[0-9]+)\.tsv$")
COLUMNS = ("idx", "system_prompt", "user_input", "response")
#: the authors' generation settings (`vllm_inference`) and their parser (`extract_numbers`)
TEMPERATURE = 0.0
MAX_NEW_TOKENS = 128
NUMBER_PARSER = "first-integer"


def config_name(group: str, variation: str) -> str:
    """Our config for the authors' group and variation (`ethnicity`, `origin` -> `race_P0S0T0`)."""
    return f"{GROUPS[group]}_{VARIATIONS[variation]}"


def _content(messages: Sequence[Mapping[str, Any]] | None, role: str) -> str | None:
    """The content of the first message of `role`, or None."""
    return next((m.get("content") for m in messages or () if m.get("role") == role), None)


class EmpathyAuthors:
    """The authors' `batch_pred_emotion.py` output files (module docstring)."""

    name = NAME
    backend = f"import:{NAME}"
    layout = LAYOUT

    def scoring(self) -> tuple[ScoringSettings, bool]:
        """Their vLLM call: the chat template, greedy, at most 128 new tokens; their parser."""
        settings = scoring_settings(
            "generate", temperature=TEMPERATURE, max_new_tokens=MAX_NEW_TOKENS, number_parser=NUMBER_PARSER
        )
        return settings, True

    def configs(self) -> Collection[str]:
        return tuple(config_name(g, v) for g in GROUPS for v in VARIATIONS)

    def discover(self, folder: Path, source_model: str | None) -> list[SourceFile]:
        if source_model is not None:
            raise ProbeError(
                f"--source-model picks a model folder in a layout that has several; --format {NAME} has none"
            )
        found = []
        for path in sorted(p for p in folder.iterdir() if p.suffix == ".tsv" and p.is_file()):
            m = _FILE.match(path.name)
            if m is None:
                raise ProbeError(f"{path.name}: not one of the authors' files (--format {NAME} reads {LAYOUT})")
            meta = {"group": m["group"], "variation": m["variation"], "batch": m["batch"]}
            found.append(SourceFile(path, path.name, config_name(m["group"], m["variation"]), meta))
        if not found:
            raise ProbeError(f"{folder}: no .tsv files (--format {NAME} reads {LAYOUT})")
        return found

    def prepare(self, prompts: PromptConfig) -> tuple[np.ndarray, np.ndarray]:
        """(sorted authors_index, the prompt position of each): their `idx` looked up by binary search."""
        need_columns(
            prompts,
            ("authors_index", "messages", "task", "number_min", "number_max"),
            f"--format {NAME} (its idx joins authors_index; rebuild the dataset if it predates that column)",
        )
        column = arrow_table(prompts.dataset.select_columns(["authors_index"]))["authors_index"]
        if column.null_count:
            raise ProbeError(f"{prompts.path} config {prompts.config!r}: authors_index is null in some rows")
        values = column.to_numpy().astype(np.int64)
        order = np.argsort(values, kind="stable")
        ordered = values[order]
        if len(ordered) > 1 and (repeat := first(ordered[1:] == ordered[:-1])) is not None:
            raise ProbeError(
                f"{prompts.path} config {prompts.config!r}: authors_index {int(ordered[repeat])} is in two rows"
            )
        return ordered, order

    def parse(
        self, source: SourceFile, data: bytes, prompts: PromptConfig, index: tuple[np.ndarray, np.ndarray]
    ) -> ParsedFile:
        try:  # as their process_exp_results.py reads it: pandas' defaults, tab-separated
            frame = pd.read_csv(io.BytesIO(data), sep="\t")
        except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
            raise ProbeError(f"{source.name}: cannot read it as their TSV ({' '.join(str(exc).split())})") from exc
        missing = [c for c in COLUMNS if c not in frame.columns]
        if missing:
            names = ", ".join(map(repr, missing))
            raise ProbeError(f"{source.name}: no column(s) {names} (their files have {', '.join(COLUMNS)})")
        raw = frame["idx"]
        numbers = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
        with np.errstate(invalid="ignore"):
            bad = first(~np.isfinite(numbers) | (numbers != np.round(numbers)))
        if bad is not None:
            raise row_error(source, bad, "idx", f"{raw.iloc[bad]!r} is not an integer")
        idx = numbers.astype(np.int64)
        ordered, order = index
        at = np.searchsorted(ordered, idx)
        found = (at < len(ordered)) & (ordered[np.minimum(at, len(ordered) - 1)] == idx) if len(ordered) else at < 0
        if (bad := first(~found)) is not None:
            raise row_error(
                source,
                bad,
                "idx",
                f"idx {int(idx[bad])} is no prompt's authors_index in {prompts.path} config {prompts.config!r}",
            )
        positions = order[at]
        seen: dict[int, int] = {}
        for row, value in enumerate(idx.tolist()):
            if value in seen:
                raise row_error(source, row, "idx", f"idx {value} again (row {seen[value] + 1} has it)")
            seen[value] = row
        items = arrow_table(
            prompts.dataset.select(positions).select_columns(["id", "task", "number_min", "number_max", "messages"])
        ).to_pylist()
        for column, role in (("system_prompt", "system"), ("user_input", "user")):
            for row, (given, item) in enumerate(zip(frame[column].tolist(), items, strict=True)):
                wanted = _content(item["messages"], role)
                if given != wanted:
                    where = first_difference(str(given), str(wanted)) if isinstance(given, str) and wanted else ""
                    raise ProbeError(
                        f"{source.name}: idx {int(idx[row])} (row {row + 1}): {column} is not the {role} message of "
                        f"its prompt {item['id']!r}" + (f" ({where})" if where else "")
                    )
        answers = [str(response) for response in frame["response"].tolist()]  # their `str(response)`: NaN is "nan"

        def rows() -> list[dict[str, Any]]:
            # the request is generated_row's record of the context; an import has none (context_tokens stays empty)
            request = GenerateRequest(context=(0,), max_tokens=MAX_NEW_TOKENS, temperature=TEMPERATURE)
            out = []
            secrets = known_secrets()  # read once per file, not once per answer
            for item, text in zip(items, answers, strict=True):
                row = generated_row(item, request, Generation(text, (), ""), NUMBER_PARSER, secrets)
                row.update(id=item["id"], backend=self.backend, context_tokens=None, finish_reason=None)
                out.append(row)
            return out

        return ParsedFile(positions, rows)


FORMAT = EmpathyAuthors()
