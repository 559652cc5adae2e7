"""`probes analyze`: a prompt dataset + result folders -> every table and figure of the papers.

Three steps, one job each, so a notebook can stop after any of them:

1. `collect` (I/O): which configs the result folders hold, their rows (all folders of one
   config together: several models are one frame, told apart by the run columns), the prompt
   rows of those configs, and the join by `id` (`analysis.load`). Provenance (the prompt
   manifest and each results manifest) is read here too.
2. `compute` (pure): per probe, the tables of `analysis.attribution`, `analysis.empathy` and
   `analysis.trust_game`, named as their CSV files will be, plus a refusal table for every
   config. A probe whose joined rows lack what a metric needs gets a `problems` row, not a crash.
3. `draw` (pure): figures from those tables (`analysis.plots`).

`analysis.report` writes the result (CSV, parquet, PNG, report.html).

Which probe a config belongs to comes from the prompts' `probe` column, never from the
config name: `attribution` (configs single_actor, actor_actor, actor_observer; the
`*_release` configs, the release's exact items, get the release's own metrics instead,
`analysis.attribution_release`, and never reach the designed tables), `empathy`
(the `{category}_{setting}` number configs; the free-text `rewrite_t2` config is not a
measurement and is skipped), `trust_game` and `probing` (rows of the `games_*` configs), and
`race_probe` (the curation input: its refusals are reported, nothing else).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from promptgen.core.errors import ProbeError
from promptgen.hub import remote
from promptgen.hub.remote import HubRef
from runners.results import result_configs as stored_configs
from runners.summary import REFUSED_EXAMPLES, all_refused_advice, refused_answer

from . import attribution as attr
from . import attribution_release as attr_release
from . import attribution_release_deltas as attr_release_deltas
from . import empathy as emp
from . import empathy_paper as emp_paper
from . import trust_game as tg
from .columns import RESULT_FILE_COLUMN, RESULT_KEY_COLUMN, RUN_COLUMNS
from .load import (
    hub_ref,
    join,
    load_prompts,
    load_prompts_manifest,
    load_results,
    load_results_manifest,
)

#: prompt columns analysis never needs past the join (large texts), which checks the rows' prompt hashes
HEAVY_PROMPT_COLUMNS = ("prompt", "messages")
#: score used for number items: the expected value of the distribution when the run read one,
#: else the number parsed from generated text
AUTO_SCORE = "auto"


@dataclass(frozen=True)
class AnalysisOptions:
    """What the analysis computes with; recorded in the report."""

    seed: int = 0
    n_permutations: int = 10_000
    #: number items: auto | expected_value | argmax_value | parsed_value
    score: str = AUTO_SCORE
    alpha: float = 0.05
    #: the `*_release` tables: round each probability (and actor-actor Δ) to 2 decimals as the release did
    release_rounding: bool = False

    def __post_init__(self) -> None:
        if self.score not in (AUTO_SCORE, *emp.SCORES):
            raise ProbeError(f"--score must be one of {', '.join((AUTO_SCORE, *emp.SCORES))}, got {self.score!r}")


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
    for r in results:
        manifest = load_results_manifest(r, refs[str(r)])
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
        commit = refs[str(r)].commit if refs[str(r)] else None
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
            out.joined.setdefault(str(probe), {})[config] = part.reset_index(drop=True)
    return out


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
    first refused answers (`runners.summary.refused_answer`: the generated text, else the valid mass)."""
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


def number_score(frame: pd.DataFrame, score: str) -> str:
    """The column that holds a number item's answer for this run: `auto` picks the expected
    value where the run read distributions, else the parsed generated number."""
    if score != AUTO_SCORE:
        return score
    if "expected_value" in frame.columns and frame["expected_value"].notna().any():
        return "expected_value"
    return "parsed_value"


def _per_run(frame: pd.DataFrame, fn) -> pd.DataFrame:
    """`fn(run rows)` per run, concatenated: each run may need its own answer column."""
    parts = [fn(g) for _, g in frame.groupby(list(RUN_COLUMNS), sort=False, dropna=False)]
    parts = [p for p in parts if p is not None and not p.empty]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def attribution_analysis(by_config: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """Single-actor d, Δd, Δd_pair, Δd1/Δd2 with SMD, shares (`analysis.attribution`) of the designed configs."""
    by_config = designed_configs(by_config)
    single = by_config.get("single_actor")
    if single is None:
        raise ProbeError("attribution: the single-actor results are needed (every comparison is against them)")
    tables = attr.attribution_tables(single, by_config.get("actor_actor"), by_config.get("actor_observer"))
    return {f"attribution_{name}": table for name, table in tables.items()}


def designed_configs(by_config: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The attribution configs of the design: every one but the `*_release` ones (their columns differ)."""
    return {c: f for c, f in by_config.items() if not attr_release.is_release_config(c)}


def attribution_release_analysis(
    by_config: dict[str, pd.DataFrame], options: AnalysisOptions
) -> dict[str, pd.DataFrame]:
    """The release's own metrics of the `*_release` configs, and the paper's Δd / SMD on them
    (`analysis.attribution_release`, `analysis.attribution_release_deltas`)."""
    release = {c: f for c, f in by_config.items() if attr_release.is_release_config(c)}
    rows = attr_release.rows_by_config(release, rounding=options.release_rounding)
    tables = {**attr_release.tables_of_rows(rows), **attr_release_deltas.paper_tables(rows)}
    return {f"attribution_{name}": table for name, table in tables.items()}


#: docs/DESIGN.md section 6: statistics with refused items left out (the papers' numbers) and kept
#: (their renormalised answer used anyway), named as attribution's `refused_items` column
REFUSAL_VARIANTS: tuple[tuple[str, bool], ...] = (("excluded", False), ("included", True))


def _variant_tables(build) -> dict[str, pd.DataFrame]:
    """`build(keep_refused)` -> {name: table} for both variants, stacked with `refused_items` first."""
    out: dict[str, list[pd.DataFrame]] = {}
    for label, keep in REFUSAL_VARIANTS:
        for name, table in build(keep).items():
            out.setdefault(name, []).append(table.assign(refused_items=label))
    return {
        name: (lambda t: t[["refused_items", *[c for c in t.columns if c != "refused_items"]]])(
            pd.concat(parts, ignore_index=True)
        )
        for name, parts in out.items()
    }


def empathy_analysis(by_config: dict[str, pd.DataFrame], options: AnalysisOptions) -> dict[str, pd.DataFrame]:
    """M0, M, δ with the permutation test, per-cell tests, summaries, refusals (`analysis.empathy`, the
    project's choices), and the paper's tables by the authors' notebook (`analysis.empathy_paper`:
    `empathy_paper_*`), all from the intensity `number_score` picks for each run."""
    frames = [f for f in by_config.values() if (f["task"] == "number").all()]
    if not frames:
        return {}
    joined = pd.concat(frames, ignore_index=True)

    def build(keep: bool) -> dict[str, pd.DataFrame]:
        def intensity(g: pd.DataFrame) -> pd.DataFrame:
            return emp.intensity_frame(g, score=number_score(g, options.score), keep_refused=keep)

        frame = _per_run(joined, intensity)
        cells = emp.compute_cells(frame)
        return {
            "empathy_cells": cells,
            "empathy_gap": emp.compute_gap(cells, n_permutations=options.n_permutations, seed=options.seed),
            "empathy_cell_tests": emp.cell_tests(frame, alpha=options.alpha),
            "empathy_matrix_summary": emp.matrix_summary(cells),
            "empathy_identity_summary": emp.identity_summary(cells),
        }

    tables = _variant_tables(build)
    exclude = _per_run(joined, lambda g: emp.intensity_frame(g, score=number_score(g, options.score)))
    # the paper's own numbers, by its notebook's rules (`analysis.empathy_paper`): its exclusion of a
    # refused event from every cell replaces the variants above, so these are computed once
    paper = {
        "empathy_paper_gap": emp_paper.paper_gap(exclude, n_permutations=options.n_permutations, seed=options.seed),
        "empathy_paper_matrix": emp_paper.paper_matrix(exclude),
        "empathy_paper_cells": emp_paper.paper_mask(exclude),
    }
    return {**tables, "empathy_refusals": emp.refusal_rates(exclude), **paper}


def trust_game_analysis(
    games: dict[str, pd.DataFrame], probing: dict[str, pd.DataFrame], options: AnalysisOptions
) -> dict[str, pd.DataFrame]:
    """Type III ANOVA, post hoc gender t-tests with Cohen's d, cell means, probing accuracy."""
    out: dict[str, pd.DataFrame] = {}
    if games:
        joined = pd.concat(list(games.values()), ignore_index=True)

        def build(keep: bool) -> dict[str, pd.DataFrame]:
            def prediction(g: pd.DataFrame) -> pd.DataFrame:
                return tg.prediction_frame(g, score=number_score(g, options.score), keep_refused=keep)

            frame = _per_run(joined, prediction)
            return {
                "trust_game_anova": tg.anova(frame),
                "trust_game_posthoc": tg.gender_posthoc(frame),
                "trust_game_cell_means": tg.cell_means(frame),
            }

        out.update(_variant_tables(build))
    if probing:
        joined = pd.concat(list(probing.values()), ignore_index=True)

        def accuracy(g: pd.DataFrame) -> pd.DataFrame:
            answer = "argmax_value" if number_score(g, options.score) != "parsed_value" else "parsed_value"
            return tg.probing_accuracy(g, answer=answer)

        out["trust_game_probing_accuracy"] = _per_run(joined, accuracy)
    return out


def compute(collected: Collected, options: AnalysisOptions) -> tuple[dict[str, pd.DataFrame], list[dict[str, str]]]:
    """Every table the joined rows allow, and a problem row per probe that could not be analysed."""
    tables: dict[str, pd.DataFrame] = {"refusals": refusal_table(collected)}
    problems = [{"probe": "", **s} for s in collected.skipped]
    j = collected.joined
    steps = {
        "attribution": lambda: attribution_analysis(j["attribution"]),
        "attribution_release": lambda: attribution_release_analysis(j["attribution"], options),
        "empathy": lambda: empathy_analysis(j["empathy"], options),
        "trust_game": lambda: trust_game_analysis(j.get("trust_game", {}), j.get("probing", {}), options),
    }
    attribution = set(j.get("attribution", {}))
    present = set(j) - ({"attribution"} if attribution and not designed_configs(j["attribution"]) else set())
    present |= {"trust_game"} if "probing" in j else set()
    present |= {"attribution_release"} if any(map(attr_release.is_release_config, attribution)) else set()
    for probe, step in steps.items():
        if probe not in present:
            continue
        try:
            tables.update(step())
        except (ProbeError, ValueError, KeyError) as exc:
            configs = j.get(probe.removesuffix("_release"), {})
            problems.append({"probe": probe, "config": ", ".join(sorted(configs)), "reason": str(exc)})
    for probe in sorted(set(j) - {"attribution", "empathy", "trust_game", "probing"}):
        problems.append(
            {"probe": probe, "config": ", ".join(sorted(j[probe])), "reason": "no metric defined; refusals only"}
        )
    return tables, problems


# ----------------------------------------------------------------------------- 3. draw


def draw(tables: dict[str, pd.DataFrame], options: AnalysisOptions) -> list[tuple[str, str, Any]]:
    """(section, file stem, Figure) for every figure the tables support."""
    from . import plots as fig

    out: list[tuple[str, str, Any]] = []

    def add(section: str, prefix: str, items: list[tuple[str, Any]]) -> None:
        out.extend((section, f"{prefix}_{name}", figure) for name, figure in items)

    if _rows(tables, "attribution_single_actor"):
        add("Attribution", "attribution_d", fig.attribution_heatmaps(tables["attribution_single_actor"]))
    if _rows(tables, "attribution_single_actor_by_domain"):
        add(
            "Attribution",
            "attribution_domain",
            fig.attribution_domain_heatmap(tables["attribution_single_actor_by_domain"]),
        )
    shares = [t for name, t in tables.items() if name.startswith("attribution_shares_") and not t.empty]
    if shares:
        out.append(
            ("Attribution", "attribution_shares", fig.attribution_shares_bar(pd.concat(shares, ignore_index=True)))
        )
    if _rows(tables, "empathy_cells"):
        cells, tests = figure_variant(
            tables["empathy_cells"], tables.get("empathy_cell_tests"), "m", keys=list(emp.GROUP_KEYS), mark="setting"
        )
        add("Empathy", "empathy_m", fig.empathy_heatmaps(cells, tests))
        add("Empathy", "empathy_tsne", fig.tsne_nationality(cells, seed=options.seed))
    if _rows(tables, "empathy_paper_cells"):
        add("Empathy", "empathy_paper_m", fig.empathy_paper_heatmaps(tables["empathy_paper_cells"]))
    if _rows(tables, "trust_game_cell_means"):
        means, _ = figure_variant(
            tables["trust_game_cell_means"], None, "mean", keys=list(tg.UNIT_KEYS), mark="variant"
        )
        add("Trust Game", "trust_game_interaction", fig.trust_interaction_plots(means))
    return out


def figure_variant(
    table: pd.DataFrame, companion: pd.DataFrame | None, value: str, *, keys: list[str], mark: str
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The rows a figure shows: refused items left out (the papers' numbers), except for a matrix
    with no value at all that way (a model that refuses every item), which is drawn from the
    `included` variant with its `mark` column (setting, variant) suffixed `(refused kept)`, so the
    figure says what it shows. `keys` name one figure's rows; `companion` (e.g. the cell tests of
    the same matrices) follows the same choice."""
    if "refused_items" not in table.columns:
        return table, companion
    keys = [k for k in keys if k in table.columns]
    excluded = table[table["refused_items"] == "excluded"]
    answered = excluded.groupby(keys, dropna=False)[value].apply(lambda v: v.notna().any())
    empty = {k if isinstance(k, tuple) else (k,) for k, ok in answered.items() if not ok}

    def choose(frame: pd.DataFrame | None) -> pd.DataFrame | None:
        if frame is None or "refused_items" not in frame.columns:
            return frame
        kept = np.array([k in empty for k in zip(*(frame[c] for c in keys), strict=True)], dtype=bool)
        chosen = frame["refused_items"].to_numpy() == np.where(kept, "included", "excluded")
        rows = frame[chosen].drop(columns="refused_items").reset_index(drop=True)
        marked = kept[chosen]
        rows[mark] = np.where(marked, rows[mark].astype(str) + " (refused kept)", rows[mark])
        return rows

    return choose(table), choose(companion)


def _rows(tables: dict[str, pd.DataFrame], name: str) -> bool:
    table = tables.get(name)
    return table is not None and not table.empty


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
