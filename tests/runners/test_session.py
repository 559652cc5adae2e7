"""Resume (runners.run.session, runners.results.resume): exact, and without hashing prompts whose content is known.

No model: a fake scorer turns the items to score into result rows, so every scenario runs on
a 40-item config in a second. Each resumed open is compared with the rule computed the
slow way, independently: hash every selected prompt and compare it with the row stored
under its id (`_brute_todo`). `prompt_sha256` calls are counted to see what was hashed.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from promptgen.core.errors import ProbeError
from runners import results as res
from runners.prompts import PromptConfig, load_prompt_config, select_prompts
from runners.run.session import Session
from runners.selection.select import Selection
from runners_fixtures import number_items, write_prompt_folder

KEY = res.ResultKey("org/m", "rev-1", '{"mode":"score"}')
N = 40


def _items(changed: dict[int, str] | None = None, drop: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    """The 40 items; `changed` gives some of them another prompt, `drop` leaves some out."""
    items = number_items(N)
    for k, prompt in (changed or {}).items():
        items[k] = {**items[k], "prompt": prompt, "messages": [{"role": "user", "content": prompt}]}
    return [item for k, item in enumerate(items) if k not in drop]


def _prompts(root: Path, items: list[dict[str, Any]]) -> PromptConfig:
    return load_prompt_config(str(write_prompt_folder(root, items)), "items")


@pytest.fixture()
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The prompts hashed (one per `results.prompt_sha256` call), in order."""
    calls: list[str] = []
    real = res.prompt_sha256

    def counting(item: Any) -> str:
        calls.append(item.get("prompt"))
        return real(item)

    monkeypatch.setattr(res, "prompt_sha256", counting)
    return calls


def _open(prompts: PromptConfig, out: Path, **kw: Any) -> Session:
    return Session.open(prompts, out, KEY, chat=False, **kw)  # these runs score rebuilds (checked before a run opens)


def _score(session: Session) -> None:
    """Score the session's todo with a fake scorer (one row per item) and finish it."""
    items = session.prompts.dataset.select(session.todo).to_list()
    session.add({"id": i["id"], "refused": False, "context_tokens": 1, "choice_tokens": None} for i in items)
    session.finish(backend="fake", dtype=None, hardware={})


def _brute_todo(prompts: PromptConfig, out: Path, selected: list[int]) -> tuple[list[int], int]:
    """(todo, rescored) by the rule itself: hash every selected prompt, compare with the row under its id."""
    scored = res.read_key_rows(res.key_dir(out, prompts.config, KEY), ["prompt_sha256"]).to_pydict()
    done = dict(zip(scored["id"], scored["prompt_sha256"], strict=True))
    rows = prompts.dataset.to_list()
    todo = [k for k in selected if done.get(rows[k]["id"]) != res.prompt_sha256(rows[k])]
    return todo, sum(rows[k]["id"] in done for k in todo)


def _labels(out: Path) -> dict[str | None, int]:
    """{prompt content label: rows} over the key folder's parts."""
    labels: dict[str | None, int] = {}
    for part in res.part_files(res.key_dir(out, "items", KEY)):
        content = res.part_content(pq.read_schema(part))
        labels[content] = labels.get(content, 0) + pq.read_metadata(part).num_rows
    return labels


def _check(session: Session, out: Path) -> None:
    """The session's todo and rescored count are the rule's (`_brute_todo`), computed after it opened."""
    todo, rescored = _brute_todo(session.prompts, out, session.selected)
    assert (session.todo, session.rescored) == (todo, rescored)
    rows = session.prompts.dataset.select(session.todo).to_list()
    assert session.hashes == {r["id"]: res.prompt_sha256(r) for r in rows}


def test_an_unchanged_config_resumes_without_hashing_done_rows(tmp_path: Path, hashed: list[str]) -> None:
    prompts = _prompts(tmp_path / "v1", _items())
    assert prompts.content is not None and prompts.content.rows == N
    out = tmp_path / "results"
    first = _open(prompts, out, rows=Selection(limit=25))
    assert len(hashed) == 25 and first.todo == list(range(25))  # new items: their rows need the hash
    _score(first)
    hashed.clear()
    rest = _open(prompts, out)
    assert len(hashed) == N - 25  # only the 15 items still to score, never the 25 done ones
    _check(rest, out)
    assert rest.todo == list(range(25, N))
    _score(rest)
    hashed.clear()
    again = _open(prompts, out)
    assert hashed == [] and again.todo == [] and again.rescored == 0
    _check(again, out)
    assert _labels(out) == {prompts.content.sha256: N}  # compacted: one part for the content
    assert len(res.part_files(again.folder)) == 1


def test_a_rebuild_with_one_changed_prompt_rescores_exactly_that_item(tmp_path: Path, hashed: list[str]) -> None:
    v1 = _prompts(tmp_path / "v1", _items())
    out = tmp_path / "results"
    _score(_open(v1, out))
    v2 = _prompts(tmp_path / "v2", _items({7: "Question 7, reworded: how many coins?\nAnswer: $"}))
    assert v2.content is not None and v1.content is not None and v2.content.sha256 != v1.content.sha256
    hashed.clear()
    session = _open(v2, out)
    assert len(hashed) == N  # another content: every done row is checked
    _check(session, out)
    assert session.todo == [7] and session.rescored == 1
    _score(session)
    assert _labels(out) == {v2.content.sha256: N}  # all of it checked: the old part is relabelled
    hashed.clear()
    again = _open(v2, out)
    assert hashed == [] and again.todo == []
    _check(again, out)
    hashed.clear()
    back = _open(v1, out)  # the first build again: item 7 is stale once more, found by hashing
    assert len(hashed) == N and back.todo == [7] and back.rescored == 1
    _check(back, out)


def test_a_data_file_changed_behind_the_manifest_is_refused(tmp_path: Path) -> None:
    """Its content is the files the manifest lists: a file rewritten without a rebuild is one error at load.

    An error, not a silent fallback to hashing: the manifest's fingerprint and file list no longer
    describe the data, so results could not say what was scored (`probes publish` refuses it too).
    """
    folder = write_prompt_folder(tmp_path / "v1", _items())
    (data,) = (folder / "data" / "items").glob("*.parquet")
    table = pq.read_table(data)
    prompts = table["prompt"].to_pylist()
    prompts[3] = "Question 3, edited in place: how many coins?\nAnswer: $"
    pq.write_table(table.set_column(table.schema.get_field_index("prompt"), "prompt", [prompts]), data)
    with pytest.raises(ProbeError, match="sha256 differs"):
        load_prompt_config(str(folder), "items")


def test_unknown_content_falls_back_to_hashing(tmp_path: Path, hashed: list[str]) -> None:
    prompts = _prompts(tmp_path / "v1", _items())
    unknown = replace(prompts, content=None)  # a config whose content was not checked
    out = tmp_path / "results"
    _score(_open(unknown, out))
    assert _labels(out) == {None: N}
    hashed.clear()
    session = _open(unknown, out)
    assert len(hashed) == N and session.todo == []
    _check(session, out)


def test_a_folder_of_the_previous_runner_resumes_by_hashing_then_is_labelled(tmp_path: Path, hashed: list[str]) -> None:
    prompts = _prompts(tmp_path / "v1", _items())
    out = tmp_path / "results"
    folder = res.key_dir(out, "items", KEY)
    rows = prompts.dataset.to_list()
    stored = [{"id": r["id"], "refused": False, "prompt_sha256": res.prompt_sha256(r), **KEY.as_dict()} for r in rows]
    stored[11]["prompt_sha256"] = "0" * 64  # scored on an older prompt
    res.write_key_file(folder, KEY)
    for start in range(0, N, 8):  # parts as the previous runner wrote them: no content label
        res.write_part(folder, (0, 1), stored[start : start + 8])
    hashed.clear()
    session = _open(prompts, out)
    assert len(hashed) == N
    _check(session, out)
    assert session.todo == [11] and session.rescored == 1
    _score(session)
    assert _labels(out) == {prompts.content.sha256: N} and len(res.part_files(folder)) == 1
    hashed.clear()
    assert _open(prompts, out).todo == [] and hashed == []


def test_shards_check_only_their_rows(tmp_path: Path, hashed: list[str]) -> None:
    v1 = _prompts(tmp_path / "v1", _items())
    out = tmp_path / "results"
    for i in range(2):
        _score(_open(v1, out, rows=Selection(shard=(i, 2))))
    rows = v1.dataset.to_list()
    by_shard = [[k for k in range(N) if res.shard_of(rows[k]["id"], 2) == i] for i in range(2)]
    a, b = by_shard[0][0], by_shard[1][0]  # one item of each shard changes
    v2 = _prompts(tmp_path / "v2", _items({a: "Reworded A?\nAnswer: $", b: "Reworded B?\nAnswer: $"}))
    assert v2.content is not None
    zero = _open(v2, out, rows=Selection(shard=(0, 2)))
    _check(zero, out)
    assert zero.todo == [a] and zero.selected == by_shard[0]
    _score(zero)
    # shard 1's rows were not checked by shard 0's run: they keep the old label, and item b is found
    assert _labels(out) == {v2.content.sha256: len(by_shard[0]), v1.content.sha256: len(by_shard[1])}
    hashed.clear()
    one = _open(v2, out, rows=Selection(shard=(1, 2)))
    assert len(hashed) == len(by_shard[1])  # its own rows, unlabelled for v2: checked
    _check(one, out)
    assert one.todo == [b] and one.rescored == 1
    _score(one)
    assert _labels(out) == {v2.content.sha256: N}
    hashed.clear()
    assert _open(v2, out).todo == [] and hashed == []


def test_limit_and_row_selection_check_only_their_rows(tmp_path: Path, hashed: list[str]) -> None:
    v1 = _prompts(tmp_path / "v1", _items())
    out = tmp_path / "results"
    _score(_open(v1, out))
    v2 = _prompts(tmp_path / "v2", _items({3: "Reworded 3?\nAnswer: $", 30: "Reworded 30?\nAnswer: $"}))
    assert v2.content is not None
    limited = _open(v2, out, rows=Selection(limit=10))
    _check(limited, out)
    assert limited.todo == [3]
    _score(limited)
    # a selection by a protocol's `where` (here by id): rows 0-19 and 35; 30 is outside it
    ids = [r["id"] for r in v2.dataset.to_list()]
    selection, _ = select_prompts(v2, Selection(where={"id": [*ids[:20], ids[35]]}))
    assert selection.content == v2.content and len(selection.dataset) == 21
    picked = _open(selection, out)
    _check(picked, out)
    assert picked.todo == [] and picked.rescored == 0
    _score(picked)
    assert _labels(out) == {v2.content.sha256: 21, v1.content.sha256: N - 21}  # rows 20-39 but 35: unchecked
    hashed.clear()
    whole = _open(v2, out)
    assert len(hashed) == N - 21  # rows 0-19 and 35 were checked under v2 (item 3 rescored): trusted now
    _check(whole, out)
    assert whole.todo == [30] and whole.rescored == 1
    _score(whole)
    hashed.clear()
    assert _open(v2, out).todo == [] and hashed == []


def test_rows_of_items_a_rebuild_dropped_do_not_block_the_label(tmp_path: Path, hashed: list[str]) -> None:
    v1 = _prompts(tmp_path / "v1", _items())
    out = tmp_path / "results"
    _score(_open(v1, out))
    v2 = _prompts(tmp_path / "v2", _items({0: "Reworded 0?\nAnswer: $"}, drop=(39,)))
    session = _open(v2, out)
    _check(session, out)
    assert session.todo == [0]
    _score(session)
    assert _labels(out) == {v2.content.sha256: N}  # the dropped item's row stays, under the new label
    hashed.clear()
    assert _open(v2, out).todo == [] and hashed == []
    back = _open(v1, out)  # item 39 is back: its row is checked (another content), and current
    _check(back, out)
    assert back.todo == [0]


def test_the_manifest_and_a_rerun_see_one_row_per_id(tmp_path: Path) -> None:
    prompts = _prompts(tmp_path / "v1", _items())
    out = tmp_path / "results"
    for shard in ((0, 3), (1, 3), (2, 3)):
        session = _open(prompts, out, rows=Selection(shard=shard), flush_every=4)
        _score(session)
    manifest = json.loads((out / res.MANIFEST_NAME).read_text())
    (entry,) = manifest["configs"]["items"].values()
    assert entry["rows"] == N and entry["refusals"] == 0
    assert sorted(res.read_key_rows(res.key_dir(out, "items", KEY))["id"].to_pylist()) == sorted(
        r["id"] for r in prompts.dataset.to_list()
    )


@pytest.mark.parametrize(
    ("scoring", "advised"),
    [('{"mode":"generate"}', True), ('{"choice_mode":"letter","mode":"score"}', True), ('{"mode":"score"}', False)],
)
def test_a_run_that_refuses_every_item_says_so_with_an_example(tmp_path: Path, scoring: str, advised: bool) -> None:
    """The summary line of a run whose every item was refused says so, with the first answers, and advises the
    distribution scoring to a run that asked for an answer form (never to one scored that way already, #51);
    one answered item is enough to drop the advice."""
    prompts = _prompts(tmp_path / "ds", _items()[:5])
    answers = ["The person felt anger.", "The person felt\n  boredom.", "I cannot rate that.", "No.", "x" * 200]
    key = res.ResultKey(KEY.model, KEY.model_revision, scoring)
    for out, answered in ((tmp_path / "all", set()), (tmp_path / "some", {3})):
        session = Session.open(prompts, out, key, chat=False)
        rows = prompts.dataset.to_list()
        session.add(
            {
                "id": r["id"],
                "refused": k not in answered,
                "generated_text": answers[k],
                "context_tokens": 1,
                "choice_tokens": None,
            }
            for k, r in enumerate(rows)
        )
        summary = session.finish(backend="fake", dtype=None, hardware={})
        line = summary.line()
        if answered:
            assert not summary.all_refused and "EVERY" not in line
            continue
        assert summary.all_refused and summary.refusals == 5
        # the first three answers, whitespace folded, in the order scored
        assert summary.refused_examples == ("The person felt anger.", "The person felt boredom.", "I cannot rate that.")
        assert line.splitlines()[1].startswith("items: EVERY item was refused")
        assert "'The person felt anger.'" in line and ("--scoring sentence" in line) is advised
        assert advised or "read from the distribution over the answers already" in line
