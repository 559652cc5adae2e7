"""`runners.prompts`: the row selection a protocol or `--where` makes, read by each column's type."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from probes.cli import app
from promptgen.core.errors import ProbeError
from runners.selection.select import Selection, select_rows
from runners_fixtures import number_items, write_prompt_folder

TABLE = pa.table(
    {
        "same_surname": [True, False, None, True],
        "k": [1, 2, 3, 10],
        "x": [0.5, 1.0, 2.0, 1.0],
        "variant": ["base", "inst", "chat", "base"],
        "choices": [["a"], ["b"], [], ["a", "b"]],
    }
)


def _by_hand(column: str, keep) -> list[int]:
    """The positions whose value `keep` accepts, read off the Python values (independent of Arrow compute)."""
    return [i for i, value in enumerate(TABLE[column].to_pylist()) if value is not None and keep(value)]


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        # booleans in any case (`=True` found no rows, only `=true` did)
        ({"same_surname": ["True"]}, _by_hand("same_surname", lambda v: v is True)),
        ({"same_surname": ["TRUE"]}, _by_hand("same_surname", lambda v: v is True)),
        ({"same_surname": ["false", "true"]}, _by_hand("same_surname", lambda v: True)),
        # numbers as numbers: `10` and `10.0` are one value
        ({"k": ["2", "10.0"]}, _by_hand("k", lambda v: v in (2, 10))),
        ({"x": ["1"]}, _by_hand("x", lambda v: v == 1.0)),
        # text as text, and every column must hold
        ({"variant": ["base", "inst"]}, _by_hand("variant", lambda v: v in ("base", "inst"))),
        ({"variant": ["base"], "k": ["10"]}, [3]),
    ],
)
def test_where_reads_each_column_by_its_type(where, expected) -> None:
    assert list(select_rows(TABLE, Selection(where=where), "cfg").rows) == expected


@pytest.mark.parametrize(
    ("where", "words"),
    [
        ({"choices": ["a"]}, "column 'choices' holds list<item: string> values"),
        ({"same_surname": ["maybe"]}, "column 'same_surname' is true/false; --where same_surname=maybe is neither"),
        ({"k": ["ten"]}, "column 'k' holds numbers; --where k=ten is not one"),
        ({"nope": ["a"]}, "has no column 'nope'"),
        ({"variant": ["none-such"]}, "no row has variant in (none-such)"),
    ],
)
def test_where_errors_are_one_line_naming_the_column(where, words) -> None:
    with pytest.raises(ProbeError) as info:
        select_rows(TABLE, Selection(where=where), "cfg")
    assert words in str(info.value) and "\n" not in str(info.value)


def test_where_on_a_list_column_is_one_line_from_the_command_line(tmp_path: Path, smollm2: Path) -> None:
    """`probes run ... --where choices=a` ended in ArrowNotImplementedError; now one line, nothing written."""
    dataset = write_prompt_folder(tmp_path / "ds", number_items(3))
    out = tmp_path / "results"
    args = ["run", str(dataset), "-c", "items", "-m", str(smollm2), "--out", str(out), "--where", "choices=a"]
    result = CliRunner().invoke(app, args)
    text = re.sub(r"\x1b\[[0-9;]*m", "", result.output)
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert result.exit_code == 1 and "Traceback" not in text, text
    assert len(errors) == 1 and "column 'choices' holds" in errors[0], text
    assert not out.exists()


@pytest.mark.parametrize("config", ["race_probe", "games_paper_phi_2"])
@pytest.mark.parametrize(("shard", "limit"), [((0, 1), 5), ((0, 1), 777), ((1, 3), None), ((2, 3), 40)])
def test_a_narrowed_load_holds_exactly_the_rows_a_full_load_selects(
    built_trust_game: Path, config: str, shard: tuple[int, int], limit: int | None
) -> None:
    """`Selection.narrows`: reading only the selected rows gives the rows (and their values) the full load then
    selects (`select_prompts`), and records the selection, so a run does not select them again."""
    from runners.prompts import load_prompt_config, select_prompts

    rows = Selection(shard=shard, limit=limit)  # `where` None: the protocol's
    full = load_prompt_config(str(built_trust_game), config)
    selected, _ = select_prompts(full, rows.under(full.protocol))
    expected = selected.dataset.to_list()
    narrow = load_prompt_config(str(built_trust_game), config, rows=rows)
    assert narrow.dataset.to_list() == expected and len(expected) > 0
    assert narrow.selection == rows.under(full.protocol) and select_prompts(narrow, narrow.selection)[0] is narrow
    assert narrow.content == full.content and narrow.protocol == full.protocol
    assert narrow.dataset.features == full.dataset.features


@pytest.mark.parametrize(
    ("items", "extra", "words"),
    [
        (0, ["--limit", "2"], "the config is empty (0 rows)"),
        (0, [], "the config is empty (0 rows)"),
        (3, ["--shard", "1/999999999999"], "shard 1/999999999999 selects none of its 3 rows"),
    ],
)
def test_an_empty_config_or_an_empty_shard_says_which(tmp_path: Path, items: int, extra: list[str], words: str) -> None:
    """#51: an empty config said "BatchSize must be greater than 0", an empty shard "the config has no rows"."""
    dataset = write_prompt_folder(tmp_path / "ds", number_items(items or 3))
    if not items:  # every row removed, the manifest kept true to the files (`probes build` refuses to write one)
        _empty_config(dataset, "items")
    out = tmp_path / "results"
    args = ["run", str(dataset), "-c", "items", "-m", "tiny-model-not-loaded", "--out", str(out), *extra]
    result = CliRunner().invoke(app, args)
    text = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", result.output).split())
    assert result.exit_code == 1 and "Traceback" not in text, text
    assert words in text and text.count("error:") == 1, text
    assert not out.exists()


def _empty_config(folder: Path, config: str) -> None:
    """Rewrite `config`'s parquet files with no rows and its manifest entries with their new size and sha256."""
    import json

    import pyarrow.parquet as pq

    from promptgen.core.files import sha256_file

    manifest = json.loads((folder / "build_manifest.json").read_text())
    for entry in manifest["configs"][config]["files"]:
        path = folder / entry["path"]
        pq.write_table(pq.read_table(path).slice(0, 0), path)
        entry.update(sha256=sha256_file(path), bytes=path.stat().st_size)
    (folder / "build_manifest.json").write_text(json.dumps(manifest))
