"""Load and check one config of a prompt dataset (docs/DESIGN.md section 7, step 1), before any model loads.

`load_prompt_config` is how a run reads a prompt config (`runners.run.runner.resolve_protocol`, for
`probes run`, the sweep, the demo and `probes rewrite`), and `probes import` the prompts it
answers: a local Hub-ready folder or a Hub repo id, loaded with `datasets` and checked against
the item contract. The checks that need the tokenizer's choice of prompt form or scoring mode
(`check_chat_form`, `check_number_mode`) run once it is known, still before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from promptgen.core.contract import EMPTY_CONFIG, arrow_table, check_prompt_config, check_prompt_forms
from promptgen.core.errors import ProbeError, dataset_load_errors
from promptgen.core.layout import BUILD_MANIFEST
from promptgen.core.memory import release_memory
from promptgen.hub import remote
from promptgen.hub.folder import check_path_segment
from promptgen.hub.read import (
    check_data_files,
    config_data_files,
    config_files,
    config_schema,
    has_build_manifest,
    local_folder,
    local_source,
    parquet_errors,
    read_build_manifest,
    read_card_header,
    read_config_positions,
    read_parquet,
)
from promptgen.protocols import Protocol, manifest_protocol
from runners.results.resume import PromptContent, files_digest, hub_content, local_content
from runners.rows import prepare_request
from runners.scoring.settings import ScoringSettings
from runners.selection.sample import limit_warning as sample_limit_warning
from runners.selection.sample import unit_columns
from runners.selection.select import Selected, Selection, select_rows


@dataclass
class PromptConfig:
    """One config of a prompt dataset, loaded and checked."""

    dataset: Any  # datasets.Dataset
    path: str
    config: str
    revision: str | None
    fingerprint: str | None
    license: str
    #: the dataset's name and version from its build manifest (None when it has none)
    name: str | None = None
    version: str | None = None
    #: the Hub repo id it was loaded from (None for a local folder)
    repo_id: str | None = None
    #: the scoring its paper used, as the build manifest declares it (None: none declared)
    protocol: Protocol | None = None
    #: what its rows are, checked as it loaded (None: unknown); a resumed run trusts rows scored on it
    content: PromptContent | None = None
    #: a Hub dataset: the commit its revision resolved to, which every file was read at (None: local)
    commit: str | None = None
    #: a local config: the digest of its data files' bytes (`resume.files_digest`), its identity without a
    #: fingerprint (`runners.results.check.prompt_identity`); None: a Hub dataset (its commit names it)
    data_sha256: str | None = None
    #: the sample its rows are (`runners.selection.sample.SampleDraw.record`), for the run's manifest entry; None: no
    #: sample
    sample: dict[str, Any] | None = None
    #: the selection its rows already are (`select_prompts`, or a narrowed load); None: the whole config
    selection: Selection | None = None

    def provenance(self) -> dict[str, Any]:
        """How a results manifest names its prompts: by name, version, fingerprint, Hub repo and commit, never a
        local path. `revision` is the one asked (None: `main`), `commit` what it was when the rows were read."""
        return {
            "name": self.name or Path(self.path).name,
            "version": self.version,
            "config": self.config,
            "fingerprint": self.fingerprint,
            "repo_id": self.repo_id,
            "revision": self.revision,
            "commit": self.commit,
            "data_sha256": self.data_sha256,
        }

    @property
    def no_protocol_reason(self) -> str:
        """Why a Hub dataset declares no protocol (its commit has no build_manifest.json); "" otherwise."""
        if self.protocol is None and self.repo_id and self.fingerprint is None and self.commit:
            return f"{self.repo_id}@{self.commit[:12]} has no {BUILD_MANIFEST}"
        return ""


def _own_features(folder: Path, config: str) -> Any:
    """The column types of a local config, from its first parquet file (None when it has none).

    `datasets` keys its cache of a local folder by the folder's name and card, and a builder
    takes its features from an existing cache entry, even with `force_redownload`: a second
    folder of the same name (or a rebuild) with other columns or types then fails to cast, or
    is cast silently to the old types. Given the folder's own features, the cache entry is
    keyed by them as well.
    """
    import datasets

    schema = config_schema(folder, config, "prompt config")
    return None if schema is None else datasets.Features.from_arrow_schema(schema)


def _selected_table(folder: Path, config: str, rows: Selection, what: str, total: int) -> Any:
    """The Arrow rows `rows` keeps of a local config (`select_rows`), reading no more of it than the selection needs.

    The `where` columns (and the ids, for a shard) are read one parquet file at a time, in order, and
    the reading stops once `limit` rows are kept; then only the row groups holding them are read.
    Without `where` or a shard, the first `limit` rows are chosen from the files' row counts alone.
    """
    columns = rows.columns()
    files = config_files(folder, config, required=True)
    chosen = select_rows((read_parquet(path, columns, "prompt config") for path in files), rows, what).rows
    if not chosen and rows.shard[1] > 1:
        i, n = rows.shard
        raise ProbeError(f"{what}: shard {i}/{n} selects none of its {total} rows; use fewer shards (--shard i/n)")
    return read_config_positions(folder, config, list(chosen))


def _in_memory(table: Any, features: Any) -> Any:
    """A `datasets.Dataset` over an Arrow table already in memory: no cache file is written."""
    import datasets
    from datasets.table import InMemoryTable

    if features is not None:
        table = table.select(list(features)).cast(features.arrow_schema)
    return datasets.Dataset(InMemoryTable(table), info=datasets.DatasetInfo(features=features))


def hub_ref(dataset: str, revision: str | None) -> remote.HubRef | None:
    """A Hub dataset's revision resolved to its commit (`promptgen.hub.remote.resolve`); None for a local folder.

    A run of several configs resolves once and reads every config at that commit.
    """
    if local_folder(dataset, "prompt dataset") is not None:
        return None
    return remote.resolve(dataset, revision)


def load_prompt_config(
    dataset: str,
    config: str,
    *,
    revision: str | None = None,
    ref: remote.HubRef | None = None,
    rows: Selection | None = None,
) -> PromptConfig:
    """Load `config` (split `test`) of a local Hub-ready folder or Hub dataset and check it.

    Checked before any model loads: the config name is one path segment (it names the result
    folder `data/<config>/`), a local folder's data files of the config are the ones its
    build_manifest.json lists (`check_data_files`; a Hub dataset's too, once downloaded), and
    the rows keep the item contract with either prompt form (`check_prompt_config`; the form a
    run reads is checked once it is decided, `check_chat_form`). A Hub dataset is read at one
    commit (`ref`, else `revision` resolved here): rows, build manifest and card.
    `rows`: the run's selection (its `where` None is the protocol's, `Selection.under`); with a shard or a
    limit and no sample (`Selection.narrows`), a local config holds only the rows it keeps, read from a few
    columns: a 4-item run of a 2.97 M-row config never converts the whole config.
    """
    check_path_segment(config, "config name (--config)")
    found = local_source(dataset, "prompt dataset", revision)
    local = found is not None
    folder = found if found is not None else Path(dataset)
    built: dict[str, Any] = {}
    files: dict[str, Any] = {}
    if local and has_build_manifest(folder):  # before the (costly) load: the files are the listed ones
        built = read_build_manifest(folder)
        files = config_data_files(folder, config)
        check_data_files(folder, built, files, config=config)
    if not local:  # one commit for everything read; its manifest before the (costly) load
        ref = ref or remote.resolve(dataset, revision)
        built = remote.read_build_manifest(ref) or {}
        if built:  # the downloaded files are the listed ones, as a local folder's are
            fix = "publish the build again (`probes publish`), or pass --revision with a commit that matches"
            check_data_files(ref.label, built, remote.config_data_files(ref, config, built), config=config, fix=fix)
    where = f"{dataset}/{BUILD_MANIFEST}" if ref is None else f"{ref.label}/{BUILD_MANIFEST}"
    protocol = manifest_protocol(built, config, where)
    total = None
    what = f"{dataset} config {config!r}"
    if local:
        import pyarrow.parquet as pq

        total = 0
        for path in config_files(folder, config, required=True):
            with parquet_errors(path, "prompt config"):
                total += pq.read_metadata(path).num_rows
        if total == 0:  # before `datasets`, whose error for it names a batch size
            raise ProbeError(f"{what}: {EMPTY_CONFIG}")
    narrowed = rows.under(protocol) if local and rows is not None and rows.narrows else None
    if narrowed is not None:
        assert total is not None  # a local folder: its rows counted above
        ds = _in_memory(_selected_table(folder, config, narrowed, what, total), _own_features(folder, config))
    else:
        ds = _load(dataset, config, folder if local else None, ref, revision)
    if local and not files:  # no build manifest: hashed all the same, they name the build (`data_sha256`)
        files = config_data_files(folder, config)
    header = read_card_header(folder) if ref is None else remote.read_card_header(ref)
    license = header.get("license", "other")
    check_prompt_config(ds, f"{dataset} config {config!r}")
    if ref is None:
        assert total is not None  # no ref: a local folder (a Hub dataset's is resolved above), its rows counted
        content = local_content(config, files, built, total)
    else:
        content = hub_content(dataset, ref.commit, config, len(ds))
    return PromptConfig(
        ds,
        dataset,
        config,
        revision,
        built.get("fingerprint"),
        str(license),
        name=built.get("name") or (folder.resolve().name if local else dataset.split("/")[-1]),
        version=built.get("version"),
        repo_id=None if local else dataset,
        protocol=protocol,
        content=content,
        commit=ref.commit if ref is not None else None,
        data_sha256=files_digest(config, files) if local and files else None,
        selection=narrowed,
    )


#: rows of each record batch of a config's Arrow cache (`datasets`' default: 1,000). A read of a few columns of
#: every row touches each batch, and the kernel maps 64 KB around each page it touches in a memory-mapped file:
#: with batches of 1,000 rows, opening a 2.2 M-row config left 140 MB resident, reading one int32 column 150 MB
ARROW_BATCH_ROWS = 10_000


def _load(dataset: str, config: str, folder: Path | None, ref: remote.HubRef | None, revision: str | None) -> Any:
    """The whole config as a `datasets.Dataset`: a local folder (`folder`) re-read, a Hub one at its commit."""
    import datasets
    from datasets.utils.info_utils import is_small_dataset

    local = folder is not None
    try:
        # datasets 4 keys its cache of a local folder by name, not content: a rebuilt folder
        # would give the old rows, so a local folder is always re-read
        mode = "force_redownload" if local else None
        # and its split sizes are checked against that cache: a local folder is verified by the
        # item contract below instead (datasets' NonMatchingSplitsSizesError named no fix)
        checks = {"verification_mode": "no_checks"} if local else {}
        if folder is not None:  # and it takes the features of that cache too: give it the folder's own
            checks["features"] = _own_features(folder, config)
        at = ref.commit if ref is not None else revision
        # `datasets.load_dataset`'s own steps, with the memory the conversion to Arrow used given back before the
        # converted files are opened, and the pages opening them read (`promptgen.core.memory`) after
        verify = checks.pop("verification_mode", None)
        builder = datasets.load_dataset_builder(
            str(folder) if local else dataset,
            config,
            revision=at,
            download_mode=mode,
            writer_batch_size=ARROW_BATCH_ROWS,
            **checks,
        )
        builder.download_and_prepare(download_mode=mode, verification_mode=verify)
        release_memory()
        ds = builder.as_dataset(split="test", in_memory=is_small_dataset(builder.info.dataset_size))
        release_memory(ds)
        return ds
    except dataset_load_errors() as exc:
        raise ProbeError(f"cannot load config {config!r} of {dataset}: {exc}") from exc
    except datasets.exceptions.DatasetGenerationError as exc:
        cause = exc.__cause__ or exc
        raise ProbeError(f"cannot read config {config!r} of {dataset} (empty or corrupt parquet?): {cause}") from exc


def select_prompts(prompts: PromptConfig, selection: Selection) -> tuple[PromptConfig, str]:
    """`prompts` holding only the rows `selection` keeps (`select_rows`: where, sample, shard, limit), and the one
    line to show when its sample is the whole config ("" otherwise). As they are when they already hold them.

    How a run's rows are selected, once (`runners.run.runner.resolve_protocol`); a column `where` names that
    the config lacks, or a `where` that keeps no row, is one `ProbeError` before a model loads.
    """
    if prompts.selection == selection:
        return prompts, ""
    picked = rows_of(prompts, selection)
    whole = len(picked.rows) == len(prompts.dataset)  # positions in order, each once: every row
    dataset = prompts.dataset if whole else prompts.dataset.select(picked.rows)
    sample = picked.draw.record() if picked.draw is not None else None
    note = picked.draw.note(prompts.config) if picked.draw is not None else ""
    return replace(prompts, dataset=dataset, sample=sample, selection=selection), note


def rows_of(prompts: PromptConfig, selection: Selection) -> Selected:
    """The positions in `prompts.dataset` of the rows `selection` keeps: all of them when the config already holds
    exactly those (`PromptConfig.selection`, a resolved run's), else `select_rows` over its selection columns."""
    if prompts.selection == selection:
        return Selected(range(len(prompts.dataset)))
    names = prompts.dataset.column_names
    if any(column not in names for column in selection.where or {}):  # its error names every column the config has
        table = arrow_table(prompts.dataset)
    else:  # the selection's columns (the ids alone give the length): memory-mapped, never the prompts
        table = arrow_table(prompts.dataset.select_columns([c for c in selection.columns() if c in names] or ["id"]))
    return select_rows(table, selection, f"{prompts.path} config {prompts.config!r}")


def limit_warning(prompts: PromptConfig, flag: str = "--limit") -> str:
    """`runners.selection.sample.limit_warning` of a loaded config: its first rows are one cell of a matrix, not a
    sample."""
    return sample_limit_warning(_unit_table(prompts), prompts.config, flag)


def _unit_table(prompts: PromptConfig) -> Any:
    """The Arrow columns of `prompts` a sample reads (ids, `probe`, the units' and strata's): never the prompts."""
    wanted = {"id", *unit_columns()}
    return arrow_table(prompts.dataset.select_columns([c for c in prompts.dataset.column_names if c in wanted]))


def check_scoring_mode(prompts: PromptConfig, settings: ScoringSettings) -> None:
    """Free-text items have no options to score: they need generation mode (checked before a model loads)."""
    if settings.mode != "generate" and "text" in set(prompts.dataset.unique("task")):
        raise ProbeError(
            f"{prompts.path} config {prompts.config!r} has free-text items (task `text`): "
            "run it with --scoring generate"
        )


def check_chat_form(prompts: PromptConfig, chat: bool) -> None:
    """Once the tokenizer has decided `chat`, every item must have the form it reads (`check_prompt_forms`).

    `runners.run.runner.resolve_protocol` checks it before the load when --chat/--no-chat or the
    protocol decided; left to the tokenizer, the session checks it, still before anything is written.
    """
    check_prompt_forms(prompts.dataset, f"{prompts.path} config {prompts.config!r}", chat)


def chat_for(tokenizer: Any, chat: bool | None) -> bool:
    """The chat default, defined once: `chat=None` (neither the dataset's protocol nor --chat/--no-chat
    decided) scores the chat form exactly when the model's tokenizer has a chat template."""
    return bool(getattr(tokenizer, "chat_template", None)) if chat is None else chat


def check_chat_template(config: str, tokenizer: Any, chat: bool) -> None:
    """The chat form needs a chat template: a base model (none) asked for it is one line, before anything runs.

    `chat` comes from the dataset's protocol or `--chat`; the run, the plan and the sweep's quote
    all check it here, so a model without a template never ends in a traceback mid-render.
    """
    if chat and not getattr(tokenizer, "chat_template", None):
        name = getattr(tokenizer, "name_or_path", "") or "the model"
        raise ProbeError(
            f"config {config!r} is scored on the chat form (its protocol, or --chat), and {name}'s tokenizer "
            "has no chat template (a base model): pass --no-chat to score the plain prompt"
        )


def check_number_mode(prompts: PromptConfig, settings: ScoringSettings, tokenizer: Any, chat: bool) -> None:
    """First-token mode needs a one-token form of every number in range: checked on the first number item.

    Run before any result is written, so a digit-by-digit tokenizer over 0-100 is one line
    (naming the first number without a one-token form), not a traceback mid-run. Exact mode
    and configs without number items pass.
    """
    if settings.mode != "score" or settings.number_mode == "exact":
        return
    ds = prompts.dataset
    if "number" not in set(ds.unique("task")):
        return
    tasks = ds.select_columns(["task"])
    # a config holds millions of rows: read the task column in slices, up to the first number item
    first = next(
        start + k
        for start in range(0, len(ds), 4096)
        for k, task in enumerate(tasks[start : start + 4096]["task"])
        if task == "number"
    )
    item = ds[first]
    try:
        prepare_request(item, tokenizer, chat, settings, ())
    except ValueError as exc:
        raise ProbeError(f"{prompts.path} config {prompts.config!r}: {exc}") from None
