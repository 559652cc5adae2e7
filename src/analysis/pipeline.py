"""`probes analyze`: a prompt dataset + result folders -> every table and figure of the papers.

Three steps, one job each, so a notebook can stop after any of them:

1. `collect` (I/O): which configs the result folders hold, their rows (all folders of one
   config together: several models are one frame, told apart by the run columns), the prompt
   rows of those configs, and the join by `id` (`analysis.load`). Provenance (the prompt
   manifest and each results manifest) is read here too.
2. `compute` (pure): for each registered probe (`analysis.probes`), the tables its analysis
   module computes (`analysis.probe_analysis`) from the rows of the `probe` values its spec
   reads, named as their CSV files will be, plus a refusal table for every config. A step whose
   rows lack what a metric needs gets a `problems` row, not a crash.
3. `draw` (pure): each probe's figures from those tables, for its report section.

`analysis.report` writes the result (CSV, parquet, PNG, report.html).

Which probe a row belongs to comes from the prompts' `probe` column, never from the config name
(`ProbeSpec.row_probes`). Rows of a value no probe reads (the trust game's `race_probe` rows, the
curation input) get their refusals reported, nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from promptgen.core.errors import ProbeError
from promptgen.core.probe_spec import SampleUnit
from promptgen.hub import remote
from promptgen.hub.remote import HubRef
from promptgen.probe_registry import probes
from runners.results import result_configs as stored_configs
from runners.results.summary import REFUSED_EXAMPLES, all_refused_advice, refused_answer

from .columns import (
    RESULT_FILE_COLUMN,
    RESULT_KEY_COLUMN,
    RUN_COLUMNS,
    SAMPLE_POPULATION_COLUMN,
    SAMPLE_SEED_COLUMN,
)
from .load import (
    hub_ref,
    join,
    load_prompts,
    load_prompts_manifest,
    load_results,
    load_results_manifest,
)
from .probe_analysis import AnalysisOptions
from .probes import probe_tables

#: prompt columns analysis never needs past the join (large texts), which checks the rows' prompt hashes
HEAVY_PROMPT_COLUMNS = ("prompt", "messages")


@dataclass(frozen=True)
class AnalysisRequest:
    """One `probes analyze`: prompts + result folders (+ where the report goes), built once and passed down.

    `options` left as None are the defaults; `configs` None is every config the results hold.
    `out` and `overwrite` are for the report writer (`analysis.report.analyze`); `analyze` here
    computes without writing.
    """

    prompts: str | Path
    results: Sequence[str | Path]
    out: str | Path | None = None
    options: AnalysisOptions = field(default_factory=AnalysisOptions)
    configs: Sequence[str] | None = None
    revision: str | None = None
    results_revision: str | None = None
    figures: bool = True
    allow_fingerprint_mismatch: bool = False
    overwrite: bool = False

    def __post_init__(self) -> None:
        if self.options is None:  # None is "the default", as the keyword arguments this request replaces took it
            object.__setattr__(self, "options", AnalysisOptions())


@dataclass
class Collected:
    """The joined rows per probe (one frame per config), and where they came from."""

    joined: dict[str, dict[str, pd.DataFrame]] = field(default_factory=dict)  # probe -> config -> rows
    provenance: dict[str, Any] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)
    #: results scored on other prompts than the ones given (only with allow_fingerprint_mismatch)
    warnings: list[str] = field(default_factory=list)


@dataclass
class Analysis:
    """Named tidy tables and named figures (name -> matplotlib Figure), ready to be written."""

    tables: dict[str, pd.DataFrame]
    figures: list[tuple[str, str, Any]]  # (section, name, Figure)
    provenance: dict[str, Any]
    options: AnalysisOptions
    problems: list[dict[str, str]]
    warnings: list[str] = field(default_factory=list)
    #: a line per config and run that refused every item (`all_refused_lines`), shown before any table
    refused_all: list[str] = field(default_factory=list)
    #: what the caller says about how the results were made (the demo: its scoring), shown first
    notes: list[str] = field(default_factory=list)


# ----------------------------------------------------------------------------- 1. collect


def portable_name(source: str | Path) -> str:
    """How a report names a prompt or results source: a local folder by its name, a Hub repo by its id.

    Reports are shared: they never carry a path of the machine they were made on.
    """
    folder = Path(source).expanduser()
    return folder.resolve().name if folder.exists() else str(source)


def result_configs(results: str | Path, ref: HubRef | None = None) -> list[str]:
    """The configs a results folder holds (`data/<config>/<key>/part-*.parquet`), or a Hub results repo's card
    lists at `ref`'s commit."""
    if ref is not None:
        return remote.config_names(ref, "results")
    folder = Path(results).expanduser()
    if not folder.is_dir():
        raise ProbeError(f"results folder {results} does not exist (nor is it a Hub repo id ORG/NAME)")
    configs = stored_configs(folder)
    if not configs:
        raise ProbeError(
            f"results folder {results} holds no result parts (expected data/<config>/<key>/part-*.parquet)"
        )
    return configs


def collect(
    prompts: str | Path,
    results: Sequence[str | Path],
    *,
    configs: Sequence[str] | None = None,
    revision: str | None = None,
    results_revision: str | None = None,
    allow_fingerprint_mismatch: bool = False,
    drop: Sequence[str] = HEAVY_PROMPT_COLUMNS,
    allow_flag: str | None = "--allow-fingerprint-mismatch",
) -> Collected:
    """Load and join every config of every results folder with its prompt rows.

    Results whose manifest records another prompt fingerprint than `prompts` have are refused
    (see `fingerprint_mismatches`), or with `allow_fingerprint_mismatch` kept with a warning;
    the refusal names `allow_flag`, the caller's flag for that (None: the caller has none).
    `drop` names the prompt columns left out of the joined rows (`probes export` keeps them all).
    """
    if not results:
        raise ProbeError("give at least one results folder")
    # a Hub id is read at one commit, resolved once: rows and manifests describe the same data
    prompt_ref = hub_ref(prompts, revision, "prompt dataset")
    refs = {str(r): hub_ref(r, results_revision, "results") for r in results}
    wanted: dict[str, list[str | Path]] = {}
    for r in results:
        for config in configs or result_configs(r, refs[str(r)]):
            wanted.setdefault(config, []).append(r)
    out = Collected()
    prompt_manifest = load_prompts_manifest(prompts, prompt_ref)
    out.provenance = {
        "prompts": {
            "path": portable_name(prompts),
            "revision": revision,
            "commit": prompt_ref.commit if prompt_ref else None,
            **{k: prompt_manifest.get(k) for k in ("name", "version", "fingerprint")},
            "recipe_sha256": prompt_manifest.get("recipe", {}).get("sha256"),
        },
        "results": [],
    }
    manifests = []
    for r in results:
        manifest = load_results_manifest(r, refs[str(r)])
        manifests.append(manifest)
        runs = [
            {
                "config": run.get("prompt_dataset", {}).get("config"),
                "prompt_fingerprint": run.get("prompt_dataset", {}).get("fingerprint"),
                **{k: run.get(k) for k in ("model", "model_revision", "backend", "dtype", "runner_version")},
                "scoring": json.dumps(run.get("scoring"), sort_keys=True),
                "items": run.get("items"),
                "finished_at": run.get("finished_at"),
            }
            for run in manifest.get("runs", {}).values()
        ]
        ref = refs[str(r)]
        commit = ref.commit if ref else None
        out.provenance["results"].append(
            {"path": portable_name(r), "revision": results_revision, "commit": commit, "runs": runs}
        )
    mismatches = fingerprint_mismatches(out.provenance, wanted)
    if mismatches and not allow_fingerprint_mismatch:
        advice = "give the prompts the results were scored on, or rerun the model on these prompts"
        if allow_flag:
            advice = advice.replace(", or rerun", ", rerun") + f", or pass {allow_flag} to analyse anyway"
        raise ProbeError(
            f"{mismatches[0]}{f' (and {len(mismatches) - 1} more)' if len(mismatches) > 1 else ''}; {advice}"
        )
    out.warnings.extend(mismatches)
    out.provenance["warnings"] = list(mismatches)
    for config, folders in sorted(wanted.items()):
        frames = [load_results(r, config, revision=_at(refs[str(r)], results_revision)) for r in folders]
        rows = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        if len(frames) > 1:
            dup = rows.duplicated([RESULT_KEY_COLUMN, "id"], keep=False)
            if dup.any():
                files = sorted(set(rows.loc[dup, RESULT_FILE_COLUMN].astype(str)))[:4]
                raise ProbeError(
                    f"config {config!r}: the same model run appears in several results folders ({', '.join(files)}); "
                    "pass each run once"
                )
        ids = rows["id"].drop_duplicates().tolist()
        prompt_rows = load_prompts(prompts, config, revision=_at(prompt_ref, revision), ids=ids)
        joined = join(prompt_rows, rows, drop=drop)  # texts read for the prompt_sha256 check only
        if joined.empty:
            out.skipped.append({"config": config, "reason": "no result rows"})
            continue
        for probe, part in joined.groupby("probe", sort=True):
            part = part.reset_index(drop=True)
            unit = sample_unit(str(probe), part.columns)
            if unit is not None:
                units = load_prompts(prompts, config, revision=_at(prompt_ref, revision), columns=unit.columns)
                part = with_sample(part, len(units.drop_duplicates()), sample_seeds(manifests, config))
            out.joined.setdefault(str(probe), {})[config] = part
    return out


def sample_unit(probe: str, columns: Sequence[str]) -> SampleUnit | None:
    """The unit a sample of a config of these rows draws (`ProbeSpec.sample_unit`); None: taken whole."""
    spec = next((s for s in probes().values() if probe in s.row_probes), None)
    return spec.sample_unit(columns) if spec is not None else None


def sample_seeds(manifests: Sequence[dict[str, Any]], config: str) -> dict[tuple[str, str, str], int]:
    """Per run of `config` whose manifest entry records its sample (`sample.seed`), that seed."""
    out = {}
    for manifest in manifests:
        for run in manifest.get("runs", {}).values():
            sample = run.get("sample")
            if run.get("prompt_dataset", {}).get("config") != config or not isinstance(sample, dict):
                continue
            if sample.get("seed") is not None:
                out[(str(run.get("model")), str(run.get("model_revision")), _canonical(run.get("scoring")))] = int(
                    sample["seed"]
                )
    return out


def _canonical(scoring: Any) -> str:
    """A scoring record as one string whatever its spacing: the rows' JSON text and the manifest's object agree."""
    if isinstance(scoring, str):
        try:
            scoring = json.loads(scoring)
        except ValueError:
            return scoring
    return json.dumps(scoring, sort_keys=True)


def with_sample(rows: pd.DataFrame, population: int, seeds: dict[tuple[str, str, str], int]) -> pd.DataFrame:
    """The rows with the config's population of units and each run's sample seed (NaN: none recorded) as columns."""
    runs = rows[list(RUN_COLUMNS)].drop_duplicates()
    seed_of = {
        tuple(map(str, run)): seeds.get((str(run[0]), str(run[1]), _canonical(run[2])))
        for run in runs.itertuples(index=False)
    }
    keys = zip(*(rows[c].astype(str) for c in RUN_COLUMNS), strict=True)
    seed = [seed_of.get(k) for k in keys]
    return rows.assign(**{SAMPLE_POPULATION_COLUMN: population, SAMPLE_SEED_COLUMN: pd.array(seed, dtype="Int64")})


def _at(ref: HubRef | None, revision: str | None) -> str | None:
    """The revision a loader reads: a Hub source's resolved commit, else what was given (None for a folder)."""
    return ref.commit if ref is not None else revision


def fingerprint_mismatches(provenance: dict[str, Any], wanted: dict[str, list[str | Path]]) -> list[str]:
    """One line per run (of an analysed config) scored on prompts with another fingerprint.

    Item ids are derived from an item's factors, not its text, so a rebuilt dataset with edited
    prompts or another option order keeps its ids and the join succeeds, silently pairing old
    answers with new prompts (the attribution means moved from -0.46 to -0.31 that way). The
    fingerprint in the results manifest is the only record of which prompts were scored; when
    either side has none (Hub prompts, an old manifest), nothing can be compared.
    """
    expected = provenance["prompts"].get("fingerprint")
    if not expected:
        return []
    out = []
    for folder in provenance["results"]:
        for run in folder["runs"]:
            got = run.get("prompt_fingerprint")
            config = run.get("config")
            if got and got != expected and any(portable_name(r) == folder["path"] for r in wanted.get(config, [])):
                out.append(
                    f"{Path(folder['path']) / 'results_manifest.json'}: config {config!r} of {run.get('model')} was "
                    f"scored on prompts with fingerprint {got[:12]}…, --prompts {provenance['prompts']['path']} has "
                    f"{expected[:12]}…"
                )
    return sorted(set(out))


# ----------------------------------------------------------------------------- 2. compute


def refusal_table(collected: Collected) -> pd.DataFrame:
    """Per config and run: items, refused items and their share (every probe, one table), and the
    first refused answers (`runners.results.summary.refused_answer`: the generated text, else the valid mass)."""
    rows = []
    for probe, by_config in collected.joined.items():
        for config, frame in by_config.items():
            for key, g in frame.groupby(list(RUN_COLUMNS), sort=False, dropna=False):
                refused = g["refused"].fillna(False).astype(bool)
                first_refused = g[refused.to_numpy()].head(REFUSED_EXAMPLES).to_dict("records")
                rows.append(
                    {
                        **dict(zip(RUN_COLUMNS, key, strict=True)),
                        "probe": probe,
                        "config": config,
                        "n_items": len(g),
                        "n_refused": int(refused.sum()),
                        "refusal_rate": float(refused.mean()),
                        "note": ALL_REFUSED if refused.all() else "",
                        "first_refused": " | ".join(map(refused_answer, first_refused)),
                    }
                )
    columns = [*RUN_COLUMNS, "probe", "config", "n_items", "n_refused", "refusal_rate", "note", "first_refused"]
    return pd.DataFrame(rows, columns=columns)


#: the refusal table's note for a run that refused every item of a config
ALL_REFUSED = "all items refused"


def all_refused_lines(refusals: pd.DataFrame) -> list[str]:
    """One line per config and run whose every item was refused: the report shows them first."""
    from .headlines import run_label

    return [
        f"{row.config} ({run_label(row.model, row.model_revision, row.scoring)}): "
        + all_refused_advice([a for a in str(row.first_refused).split(" | ") if a], json.loads(row.scoring))
        for row in refusals[refusals["note"] == ALL_REFUSED].itertuples(index=False)
    ]


def compute(collected: Collected, options: AnalysisOptions) -> tuple[dict[str, pd.DataFrame], list[dict[str, str]]]:
    """Every table the joined rows allow, and a problem row per analysis step that failed.

    Each registered probe's analysis (`analysis.probes`) gets the rows of the `probe` values its
    spec reads; rows of a value no probe reads get their refusals only.
    """
    tables: dict[str, pd.DataFrame] = {"refusals": refusal_table(collected)}
    problems = [{"probe": "", **s} for s in collected.skipped]
    j = collected.joined
    for spec, _, computed in probe_tables():
        rows = {probe: j[probe] for probe in spec.row_probes if probe in j}
        if not rows:
            continue
        for step in computed.steps(rows, options):
            try:
                tables.update(step.run())
            except (ProbeError, ValueError, KeyError) as exc:
                problems.append({"probe": step.name, "config": ", ".join(sorted(step.configs)), "reason": str(exc)})
    read = {probe for spec in probes().values() for probe in spec.row_probes}
    for probe in sorted(set(j) - read):
        problems.append(
            {"probe": probe, "config": ", ".join(sorted(j[probe])), "reason": "no metric defined; refusals only"}
        )
    return tables, problems


# ----------------------------------------------------------------------------- 3. draw


def draw(tables: dict[str, pd.DataFrame], options: AnalysisOptions) -> list[tuple[str, str, Any]]:
    """(section, file stem, Figure) for every figure the tables support, each probe's in its section."""
    return [
        (found.section, stem, figure)
        for _, found, computed in probe_tables()
        for stem, figure in computed.figures(tables, options)
    ]


def analyze(
    request: AnalysisRequest | str | Path, results: Sequence[str | Path] | None = None, **options: Any
) -> Analysis:
    """collect -> compute -> draw, for an `AnalysisRequest` or its fields (`analyze(prompts, results, options=...)`).

    The request's `out` and `overwrite` are the report's (`analysis.report.analyze`); nothing is written here.
    """
    if not isinstance(request, AnalysisRequest):
        request = AnalysisRequest(request, results, **options)  # type: ignore[arg-type]
    elif results is not None or options:
        raise TypeError("analyze() takes an AnalysisRequest or its fields, not both")
    collected = collect(
        request.prompts,
        request.results,
        configs=request.configs,
        revision=request.revision,
        results_revision=request.results_revision,
        allow_fingerprint_mismatch=request.allow_fingerprint_mismatch,
    )
    tables, problems = compute(collected, request.options)
    drawn = draw(tables, request.options) if request.figures else []
    refused_all = all_refused_lines(tables["refusals"])
    return Analysis(
        tables, drawn, collected.provenance, request.options, problems, list(collected.warnings), refused_all
    )
