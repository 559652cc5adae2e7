"""Read a built prompt dataset folder: the one home of its layout for every reader.

Layout (written by `promptgen.hub.folder`)::

    <folder>/README.md                         card: a YAML header (license, configs), then text
    <folder>/data/<config>/*.parquet           one config's rows, in shard order
    <folder>/build_manifest.json               recipe, parameters, sources, files, fingerprint

`probes run`, `plan`, `analyze`, `curate-pairs`, `rewrite`, `publish` and the demo find a folder's
configs, files and manifest here, and check its data files against the manifest and the recipe it
was built from, so the layout is known in one module and a damaged file is named the same way
whoever reads it. Parquet is read directly: `datasets` keys its cache of a local folder
by the folder's name, not its content, so a rebuilt folder could come back with stale rows.

A dataset (or model) argument is a local folder or a Hub repo id by one rule (`is_path_like`,
`local_folder`): an existing path is local; a name that is not one is a Hub id, unless it can
only be a path.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..core.errors import ProbeError
from ..core.files import read_json, sha256_file
from ..core.layout import BUILD_MANIFEST

# ----------------------------------------------------------------------------- local folder or Hub id


def is_path_like(source: str | Path) -> bool:
    """Whether a dataset or model argument that does not exist was meant as a local path, not a Hub id.

    A Hub repo id is `name` or `owner/name` (`gpt2` as well as `org/model`): a name that is
    not an existing folder is looked up on the Hub. A `Path`, anything starting with `.`, `/`
    or `~`, or with more than one `/` (or the platform's own separator) can only be a path,
    so its absence is an error here, not a Hub lookup that fails later with a network error.
    """
    text = str(source)
    return (
        isinstance(source, Path)
        or text.startswith((".", "/", "~"))
        or text.count("/") > 1
        or (os.sep != "/" and os.sep in text)
    )


def local_folder(source: str | Path, what: str) -> Path | None:
    """The folder when `source` is a local one; None for a Hub repo id; an error for a path that is no folder."""
    folder = Path(source).expanduser()
    if folder.exists():
        if not folder.is_dir():
            raise ProbeError(f"{what} {source} is not a folder")
        return folder
    if is_path_like(source):
        raise ProbeError(f"{what} folder {source} does not exist (nor is it a Hub repo id ORG/NAME)")
    return None


def local_source(source: str | Path, what: str, revision: str | None) -> Path | None:
    """`local_folder`, with `--revision` refused for a local folder: a revision names a Hub commit, and a folder
    has only the files it holds. One rule for every command that takes both (run, import, analyze)."""
    folder = local_folder(source, what)
    if folder is not None and revision is not None:
        raise ProbeError(f"{what} {source} is a local folder; --revision applies to Hub repos only")
    return folder


# ----------------------------------------------------------------------------- manifest and card


def has_build_manifest(folder: Path) -> bool:
    """Whether `folder` is a built dataset folder (`probes build` wrote its manifest last)."""
    return (Path(folder) / BUILD_MANIFEST).is_file()


def read_build_manifest(folder: Path, *, flag: str | None = None, expected: str = "a folder") -> dict[str, Any]:
    """A built folder's build_manifest.json: the recipe (and its sha256), parameters and fingerprint it came from.

    A folder without one gives {} (a folder made by hand: nothing to carry into a report), unless
    `flag` is given: then the command that was given the folder needs it, and `flag` and
    `expected` word the error for that command.
    """
    path = Path(folder) / BUILD_MANIFEST
    if not path.is_file():
        if flag is None:
            return {}
        raise ProbeError(f"{flag} {folder}: no build_manifest.json; expected {expected} from probes build")
    manifest = read_json(path)
    if not isinstance(manifest, dict):
        raise ProbeError(f"{path}: expected a JSON object, got {type(manifest).__name__}; rebuild with `probes build`")
    return manifest


def built_folders(parent: Path) -> list[Path]:
    """The built dataset folders directly under `parent`, in the order of their manifests' paths."""
    return [manifest.parent for manifest in sorted(Path(parent).glob(f"*/{BUILD_MANIFEST}"))]


def read_card_header(folder: Path) -> dict[str, Any]:
    """The YAML header of a folder's README.md (its `license`, `configs`); {} when it has none or it is unreadable."""
    try:
        return card_header((Path(folder) / "README.md").read_text(encoding="utf-8"))
    except OSError:
        return {}


def card_header(text: str) -> dict[str, Any]:
    """The YAML header of a card's text (local or fetched from the Hub); {} when it has none or it does not parse."""
    import yaml

    try:
        if text.startswith("---\n"):
            header = yaml.safe_load(text[4 : text.index("\n---", 4)]) or {}
            return header if isinstance(header, dict) else {}
    except (ValueError, yaml.YAMLError):
        pass
    return {}


# ----------------------------------------------------------------------------- configs and their parquet files


def data_folder(folder: Path) -> Path:
    """`data/`: one folder per config."""
    return Path(folder) / "data"


def config_folder(folder: Path, config: str) -> Path:
    """`data/<config>/`: the config's parquet files."""
    return data_folder(folder) / config


def config_names(folder: Path) -> list[str]:
    """The configs of a folder (the folders under `data/`), by name; [] without `data/`."""
    data = data_folder(folder)
    return sorted(p.name for p in data.iterdir() if p.is_dir()) if data.is_dir() else []


def config_files(folder: Path, config: str, *, required: bool = False) -> list[Path]:
    """The parquet files of one config, in shard order.

    With `required`, a config without any is an error naming the configs the folder has
    (a typo in --config is the usual cause); else it gives [].
    """
    files = sorted(config_folder(folder, config).glob("*.parquet"))
    if required and not files:
        known = config_names(folder)
        raise ProbeError(
            f"{folder}: no parquet files for config {config!r} (configs here: {', '.join(known) or 'none'})"
        )
    return files


@contextmanager
def parquet_errors(path: Path, what: str) -> Iterator[None]:
    """pyarrow's errors reading `path` (truncated, foreign, damaged) as one `ProbeError` naming the file."""
    try:
        yield
    except (OSError, pa.ArrowException) as exc:
        raise ProbeError(f"{path}: cannot read {what} parquet ({exc})") from exc


def config_schema(folder: Path, config: str, what: str) -> pa.Schema | None:
    """The Arrow schema of a config, from its first parquet file (None when it has none)."""
    files = config_files(folder, config)
    if not files:
        return None
    with parquet_errors(files[0], what):
        return pq.read_schema(files[0])


def read_parquet(path: Path, columns: Sequence[str] | None, what: str) -> pa.Table:
    """One parquet file of a dataset or results folder, its missing columns and damage named.

    A truncated or foreign file raises pyarrow's own errors (ArrowInvalid: "magic bytes not
    found"), which would otherwise surface as a traceback far from the file that caused it.
    """
    with parquet_errors(path, what):
        names = pq.read_schema(path).names
        missing = [c for c in columns or () if c not in names]
        if missing:
            raise ProbeError(f"{path}: {what} has no column(s) {', '.join(missing)}")
        return pq.read_table(path, columns=list(columns) if columns is not None else None)


def read_parquet_files(files: Sequence[Path], columns: Sequence[str] | None, what: str) -> pa.Table:
    """Several parquet files (a config's shards) as one table, in the order given."""
    return pa.concat_tables([read_parquet(path, columns, what) for path in files], promote_options="default")


def read_config_rows(
    folder: Path, config: str, ids: Sequence[str], columns: Sequence[str] | None = None, what: str = "prompt config"
) -> pa.Table:
    """The rows of one config whose `id` is in `ids`, in the files' order: streamed batch by batch with the filter
    applied, so a few rows of a config of millions cost about one batch of memory, not the whole config."""
    import pyarrow.compute as pc
    import pyarrow.dataset as pads

    files = config_files(folder, config, required=True)
    wanted = pa.array(list(dict.fromkeys(ids)), type=pa.string())
    parts = []
    for path in files:  # one file at a time, in shard order: the rows keep the config's order
        with parquet_errors(path, what):
            names = pq.read_schema(path).names
            missing = [c for c in [*(columns or ()), "id"] if c not in names]
            if missing:
                raise ProbeError(f"{path}: {what} has no column(s) {', '.join(missing)}")
            scanner = pads.dataset(path, format="parquet").scanner(
                columns=list(dict.fromkeys(["id", *columns])) if columns is not None else None,
                filter=pc.field("id").isin(wanted),
                use_threads=False,
            )
            parts.append(scanner.to_table())
    return pa.concat_tables(parts, promote_options="default")


def read_config_positions(folder: Path, config: str, positions: Sequence[int], what: str = "prompt config") -> pa.Table:
    """The rows at `positions` (0-based, over the config's files in shard order), in that order.

    Only the row groups holding them are read: a few rows of a 2.97 M-row config cost a few row
    groups (10,000 rows each in a built folder), not the config.
    """
    import numpy as np

    files = config_files(folder, config, required=True)
    starts: list[tuple[Path, int, int]] = []  # (file, row group, its first position)
    offset = 0
    for path in files:
        with parquet_errors(path, what):
            meta = pq.read_metadata(path)
        for group in range(meta.num_row_groups):
            starts.append((path, group, offset))
            offset += meta.row_group(group).num_rows
    wanted = np.asarray(positions, dtype=np.int64)
    if len(wanted) and (wanted.min() < 0 or wanted.max() >= offset):
        raise ProbeError(f"{config_folder(folder, config)}: row positions outside its {offset} rows")
    firsts = np.array([first for _, _, first in starts], dtype=np.int64)
    group_of = np.searchsorted(firsts, wanted, side="right") - 1
    pieces: dict[int, pa.Table] = {}
    for g in np.unique(group_of):
        path, group, _ = starts[int(g)]
        with parquet_errors(path, what):
            pieces[int(g)] = pq.ParquetFile(path).read_row_group(group)
    if not pieces:
        with parquet_errors(files[0], what):
            return pq.read_schema(files[0]).empty_table()
    rows = [pieces[int(g)].slice(int(p - firsts[g]), 1) for p, g in zip(wanted, group_of, strict=True)]
    return pa.concat_tables(rows, promote_options="default")


def read_config(
    folder: Path, config: str, columns: Sequence[str] | None = None, what: str = "prompt config"
) -> pa.Table:
    """One config of a local folder as one table (`columns` only, when given): the config reader of every command."""
    return read_parquet_files(config_files(folder, config, required=True), columns, what)


# ----------------------------------------------------------------------------- a build's recipe and data files


def read_built_from(
    dataset: Path, recipe: str, *, flag: str, expected: str, same_name: bool = False
) -> tuple[dict[str, Any], Any]:
    """(manifest, recipe) of a built folder that a command rebuilds as a new version.

    The folder must have been built from `recipe` (its sha256 is compared, and with `same_name`
    the dataset name too), so the rebuilt configs are the ones its results were scored on.
    """
    from ..recipe import load_recipe

    manifest = read_build_manifest(dataset, flag=flag, expected=expected)
    spec = load_recipe(recipe)
    built_from = manifest.get("recipe", {}).get("sha256")
    if built_from != spec.sha256 or (same_name and manifest.get("name") != spec.name):
        raise ProbeError(
            f"{flag} {dataset} ({manifest.get('name')}, recipe sha256 {str(built_from)[:16]}…) was not built from "
            f"the recipe {spec.path} ({spec.name}, sha256 {spec.sha256[:16]}…); rebuild it or pass --recipe"
        )
    return manifest, spec


#: what `check_data_files` is given per data file: (size in bytes, sha256 or None when not hashed)
FileFacts = tuple[int, str | None]


def manifest_data_files(manifest: Mapping[str, Any], where: Path) -> dict[str, dict[str, Any]]:
    """{path under the folder: its manifest entry (sha256, bytes)} of every config's data files."""
    configs = manifest.get("configs")
    if not isinstance(configs, dict) or not configs:
        raise ProbeError(f"{where}: no `configs` with data files; rebuild the folder with `probes build`")
    out: dict[str, dict[str, Any]] = {}
    for name, info in configs.items():
        files = info.get("files", []) if isinstance(info, dict) else None
        if not isinstance(files, list) or not all(
            isinstance(e, dict) and isinstance(e.get("path"), str) and isinstance(e.get("sha256"), str) for e in files
        ):
            raise ProbeError(
                f"{where}: configs.{name}.files must be a list of {{path, sha256, bytes}} objects; "
                "rebuild the folder with `probes build`"
            )
        out.update((entry["path"], entry) for entry in files)
    return out


def config_data_files(folder: Path, config: str) -> dict[str, FileFacts]:
    """{path under `folder`: (size, sha256)} of the files in `data/<config>/`, hidden ones left out.

    Hashing is cheap next to what reading a config costs anyway (`datasets` converts every byte
    of a local folder again on each load): sha256 runs at about 500 MB/s here.
    """
    config_dir = config_folder(folder, config)
    if not config_dir.is_dir():
        return {}
    return {
        path.relative_to(folder).as_posix(): (path.stat().st_size, sha256_file(path))
        for path in sorted(config_dir.rglob("*"))
        if path.is_file() and not any(part.startswith(".") for part in path.relative_to(config_dir).parts)
    }


def check_data_files(
    folder: Path | str,
    manifest: Mapping[str, Any],
    found: Mapping[str, FileFacts],
    *,
    config: str | None = None,
    fix: str = "rebuild the folder with `probes build --overwrite`",
) -> None:
    """The data files must be exactly those `build_manifest.json` lists: none extra, none missing, same bytes.

    One check for every reader of a built folder: `probes publish` (all configs) and `probes run`
    (`config` only: the one it loads). An extra parquet beside a config's shards is read by
    `datasets` with them and would be scored, analysed or uploaded under a fingerprint that does
    not describe it. Sizes are compared always, sha256 where `found` has one. `folder` is a
    local folder, or a Hub dataset's label (`ORG/NAME@<commit>`, `fix` then says to republish).
    """
    path = Path(folder) / BUILD_MANIFEST
    expected = manifest_data_files(manifest, path)
    if config is not None:
        prefix = f"data/{config}/"
        expected = {p: e for p, e in expected.items() if p.startswith(prefix)}
        found = {p: f for p, f in found.items() if p.startswith(prefix)}
    problems = [f"missing {p}" for p in sorted(expected.keys() - found.keys())]
    problems += [f"not listed in the manifest: {p}" for p in sorted(found.keys() - expected.keys())]
    for p in sorted(expected.keys() & found.keys()):
        size, sha256 = found[p]
        if ("bytes" in expected[p] and expected[p]["bytes"] != size) or (sha256 and sha256 != expected[p]["sha256"]):
            problems.append(f"sha256 differs: {p}")
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise ProbeError(f"{folder}: the data files do not match {BUILD_MANIFEST} ({shown}); {fix}")
