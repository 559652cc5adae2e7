"""An import at the scale of the release (issue #69, finding 7): each file read once, in chunks, rows added in batches.

The import held every file whole, twice (read and parsed to check, read and parsed again to write), made
every row of a file as a dict and added them at once: about 15 times the file in memory. Now each file
is opened once and read as a stream, a chunk of rows at a time (the empathy authors' TSV: pandas'
own blocks of rows, so each answer reads as in their whole-file read), and the checked rows reach
the session in bounded batches. benchmarks/import_memory.py measures it on a full config.
"""

from __future__ import annotations

from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pytest

from probes import importer
from probes.empathy import authors_import
from probes.empathy.authors_import import FORMAT as EMPATHY_AUTHORS
from probes.importer import ImportRequest, import_results
from probes.importer.common import SourceFile
from promptgen.build import build
from promptgen.core.errors import ProbeError
from runners.prompts import PromptConfig, load_prompt_config
from runners.results import key_folders, part_files, read_key_rows
from runners.run.session import Session

MODEL = "org/model-a"
FILES = {"religion_origin": "religion_P0S0T0", "religion_10-scale": "religion_P0S1T0"}
ANSWERS = ["70", "I cannot rate that.", "", "On a scale from 0 to 100: 40", "8\n\nThe narrator felt sad."]


@pytest.fixture(scope="module")
def prompts(shared_sources: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("empathy")
    return build("intergroup-empathy", out_dir=out, sources=shared_sources, max_events=2).path


def _write_files(prompts: Path, folder: Path) -> dict[str, int]:
    """The authors' files of FILES, two batches each (their layout); file name -> rows."""
    folder.mkdir(parents=True)
    rows = {}
    for stem, config in FILES.items():
        items = load_prompt_config(str(prompts), config).dataset.to_pandas().sort_values("authors_index")
        frame = pd.DataFrame(
            {
                "idx": items["authors_index"].to_numpy(),
                "system_prompt": [m[0]["content"] for m in items["messages"]],
                "user_input": [m[1]["content"] for m in items["messages"]],
                "response": [ANSWERS[k % len(ANSWERS)] for k in range(len(items))],
            }
        )
        half = -(-len(frame) // 2)
        for b in range(2):
            frame.iloc[b * half : (b + 1) * half].to_csv(folder / f"{stem}_batch-{b}.tsv", sep="\t", index=False)
            rows[f"{stem}_batch-{b}.tsv"] = len(frame.iloc[b * half : (b + 1) * half])
    return rows


def _stored(out: Path) -> pd.DataFrame:
    frames = [read_key_rows(f).to_pandas() for config in FILES.values() for f in key_folders(out, config)]
    return pd.concat(frames).drop(columns=["model_revision"]).sort_values("id", ignore_index=True)


def test_each_file_is_opened_once_and_rows_reach_the_session_in_bounded_batches(prompts, tmp_path, monkeypatch):
    """Fails before #69's fix: each file was read twice (`read_bytes` to check, again to write) and its rows went
    to `Session.add` all at once. Blocks of 7 rows and batches of 5 stand for pandas' 131,072 and the importer's
    32,768; the rows are those of an import in one block."""
    source = tmp_path / "exp"
    rows = _write_files(prompts, source)
    whole = tmp_path / "whole"
    import_results(ImportRequest(source, "empathy-authors", prompts, MODEL, whole))

    opened: dict[str, int] = {}
    path_open = Path.open

    def counted_open(self: Path, *args, **kwargs):
        if self.suffix == ".tsv":
            opened[self.name] = opened.get(self.name, 0) + 1
        return path_open(self, *args, **kwargs)

    added: list[int] = []
    add, add_table = Session.add, getattr(Session, "add_table", None)

    def counted_add(self: Session, batch) -> int:
        batch = list(batch)
        added.append(len(batch))
        return add(self, batch)

    def counted_add_table(self: Session, table, positions) -> int:
        added.append(len(table))
        return add_table(self, table, positions)

    monkeypatch.setattr(Path, "open", counted_open)
    monkeypatch.setattr(Session, "add", counted_add)
    monkeypatch.setattr(Session, "add_table", counted_add_table, raising=False)  # (none before the fix)
    monkeypatch.setattr(authors_import, "_block_rows", lambda width: 7, raising=False)
    monkeypatch.setattr(importer, "STAGED_BATCH", 5, raising=False)
    monkeypatch.setattr(importer, "FLUSH_EVERY", 5)
    chunked = tmp_path / "chunked"
    result = import_results(ImportRequest(source, "empathy-authors", prompts, MODEL, chunked))

    assert opened == dict.fromkeys(rows, 1)  # each file opened once, to check and to write
    assert sum(added) == sum(rows.values()) and max(added) <= 5  # every row, 5 at a time at most
    assert all(len(part_files(f)) == 1 for config in FILES.values() for f in key_folders(chunked, config))
    per_config = [sum(n for name, n in rows.items() if name.startswith(stem)) for stem in FILES]
    assert sorted(c.added for c in result.configs) == sorted(per_config)
    pd.testing.assert_frame_equal(_stored(chunked), _stored(whole))


def test_a_bad_row_in_a_later_chunk_names_its_row_in_the_file_and_nothing_is_written(prompts, tmp_path, monkeypatch):
    source = tmp_path / "exp"
    _write_files(prompts, source)
    path = source / "religion_origin_batch-1.tsv"
    frame = pd.read_csv(path, sep="\t")
    frame.loc[10, "user_input"] = frame.loc[10, "user_input"] + " "
    frame.to_csv(path, sep="\t", index=False)
    monkeypatch.setattr(authors_import, "_block_rows", lambda width: 4)
    out = tmp_path / "out"
    with pytest.raises(ProbeError) as caught:
        import_results(ImportRequest(source, "empathy-authors", prompts, MODEL, out))
    line = str(caught.value)
    assert line.startswith(f"religion_origin_batch-1.tsv: idx {frame.loc[10, 'idx']} (row 11): user_input is not"), line
    assert not out.exists()


def _numbers_config(n: int) -> tuple[PromptConfig, tuple[np.ndarray, np.ndarray]]:
    """A config of `n` number items whose authors_index is their row: what `read` checks the rows against."""
    messages = [[{"role": "system", "content": "s"}, {"role": "user", "content": f"u{k}"}] for k in range(n)]
    dataset = datasets.Dataset.from_dict(
        {
            "id": [f"i{k}" for k in range(n)],
            "messages": messages,
            "task": ["number"] * n,
            "number_min": [0] * n,
            "number_max": [100] * n,
            "authors_index": list(range(n)),
        }
    )
    config = PromptConfig(dataset, "datasets/intergroup-empathy", "race_P0S0T0", None, None, "other")
    return config, EMPATHY_AUTHORS.prepare(config)


@pytest.mark.parametrize(
    ("spoilers", "texts"),
    [
        ({131_072 + 5: ""}, {0: "70.0", 131_072 + 5: "nan", 262_144 + 1: "70.0"}),  # numbers only: floats all
        ({131_072 + 5: "", 262_144 + 3: "I cannot"}, {0: "70", 131_072 + 5: "nan", 131_072 + 6: "70.0"}),
    ],
    ids=["numbers-with-a-gap", "then-words"],
)
@pytest.mark.filterwarnings("ignore::pandas.errors.DtypeWarning")  # theirs: a column of mixed blocks
def test_answers_read_in_blocks_are_the_whole_files_answers(tmp_path, spoilers, texts) -> None:
    """pandas infers an answer column's type per block of 131,072 rows (their 4 columns) and joins the blocks: an
    integer answer is "70.0" where the whole column is numbers with a gap, "70" where words follow. Read a block
    at a time, each answer is what `str(response)` gives on their whole-file read."""
    n = 262_144 + 10
    prompts, index = _numbers_config(n)
    answers = ["70"] * n
    for row, text in spoilers.items():
        answers[row] = text
    frame = pd.DataFrame({"idx": range(n), "system_prompt": "s", "user_input": [f"u{k}" for k in range(n)]})
    path = tmp_path / "ethnicity_origin_batch-0.tsv"
    frame.assign(response=answers).to_csv(path, sep="\t", index=False)
    theirs = [str(r) for r in pd.read_csv(path, sep="\t")["response"].tolist()]
    source = SourceFile(path, path.name, "race_P0S0T0")
    with path.open("rb") as stream:
        chunks = [(c.positions, c.rows()) for c in EMPATHY_AUTHORS.read(source, stream, prompts, index)]
    assert len(chunks) == 3
    ours = dict.fromkeys(range(n), "")
    for positions, table in chunks:
        ours.update(zip(positions.tolist(), table["generated_text"].to_pylist(), strict=True))
    assert [ours[k] for k in range(n)] == theirs
    assert all(theirs[row] == text for row, text in texts.items())


def test_a_plugin_formats_chunks_are_its_code_guarded_as_they_are_read() -> None:
    """A format's `read` is a generator: what it raises while the importer iterates is the plugin's one line."""
    from promptgen.core.plugins import PluginCode, PluginCodeError

    class Chunks:
        def read(self):
            yield 1
            raise RuntimeError("boom")

    chunks = PluginCode("--format x (plugin p)", Chunks()).read()
    assert next(chunks) == 1
    with pytest.raises(PluginCodeError, match=r"^--format x \(plugin p\): read\(\.\.\.\) raised RuntimeError: boom$"):
        next(chunks)
