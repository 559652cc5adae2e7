"""The option types several `probes` commands share, declared once so their flags and help texts agree.

Sources (`build`, `lint`, `curate-pairs`, `rewrite`, `demo`): where recipe inputs come from.
Model (`run`, `rewrite`, and `--chat` of `plan`): the flags of `runners.run.request.LoadOptions`
and the run options around it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from analysis.probe_options import analysis_flags
from promptgen.core.flags import DeclaredFlag
from promptgen.protocols import scoring_flags
from runners.backends import BACKENDS, DEFAULT_BACKEND, backend_flags
from runners.model.device import ITEMS_PER_CALL

from .groups import OptionGroup

Sources = Annotated[
    Path | None,
    typer.Option(
        "--sources",
        envvar="PROBES_SOURCES",
        help="Folder with the source files laid out as in the recipe's `path` fields "
        "(e.g. ../shared/sources). Nothing is downloaded when it is given.",
        file_okay=False,
    ),
]
Cache = Annotated[
    Path | None,
    typer.Option(
        "--cache-dir",
        envvar="PROBES_CACHE",
        help="Download cache for sources (default ~/.cache/social-bias-probes/sources).",
        file_okay=False,
    ),
]
Offline = Annotated[
    bool,
    typer.Option("--offline", envvar="PROBES_OFFLINE", help="Never download; use --sources or the cache only."),
]
Recipe = Annotated[
    str,
    typer.Argument(help="Dataset name (a recipe in builders/, e.g. talent-or-luck) or a path to a recipe YAML."),
]


# options of the commands that load a model and score or generate through the runners (`run`, `rewrite`)
Model = Annotated[str, typer.Option("--model", "-m", help="Model: a local transformers folder or a Hub id.")]
Backend = Annotated[
    str,
    typer.Option(
        "--backend",
        help="Scoring backend: " + "; ".join(f"{name}: {spec.summary}" for name, spec in BACKENDS.items()) + ".",
    ),
]
ModelName = Annotated[
    str | None,
    typer.Option(
        "--model-name",
        help="Portable name of the model in result rows, manifests, cards, reports and folder names "
        "(e.g. ORG/MODEL). Default: the Hub id; for a local folder, the Hub id its config.json records, "
        "else the folder's name. Never part of the result key, which is the model's content.",
    ),
]
Limit = Annotated[int | None, typer.Option("--limit", min=1, help="Only the first N items (of the shard).")]
SampleSize = Annotated[
    int | None,
    typer.Option(
        "--sample",
        help="Score a seeded sample of N units per config (empathy: events, stratified by emotion; Talent-or-Luck: "
        "templates), every row of each; the Trust Game is taken whole. Nested: a larger N of the same seed holds a "
        "smaller one and resumes it; every model gets the same units. Recorded in the manifest and card, not the key.",
        metavar="N",
    ),
]
SampleSeed = Annotated[
    int,
    typer.Option("--sample-seed", help="Seed of the --sample order (the same seed: the same units).", metavar="S"),
]


def budget_hours(help: str) -> Any:
    """`--budget-hours H` (run, sweep, plan): one flag, one type and metavar; each command says what it fits in H."""
    return typer.Option("--budget-hours", metavar="H", help=help)


BudgetGpu = Annotated[
    str, typer.Option("--gpu", help="--budget-hours: the GPU priced (h100, h200, a100, a6000 or l40s).")
]
Chat = Annotated[
    bool | None,
    typer.Option("--chat/--no-chat", help="Use the chat template (default: when the tokenizer has one)."),
]
BatchSize = Annotated[
    int | None,
    typer.Option(
        "--batch-size",
        "--items-per-call",
        min=1,
        help=f"Items per backend call (default {ITEMS_PER_CALL['cuda']} when the model runs on CUDA, "
        f"{ITEMS_PER_CALL['cpu']} on the CPU).",
    ),
]
RescoreChanged = Annotated[
    bool,
    typer.Option(
        "--rescore-changed",
        help="The --out folder holds rows scored on another build of a config's prompts: go on, checking every "
        "stored item the run selects and rescoring those whose prompt changed (without it such a run is refused; "
        "publish refuses a folder whose rows were not all checked against one build).",
    ),
]
FlushEvery = Annotated[
    int, typer.Option("--flush-every", min=1, help="Write a result part every N items (resume granularity).")
]
Dtype = Annotated[
    str,
    typer.Option(
        "--dtype",
        help="Weights dtype: auto (the checkpoint's own, e.g. bfloat16; float32 when it states none), "
        "float32, bfloat16, float16, or bnb-4bit (the Talent-or-Luck release's load: bitsandbytes 4-bit weights, "
        "float16 compute; --backend hf on a CUDA GPU with bitsandbytes installed). Part of the result key.",
    ),
]
Device = Annotated[
    str,
    typer.Option(
        "--device",
        help="Device: auto (cuda when a GPU is visible, else cpu, with a warning for a GPU-sized model), cpu, "
        "cuda, cuda:1 (hf backend; vllm runs where it is installed for, and takes its memory default from this).",
    ),
]
ModelRevision = Annotated[
    str | None,
    typer.Option(
        "--model-revision",
        help="Hub model: branch, tag or commit to load (default main). It is resolved to its commit, which keys the "
        "results and is what loads; a full 40-hex commit needs no lookup.",
    ),
]
MaxNewTokens = Annotated[int, typer.Option("--max-new-tokens", min=1, help="generate: most tokens generated per item.")]


Revision = Annotated[str | None, typer.Option("--revision", help="Prompt dataset revision (Hub).")]
# what `analyze` and `export` read of a results folder
ResultConfigs = Annotated[
    list[str] | None,
    typer.Option("--config", help="Only these configs (repeatable; needed for Hub results). Default: all found."),
]
ResultsRevision = Annotated[str | None, typer.Option("--results-revision", help="Results revision (Hub results).")]
QuietRun = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
Where = Annotated[
    list[str] | None,
    typer.Option(
        "--where",
        metavar="COLUMN=V1,V2",
        help="Score only the rows whose COLUMN holds one of the values (repeatable; all must hold). "
        "Default: the rows the dataset's protocol names (e.g. the Trust Game's plain-text variants).",
    ),
]


# output folders: one flag each for what the commands that write a dataset, a report or an export replace
OverwriteDataset = Annotated[
    bool, typer.Option("--overwrite", help="Replace an existing OUT/<name> (swapped in only when complete).")
]
OverwriteOutput = Annotated[
    bool,
    typer.Option(
        "--overwrite", help="Replace --out if it is this command's earlier output (nothing else is replaced)."
    ),
]
# what `curate-pairs` and `rewrite` derive a new dataset version from, and where they write it
VersionOut = Annotated[
    str, typer.Option("--out", help="Parent folder; the new dataset version is written to OUT/<name>/.", metavar="DIR")
]
ResultKey = Annotated[
    str | None, typer.Option("--key", help="Result key folder (<model>-<hash>) to use when the results hold several.")
]
BuiltFrom = Annotated[
    str, typer.Option("--recipe", help="Recipe the scored dataset was built from (name or YAML path); rebuilt from it.")
]
Shard = Annotated[
    str | None,
    typer.Option("--shard", help="i/n: score the i-th of n shards of each config (split by a hash of the item id)."),
]


def _source_options(sources: Path | None, cache_dir: Path | None, offline: bool) -> Any:
    from promptgen.sources import SourceOptions

    return SourceOptions(sources, cache_dir, offline)


def _load_options(**flags: Any) -> Any:
    from runners.backends.load import LoadOptions

    flags["revision"] = flags.pop("model_revision")
    flags["backend"] = flags.pop("backend_name")
    return LoadOptions.of(**flags)  # a backend's flag not given is None: its default


def not_given(**flags: Any) -> dict[str, tuple[Any, None]]:
    """Flags whose default is "not given" (None), so the library decides: the dataset's protocol, the backend."""
    return {name: (annotation, None) for name, annotation in flags.items()}


def declared_flag(declared: list[DeclaredFlag], owners: str = "{} backend") -> Any:
    """One flag of the options the registries declare (`promptgen.core.flags`), "not given" by default.

    Its type, bounds and help come from the first owner declaring it; `--help` names the owners that
    take it (`owners` formats their names: the backends, the probes) and the default, which the owner's
    options class applies when the flag is not given.
    """
    first = declared[0]
    named = owners.format(" and ".join(flag.owner for flag in declared))
    default = first.default
    if first.kind is bool:  # a switch shows the side that is on by default, as typer does
        default = first.declaration.split("/")[0].removeprefix("--") if default else None
    shown: bool | str = str(default) if default is not None else False
    option = typer.Option(first.declaration, help=f"{named}: {first.help}", show_default=shown, **first.limits)
    return Annotated[first.kind | None, option]


def scoring_flag(flag: DeclaredFlag) -> Any:
    """One scoring flag of `probes run` (`promptgen.protocols.ScoringFlags`): "not given" by default, the dataset's
    protocol deciding."""
    return Annotated[flag.kind | None, typer.Option(flag.declaration, help=flag.help, **flag.limits)]


def _analysis_options(**flags: Any) -> Any:
    from analysis.probe_analysis import AnalysisOptions

    return AnalysisOptions.from_flags(**flags)  # a probe's flag not given is None: its default


def _given_scoring(**flags: Any) -> dict[str, Any] | None:
    """The scoring flags the user gave (not None), for `resolve_scoring` to lay over the dataset's protocol."""
    given = {name: value for name, value in flags.items() if value is not None}
    return given or None


#: where recipe inputs come from: `promptgen.sources.SourceOptions` (build, lint, curate-pairs, rewrite, demo)
SOURCES = OptionGroup(
    "sources", _source_options, {"sources": (Sources, None), "cache_dir": (Cache, None), "offline": (Offline, False)}
)
#: how a model loads: `runners.backends.load.LoadOptions` (run, rewrite, sweep); the backends' flags from the registry
LOAD = OptionGroup(
    "load",
    _load_options,
    {
        "backend_name": (Backend, DEFAULT_BACKEND),
        "dtype": (Dtype, "auto"),
        "device": (Device, "auto"),
        "model_revision": (ModelRevision, None),
        # each backend's own flags, as its spec declares them (`BackendSpec.options`)
        **not_given(**{name: declared_flag(declared) for name, declared in backend_flags().items()}),
    },
)
#: how each config is run, the same for `run` and `sweep`: `RunRequest` fields, by name
RUN = OptionGroup(
    "run_fields",
    dict,
    {
        "model_name": (ModelName, None),
        "chat": (Chat, None),
        "shard": (Shard, None),
        "batch_size": (BatchSize, None),
        "flush_every": (FlushEvery, 64),
        "rescore_changed": (RescoreChanged, False),
    },
)
#: the scoring flags given, laid over the dataset's protocol (run); None when none is given
SCORING = OptionGroup(
    "scoring",
    _given_scoring,
    # declared once, with their help texts (`promptgen.protocols.ScoringFlags`); None is "not given"
    not_given(**{flag.name: scoring_flag(flag) for flag in scoring_flags()}),
)
#: what `probes analyze` computes with: `analysis.probe_analysis.AnalysisOptions`; each probe's own flags from the
#: registry (`ProbeAnalysis.options`)
ANALYSIS = OptionGroup(
    "options",
    _analysis_options,
    {
        "seed": (Annotated[int, typer.Option("--seed", help="Seed of the permutation test and the t-SNE layout.")], 0),
        "score": (
            Annotated[
                str,
                typer.Option(
                    "--score",
                    help="Number items' answer: auto (expected value when the run read distributions, else the "
                    "parsed generated number), expected_value, argmax_value or parsed_value.",
                ),
            ],
            "auto",
        ),
        "alpha": (
            Annotated[float, typer.Option("--alpha", min=0.0, max=1.0, help="Significance level of the masks.")],
            0.05,
        ),
        # each probe's own flags, as its spec declares them
        **not_given(**{name: declared_flag(declared, "{}") for name, declared in analysis_flags().items()}),
    },
)
