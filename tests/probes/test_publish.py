"""`probes publish`: planning, idempotence, tags, deletions, dry runs and token hygiene.

The Hub is never contacted: `FakeHub` (tests/fake_hub.py) is an in-memory dataset repo host with
the parts of `HfApi` that publishing uses, returning huggingface_hub's own `RepoFile`/`GitRefs`/
`GitCommitInfo` objects so the code under test reads the real attribute names. Like the Hub's
default `.gitattributes`, it stores `*.parquet` in LFS (reported by content sha256) and other
files as regular git blobs (reported by git blob sha1).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx2
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets import Features, Value
from huggingface_hub import CommitOperationAdd
from huggingface_hub.errors import HfHubHTTPError
from typer.testing import CliRunner

from fake_hub import GITATTRIBUTES, TOKEN, FakeHub, git_blob_sha1, hub_response
from probes.cli import app
from probes.publish import RemoteFile, plan_publish, publish
from probes.publish import hub as pub_hub
from promptgen.core.errors import ProbeError
from promptgen.core.secrets import scrub
from promptgen.hub.folder import ConfigData, card_front_matter, write_hub_folder

runner = CliRunner()


# --------------------------------------------------------------------------- folders

FEATURES = Features({"id": Value("string"), "x": Value("int32")})


def prompt_folder(out: Path, *, version: str = "1.0.0", rows: int = 30, per_shard: int = 10, offset: int = 0) -> Path:
    """A small real prompt dataset folder written by the project's own Hub-folder writer."""

    def batches():
        yield {"id": [f"r{i}" for i in range(rows)], "x": [i + offset for i in range(rows)]}

    def card(manifest, written):
        front = card_front_matter(
            pretty_name="toy", license="cc0-1.0", tags=["test"], configs=written, default_config="main"
        )
        return f"---\n{front}---\n# toy {manifest['version']}\n"

    manifest = {
        "name": "toy-probes",
        "version": version,
        "recipe": {"sha256": "0" * 64},
        "parameters": {"seed": 1},
        "sources": [],
    }
    return write_hub_folder(
        out, "toy-probes", [ConfigData("main", FEATURES, batches)], manifest=manifest, render_card=card,
        rows_per_shard=per_shard,
    )  # fmt: skip


def results_folder(root: Path, *, parts: int = 2, model: str = "toy/model", generated: str | None = None) -> Path:
    """A small result folder written with the runners' own result writer (`generated`: every row's text)."""
    from runners import results as res

    key = res.ResultKey(model, "abc123", '{"choice_mode":"sentence"}')
    folder = res.key_dir(root, "single_actor", key)
    res.write_key_file(folder, key)
    for p in range(parts):
        rows = [
            {"id": f"i{p}-{j}", **key.as_dict(), "refused": False, "valid_mass": 0.9, "generated_text": generated}
            for j in range(5)
        ]
        res.write_part(folder, (0, 1), rows)
    entry = {  # as `probes run` records it: the config and key folder it finished
        "prompt_dataset": {"path": "toy-probes", "config": "single_actor", "fingerprint": "f" * 64},
        "key": folder.name,
        "backend": "hf",
        "dtype": "float32",
        "items": 5 * parts,
        "refusals": 0,
        "items_per_s": 1.0,
        "runner_version": "0.1.0",
    }
    manifest = res.update_manifest(root, "single_actor/run", entry)
    res.write_card(root, manifest, pretty_name="toy results", license="cc0-1.0")
    return root


def refresh_manifest(folder: Path) -> None:
    """Recount the parts into results_manifest.json, as the runner does after every run."""
    from runners import results as res

    run_id, entry = next(iter(res.read_manifest(folder)["runs"].items()))
    res.update_manifest(folder, run_id, entry)


def local_files(folder: Path) -> dict[str, bytes]:
    """The files publish considers: hidden ones (the runners' lock files) are never published."""
    files = (p for p in folder.rglob("*") if p.is_file())
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in files
        if not any(part.startswith(".") for part in p.relative_to(folder).parts)
    }


@pytest.fixture(autouse=True)
def no_real_token(monkeypatch, tmp_path):
    """No test may see a developer's real login or HF_TOKEN, nor reach the network."""
    import huggingface_hub.constants as constants

    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "no-stored-tokens"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


# --------------------------------------------------------------------------- publishing


def test_first_publish_is_one_commit_with_every_file_and_a_version_tag(tmp_path):
    folder = prompt_folder(tmp_path)
    hub = FakeHub()
    result = publish(folder, "org/toy-probes", api=hub)

    commits = hub.commits("org/toy-probes")
    assert len(commits) == 1
    ops = commits[0][1]["operations"]
    assert all(isinstance(op, CommitOperationAdd) for op in ops)
    assert sorted(op.path_in_repo for op in ops) == sorted(local_files(folder))
    assert len([p for p in local_files(folder) if p.endswith(".parquet")]) == 3

    remote = hub.files("org/toy-probes")
    assert remote == {**local_files(folder), ".gitattributes": GITATTRIBUTES}  # .gitattributes is never deleted
    assert hub.repos["org/toy-probes"]["tags"] == {"v1.0.0": result.commit_id}
    assert hub.files("org/toy-probes", "v1.0.0") == remote
    head = hub.head("org/toy-probes")
    assert head["title"] == "Publish toy-probes 1.0.0"
    manifest = json.loads((folder / "build_manifest.json").read_text())
    assert f"build-fingerprint: {manifest['fingerprint']}" in head["message"]
    assert f"publish-fingerprint: {result.local.fingerprint}" in head["message"]
    assert result.plan.count("add") == len(ops) and result.tag_action == "create"
    assert [w[0] for w in hub.writes] == ["create_repo", "create_commit", "create_tag"]


def test_republishing_identical_content_makes_no_commit(tmp_path):
    folder = prompt_folder(tmp_path)
    hub = FakeHub()
    publish(folder, "org/toy-probes", api=hub)
    writes = len(hub.writes)

    again = publish(folder, "org/toy-probes", api=hub)
    assert len(hub.writes) == writes  # no commit, no tag, no repo creation
    assert not again.will_commit and again.tag_action == "exists" and again.commit_id is None
    assert again.plan.count("unchanged") == len(local_files(folder)) and not again.plan.changed

    # a byte-identical rebuild elsewhere is the same content too
    rebuilt = prompt_folder(tmp_path / "elsewhere")
    assert publish(rebuilt, "org/toy-probes", api=hub).commit_id is None
    assert len(hub.writes) == writes


def test_identical_content_without_our_fingerprint_is_recognised_by_hashes(tmp_path):
    """Uploaded by other means: the commit has no fingerprint, so LFS sha256 and git blob sha1 decide."""
    folder = prompt_folder(tmp_path)
    hub = FakeHub()
    hub.create_repo("org/toy-probes", repo_type="dataset")
    oid = hub.push("org/toy-probes", {**hub.files("org/toy-probes"), **local_files(folder)}, "manual upload")
    writes = len(hub.writes)

    result = publish(folder, "org/toy-probes", api=hub)
    assert not hub.commits("org/toy-probes") and not result.plan.changed
    assert hub.repos["org/toy-probes"]["tags"] == {"v1.0.0": oid}  # only the missing tag was added
    assert [w[0] for w in hub.writes[writes:]] == ["create_tag"]


def test_a_changed_file_makes_one_commit_with_just_that_change(tmp_path):
    folder = results_folder(tmp_path / "results")
    hub = FakeHub()
    first = publish(folder, "org/toy-results", api=hub)
    assert first.tag is None and first.tag_action == "none" and not hub.repos["org/toy-results"]["tags"]

    card = folder / "README.md"  # a regular (non-LFS) file: compared by git blob sha1
    card.write_text(card.read_text() + "\nA note.\n")
    second = publish(folder, "org/toy-results", api=hub)
    ops = hub.commits("org/toy-results")[-1][1]["operations"]
    assert [(type(op).__name__, op.path_in_repo) for op in ops] == [("CommitOperationAdd", "README.md")]
    assert second.plan.count("update") == 1 and second.plan.count("unchanged") == len(local_files(folder)) - 1

    part = next(p for p in sorted(folder.rglob("part-*.parquet")))  # an LFS file: compared by content sha256
    table = pq.read_table(part)
    table = table.set_column(table.column_names.index("valid_mass"), "valid_mass", pa.array([0.5] * len(table)))
    pq.write_table(table, part)
    publish(folder, "org/toy-results", api=hub)
    ops = hub.commits("org/toy-results")[-1][1]["operations"]
    assert [op.path_in_repo for op in ops] == [part.relative_to(folder).as_posix()]
    assert len(hub.commits("org/toy-results")) == 3
    assert hub.files("org/toy-results") == {**local_files(folder), ".gitattributes": GITATTRIBUTES}


def test_stale_data_files_are_deleted_but_files_outside_data_stay(tmp_path):
    folder = results_folder(tmp_path / "results", parts=3)
    hub = FakeHub()
    publish(folder, "org/toy-results", api=hub)
    hub.push("org/toy-results", {**hub.files("org/toy-results"), "docs/notes.md": b"added on the Hub\n"}, "notes")

    gone = sorted(folder.rglob("part-*.parquet"))[-1]
    gone.unlink()
    refresh_manifest(folder)
    result = publish(folder, "org/toy-results", api=hub)
    ops = hub.commits("org/toy-results")[-1][1]["operations"]
    assert sorted((type(op).__name__, op.path_in_repo) for op in ops) == [
        ("CommitOperationAdd", "results_manifest.json"),
        ("CommitOperationDelete", gone.relative_to(folder).as_posix()),
    ]
    assert result.plan.count("delete") == 1
    remote = hub.files("org/toy-results")
    assert remote["docs/notes.md"] == b"added on the Hub\n" and ".gitattributes" in remote


def test_new_version_replaces_stale_shards_and_keeps_old_tag(tmp_path):
    v1 = prompt_folder(tmp_path / "v1", rows=30, per_shard=10)  # 3 shards
    v2 = prompt_folder(tmp_path / "v2", version="1.1.0", rows=20, per_shard=10, offset=5)  # 2 shards
    hub = FakeHub()
    first = publish(v1, "org/toy-probes", api=hub)
    second = publish(v2, "org/toy-probes", api=hub)

    assert len(hub.commits("org/toy-probes")) == 2
    # shard names carry the shard count: every old shard would be picked up by the card's glob
    deleted = {e.path for e in second.plan.entries if e.action == "delete"}
    assert deleted == {f"data/main/test-0000{i}-of-00003.parquet" for i in range(3)}
    assert {e.path for e in second.plan.entries if e.path.startswith("data/") and e.action == "add"} == {
        f"data/main/test-0000{i}-of-00002.parquet" for i in range(2)
    }
    assert hub.repos["org/toy-probes"]["tags"] == {"v1.0.0": first.commit_id, "v1.1.0": second.commit_id}
    assert hub.files("org/toy-probes", "v1.0.0") == {**local_files(v1), ".gitattributes": GITATTRIBUTES}
    assert hub.files("org/toy-probes", "v1.1.0") == {**local_files(v2), ".gitattributes": GITATTRIBUTES}

    # re-publishing the old version is a no-op: the tag holds it, and main is not reverted
    writes = len(hub.writes)
    old = publish(v1, "org/toy-probes", api=hub)
    assert len(hub.writes) == writes and old.tag_action == "exists"
    assert any("moved on" in note for note in old.notes)
    assert hub.head("org/toy-probes")["oid"] == second.commit_id


def test_existing_tag_with_other_content_is_an_error_before_anything_is_written(tmp_path):
    hub = FakeHub()
    publish(prompt_folder(tmp_path / "a"), "org/toy-probes", api=hub)
    writes = len(hub.writes)
    changed = prompt_folder(tmp_path / "b", offset=100)  # same version 1.0.0, other rows
    with pytest.raises(ProbeError, match=r"tag v1\.0\.0 already exists .*other content.*bump `version`"):
        publish(changed, "org/toy-probes", api=hub)
    assert len(hub.writes) == writes


def test_tags_for_results_only_when_asked_and_prompt_tags_follow_the_version(tmp_path):
    folder = results_folder(tmp_path / "results")
    hub = FakeHub()
    result = publish(folder, "org/toy-results", api=hub, revision_tag="paper-v1")
    assert hub.repos["org/toy-results"]["tags"] == {"paper-v1": result.commit_id}
    with pytest.raises(ProbeError, match="invalid tag"):
        publish(folder, "org/toy-results", api=hub, revision_tag="bad tag")

    prompts = prompt_folder(tmp_path / "p")
    assert publish(prompts, "org/p", api=FakeHub(), revision_tag="v1.0.0").tag == "v1.0.0"
    with pytest.raises(ProbeError, match="bump `version`"):
        publish(prompts, "org/p", api=FakeHub(), revision_tag="v2")


def test_prompts_and_results_never_share_a_repo(tmp_path):
    hub = FakeHub()
    publish(prompt_folder(tmp_path / "p"), "org/mixed", api=hub)
    with pytest.raises(ProbeError, match="holds a prompt dataset"):
        publish(results_folder(tmp_path / "r"), "org/mixed", api=hub)
    assert len(hub.commits("org/mixed")) == 1


def test_concurrent_push_fails_cleanly(tmp_path, monkeypatch):
    folder = results_folder(tmp_path / "results")
    hub = FakeHub()
    publish(folder, "org/r", api=hub)
    (folder / "README.md").write_text("changed\n")
    real_tree = hub.list_repo_tree

    def tree_then_someone_pushes(*args, **kwargs):
        yield from real_tree(*args, **kwargs)
        hub.push("org/r", hub.files("org/r"), "someone else")

    monkeypatch.setattr(hub, "list_repo_tree", tree_then_someone_pushes)
    with pytest.raises(ProbeError, match="run the command again"):
        publish(folder, "org/r", api=hub)


# --------------------------------------------------------------------------- dry run


def test_dry_run_lists_files_and_writes_nothing(tmp_path):
    folder = results_folder(tmp_path / "results", parts=2)
    hub = FakeHub()
    publish(folder, "org/r", api=hub)
    (folder / "README.md").write_text("changed\n")
    gone = sorted(folder.rglob("part-*.parquet"))[-1]
    gone.unlink()
    refresh_manifest(folder)
    writes = len(hub.writes)

    result = publish(folder, "org/r", api=hub, dry_run=True, message="Refresh results")
    assert len(hub.writes) == writes
    actions = {e.path: e.action for e in result.plan.entries}
    assert actions["README.md"] == "update" and actions[gone.relative_to(folder).as_posix()] == "delete"
    assert actions["results_manifest.json"] == "update" and actions[next(p for p in actions if "key.json" in p)] == (
        "unchanged"
    )
    assert result.will_commit and result.title == "Refresh results"
    text = "\n".join(result.lines())
    assert "would commit" in text and "publish-fingerprint:" in text and "2 update, 1 delete" in text

    new = publish(folder, "org/not-there-yet", api=hub, dry_run=True)
    assert {e.action for e in new.plan.entries} == {"add"} and "org/not-there-yet" not in hub.repos
    assert any("would be created" in note for note in new.notes)


def test_dry_run_works_offline_and_without_a_token(tmp_path):
    class Offline:
        token = None

        def __getattr__(self, name):
            def fail(*args, **kwargs):
                raise httpx2.ConnectError("[Errno -3] Temporary failure in name resolution")

            return fail

    folder = prompt_folder(tmp_path)
    result = publish(folder, "org/toy-probes", api=Offline(), dry_run=True)
    assert {e.action for e in result.plan.entries} == {"add"}
    assert result.tag_action == "create" and any("could not read" in n for n in result.notes)
    with pytest.raises(ProbeError, match="hf auth login"):
        publish(folder, "org/toy-probes", api=Offline())  # a real publish needs a token first


def test_cli_dry_run_with_the_real_client_in_offline_mode(tmp_path):
    folder = prompt_folder(tmp_path)
    result = runner.invoke(
        app, ["publish", str(folder), "--repo-id", "org/toy-probes", "--dry-run"], terminal_width=200
    )
    assert result.exit_code == 0, result.output
    text = _plain(result.output)
    assert "build_manifest.json" in text and "data/main/test-00000-of-00003.parquet" in text
    assert "would commit: 'Publish toy-probes 1.0.0'" in text and "would create tag v1.0.0" in text
    assert "offline mode" in text


def test_cli_publish_with_a_fake_hub(tmp_path, monkeypatch):
    hub = FakeHub()
    monkeypatch.setattr(pub_hub, "make_api", lambda: hub)
    folder = prompt_folder(tmp_path)
    first = runner.invoke(app, ["publish", str(folder), "--repo-id", "org/t", "--private"], terminal_width=200)
    assert first.exit_code == 0, first.output
    assert "create tag v1.0.0" in _plain(first.output) and hub.repos["org/t"]["private"]
    again = runner.invoke(app, ["publish", str(folder), "--repo-id", "org/t"], terminal_width=200)
    assert again.exit_code == 0 and "no commit" in _plain(again.output)
    assert len(hub.commits("org/t")) == 1


# --------------------------------------------------------------------------- token hygiene


def test_token_never_appears_in_errors(tmp_path, monkeypatch):
    secret = "plain-secret-value-42"  # not hf_-shaped: scrubbed because it is the known token
    monkeypatch.setenv("HF_TOKEN", secret)
    hub = FakeHub(token=None)

    def leaky_commit(*args, **kwargs):
        raise HfHubHTTPError(
            f"401 Client Error: Unauthorized. Authorization: Bearer {secret}; also {TOKEN}",
            response=hub_response(401, "POST"),
        )

    monkeypatch.setattr(hub, "create_commit", leaky_commit)
    folder = prompt_folder(tmp_path)
    with pytest.raises(ProbeError) as info:
        publish(folder, "org/toy-probes", api=hub)
    message = str(info.value)
    assert secret not in message and TOKEN not in message and "***" in message
    assert "401" in message and "hf auth login" in message
    assert info.value.__cause__ is None and info.value.__suppress_context__

    monkeypatch.setattr(pub_hub, "make_api", lambda: hub)
    result = runner.invoke(app, ["publish", str(folder), "--repo-id", "org/toy-probes"], terminal_width=200)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert secret not in result.output and TOKEN not in result.output and "401" in result.output


def test_scrub_masks_known_and_token_shaped_secrets():
    text = "token=abcdefgh12345 Bearer zzzzzzzzzz hf_ABCDEFGHIJKL0123 mine-1234 and your token has rights"
    assert scrub(text, ["mine-1234", None]) == "token=*** Bearer *** hf_*** *** and your token has rights"


# --------------------------------------------------------------------------- input errors and planning


def test_missing_folder_and_neither_kind_are_clear_errors(tmp_path):
    hub = FakeHub()
    with pytest.raises(ProbeError, match="no such folder"):
        publish(tmp_path / "nope", "org/x", api=hub)
    plain = tmp_path / "plain"
    (plain / "data").mkdir(parents=True)
    (plain / "README.md").write_text("# hi\n")
    with pytest.raises(ProbeError, match=r"neither a prompt dataset folder .* nor a result folder"):
        publish(plain, "org/x", api=hub)
    assert hub.writes == []

    missing = runner.invoke(app, ["publish", str(tmp_path / "nope"), "--repo-id", "org/x"], terminal_width=200)
    assert missing.exit_code == 1 and "no such folder" in _plain(missing.output)
    assert "Traceback" not in missing.output


def test_folder_checks(tmp_path):
    folder = prompt_folder(tmp_path)
    hub = FakeHub()
    with pytest.raises(ProbeError, match="ORG/NAME"):
        publish(folder, "no-namespace", api=hub)
    stray = folder / "data" / "main" / "test-00009-of-00009.parquet"
    stray.write_bytes(b"stale")
    with pytest.raises(ProbeError, match="not listed in the manifest"):
        publish(folder, "org/x", api=hub)
    stray.unlink()
    (folder / ".build.tmp").write_text("hidden leftovers are never published\n")
    assert ".build.tmp" not in {e.path for e in publish(folder, "org/x", api=hub, dry_run=True).plan.entries}
    (folder / "results_manifest.json").write_text("{}")
    with pytest.raises(ProbeError, match="both"):
        publish(folder, "org/x", api=hub)
    assert hub.writes == []


def test_plan_publish_compares_lfs_sha256_and_git_blob_sha1(tmp_path):
    folder = prompt_folder(tmp_path)
    files = local_files(folder)
    parquet = sorted(p for p in files if p.endswith(".parquet"))
    readme = files["README.md"]
    remote = [
        RemoteFile("README.md", len(readme), git_blob_sha1(readme)),  # regular, same blob -> unchanged
        RemoteFile("build_manifest.json", 2, git_blob_sha1(b"{}")),  # regular, other blob -> update
        # LFS: the blob id is the pointer's, only the sha256 counts
        RemoteFile(parquet[0], len(files[parquet[0]]), "0" * 40, hashlib.sha256(files[parquet[0]]).hexdigest()),
        RemoteFile(parquet[1], len(files[parquet[1]]), git_blob_sha1(files[parquet[1]]), "f" * 64),  # -> update
        RemoteFile("data/old/test-00000-of-00001.parquet", 7, "1" * 40, "2" * 64),  # stale data -> delete
        RemoteFile(".gitattributes", 10, "3" * 40),  # outside data/ -> left alone, not listed
    ]
    plan = plan_publish(folder, remote)
    actions = {e.path: e.action for e in plan.entries}
    assert actions == {
        "README.md": "unchanged",
        "build_manifest.json": "update",
        parquet[0]: "unchanged",
        parquet[1]: "update",
        parquet[2]: "add",
        "data/old/test-00000-of-00001.parquet": "delete",
    }
    assert plan.summary() == "1 add, 2 update, 1 delete, 2 unchanged"
    assert [e.path for e in plan.entries] == sorted(actions)
    assert not plan_publish(folder, [RemoteFile(p, len(b), git_blob_sha1(b)) for p, b in files.items()]).changed


def test_help_documents_every_flag():
    text = _plain(runner.invoke(app, ["publish", "--help"], terminal_width=200).output)
    for flag in ("--repo-id", "--revision-tag", "--private", "--dry-run", "--message"):
        line = next(line for line in text.splitlines() if flag in line)
        assert len(line.split(flag, 1)[1].strip()) > 10, f"{flag} has no help text"
    assert "--token" not in text


# --------------------------------------------------------------------------- strict folder checks


def _dry_run_error(folder: Path) -> str:
    """The CLI's dry run refuses the folder: exit 1, one line; returns it."""
    result = runner.invoke(app, ["publish", str(folder), "--repo-id", "org/x", "--dry-run"], terminal_width=200)
    text = _plain(result.output)
    assert result.exit_code == 1 and "Traceback" not in text, text
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Nothing was uploaded" in lines[0], text
    return lines[0]


def test_symlinks_are_refused_naming_each(tmp_path):
    """A symlinked secret used to be planned as `add` (and a symlinked folder followed)."""
    secret = tmp_path / "secret.txt"
    secret.write_text("hf_not_for_the_hub\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "part-00000of00001-000000.parquet").write_bytes(b"x")
    for folder in (prompt_folder(tmp_path / "p"), results_folder(tmp_path / "r")):
        (folder / "notes.txt").symlink_to(secret)
        config_dir = next(p for p in (folder / "data").iterdir())
        (config_dir / "linked").symlink_to(outside, target_is_directory=True)
        line = _dry_run_error(folder)
        assert f"symlink notes.txt (-> {secret})" in line
        assert f"symlink data/{config_dir.name}/linked (-> {outside})" in line
        with pytest.raises(ProbeError, match="symlink"):
            publish(folder, "org/x", api=FakeHub())
        (folder / "notes.txt").unlink()
        (config_dir / "linked").unlink()
        assert publish(folder, "org/x", api=FakeHub(), dry_run=True).will_commit  # publishable once removed


def test_only_the_files_the_format_defines_are_published(tmp_path):
    prompts = prompt_folder(tmp_path / "p")
    (prompts / "notes.txt").write_text("mine\n")
    (prompts / "data" / "main" / "extra.csv").write_text("a,b\n")
    line = _dry_run_error(prompts)
    assert (
        "not part of a prompt folder: data/main/extra.csv" in line and "not part of a prompt folder: notes.txt" in line
    )

    results = results_folder(tmp_path / "r")
    key_dir = next(results.rglob("key.json")).parent
    (key_dir / "part-broken.parquet").write_bytes(b"x")  # not a part name the runner writes
    (results / "data" / "single_actor" / "loose.parquet").write_bytes(b"x")
    (results / "report.html").write_text("<html>")
    line = _dry_run_error(results)
    rel = key_dir.relative_to(results).as_posix()
    for name in (f"{rel}/part-broken.parquet", "data/single_actor/loose.parquet", "report.html"):
        assert f"not part of a results folder: {name}" in line
    # hidden leftovers of atomic writes are still skipped, not refused
    (key_dir / "part-broken.parquet").unlink()
    (results / "data" / "single_actor" / "loose.parquet").unlink()
    (results / "report.html").unlink()
    (key_dir / ".part-00000of00001-000009.parquet.abc.tmp").write_bytes(b"x")
    assert publish(results, "org/x", api=FakeHub(), dry_run=True).will_commit


def test_results_are_validated_naming_every_problem(tmp_path):
    """A truncated part, duplicate ids and a stale manifest are all named in one refusal."""
    from runners import results as res

    folder = results_folder(tmp_path / "r", parts=3)
    parts = sorted(folder.rglob("part-*.parquet"))
    parts[0].write_bytes(parts[0].read_bytes()[:200])  # a copy cut short
    key = res.ResultKey("toy/other", "def456", '{"choice_mode":"letter"}')
    other = res.key_dir(folder, "single_actor", key)
    res.write_key_file(other, key)
    rows = [{"id": "dup", **key.as_dict(), "refused": False}]
    res.write_part(other, (0, 2), rows)
    res.write_part(other, (1, 2), rows)  # two workers scored the same item
    stray = res.ResultKey("toy/model", "abc123", '{"choice_mode":"sentence"}')
    res.write_part(other, (0, 2), [{"id": "x", **stray.as_dict(), "refused": False}])  # another key's row
    hub = FakeHub()
    with pytest.raises(ProbeError) as info:
        publish(folder, "org/x", api=hub, dry_run=True)
    message = str(info.value)
    first = parts[0].relative_to(folder).as_posix()
    other_rel = other.relative_to(folder).as_posix()
    assert f"unreadable part {first}" in message
    assert f"duplicate ids under {other_rel}: 1 id(s) appear more than once, e.g. 'dup'" in message
    assert "column 'model' holds ['toy/model'], its key.json says 'toy/other'" in message
    assert f"results_manifest.json does not list {other_rel}" in message
    assert hub.writes == []
    line = _dry_run_error(folder)
    assert "unreadable part" in line and "duplicate ids" in line

    ok = results_folder(tmp_path / "ok", parts=2)
    (ok / "results_manifest.json").write_text(
        (ok / "results_manifest.json").read_text().replace('"rows": 10', '"rows": 12')
    )
    with pytest.raises(
        ProbeError, match=r"results_manifest.json says 12 rows for data/single_actor/\S+, its parts hold 10"
    ):
        publish(ok, "org/x", api=hub, dry_run=True)


def test_a_folder_mixing_prompt_builds_is_refused(tmp_path):
    """Runs of one config on two builds (the manifest says so), or one key's rows on two builds (the parts'
    prompt-content labels say so), are refused: the rows would join to one build's prompts."""
    from runners import results as res

    folder = results_folder(tmp_path / "r", parts=1)
    key = res.ResultKey("toy/other", "def456", '{"choice_mode":"sentence"}')
    other = res.key_dir(folder, "single_actor", key)
    res.write_key_file(other, key)
    res.write_part(other, (0, 1), [{"id": "i0-0", **key.as_dict(), "refused": False}], content="a" * 64)
    res.write_part(other, (0, 1), [{"id": "i0-1", **key.as_dict(), "refused": False}], content="b" * 64)
    prompts = {"path": "toy-probes", "config": "single_actor", "fingerprint": "e" * 64}
    entry = {"prompt_dataset": prompts, "items": 2, "key": other.name}
    res.update_manifest(folder, "single_actor/other", entry)
    with pytest.raises(ProbeError) as info:
        publish(folder, "org/x", api=FakeHub(), dry_run=True)
    message = str(info.value)
    assert "holds rows scored on 2 prompt builds (fingerprint eeeeeeeeeeee, fingerprint ffffffffffff)" in message
    assert f"{other.relative_to(folder).as_posix()}: rows scored on 2 prompt builds" in message


def test_results_manifest_and_key_files_are_read_as_run_and_analyze_read_them(tmp_path):
    """Publish reads a result folder with the runners' readers: one fault, one line, in every command."""
    from runners import results as res

    folder = results_folder(tmp_path / "r", parts=1)
    manifest = folder / res.MANIFEST_NAME
    manifest.write_text("[]")
    with pytest.raises(ProbeError) as info:
        publish(folder, "org/x", api=FakeHub(), dry_run=True)
    with pytest.raises(ProbeError) as read:
        res.read_manifest(folder)
    assert str(info.value) == str(read.value) and "expected a JSON object, got list" in str(info.value)

    folder = results_folder(tmp_path / "k", parts=1)
    key_dir = next(folder.rglob(res.KEY_FILE)).parent
    (key_dir / res.KEY_FILE).write_text("[1]")
    with pytest.raises(res.KeyFileError, match="is not a JSON object"):
        res.read_key_file(key_dir)
    rel = key_dir.relative_to(folder).as_posix()
    with pytest.raises(ProbeError, match=f"{rel}/key.json is not a JSON object"):
        publish(folder, "org/x", api=FakeHub(), dry_run=True)


def test_dry_run_shows_the_validation(tmp_path):
    folder = results_folder(tmp_path / "r", parts=2)
    result = runner.invoke(app, ["publish", str(folder), "--repo-id", "org/x", "--dry-run"], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = _plain(result.output)
    assert "checked: 5 files, all defined by the result folder format, none a symlink" in text
    assert (
        "checked: 2 parts of 1 keys in 1 configs are readable parquet with the result schema; 10 rows, "
        "one per (key, id)" in text
    )
    assert "checked: no token or home-folder path in the card, any JSON value or any string" in text
    assert "checked: results_manifest.json lists exactly these keys with these row counts" in text
    prompts = runner.invoke(
        app, ["publish", str(prompt_folder(tmp_path / "p")), "--repo-id", "org/p", "--dry-run"], terminal_width=200
    )
    assert "checked: every data file matches build_manifest.json (sha256)" in _plain(prompts.output)


# --------------------------------------------------------------------------- content: tokens and private paths


def prompt_folder_with(out: Path, notes: dict[int, str], contents: dict[int, str]) -> Path:
    """A prompt folder with probe metadata columns: `note` (string) and `messages` (list of structs)."""
    features = Features(
        {
            "id": Value("string"),
            "note": Value("string"),
            "messages": [{"role": Value("string"), "content": Value("string")}],
        }
    )

    def batches():
        ids = range(30)
        yield {
            "id": [f"r{i}" for i in ids],
            "note": [notes.get(i, "plain words about ~ and hf_ and /home") for i in ids],
            "messages": [[{"role": "user", "content": contents.get(i, "Who gets the 2/3 bonus?")}] for i in ids],
        }

    def card(manifest, written):
        front = card_front_matter(pretty_name="toy", license="cc0-1.0", tags=[], configs=written, default_config="main")
        return f"---\n{front}---\n# toy\n"

    manifest = {
        "name": "toy-probes",
        "version": "1.0.0",
        "recipe": {"sha256": "0" * 64},
        "parameters": {},
        "sources": [],
    }
    return write_hub_folder(
        out, "toy-probes", [ConfigData("main", features, batches)], manifest=manifest, render_card=card,
        rows_per_shard=10,
    )  # fmt: skip


def test_publish_refuses_a_token_or_the_folders_path_in_the_card(tmp_path):
    folder = prompt_folder(tmp_path)
    card = folder / "README.md"
    clean = card.read_text()
    card.write_text(clean + f"\nload with token {TOKEN}\n")
    line = _dry_run_error(folder)
    assert "README.md line " in line and ": a Hugging Face token" in line and TOKEN not in line
    card.write_text(clean + f"\nbuilt in {folder.resolve()}/data\n")
    assert "the absolute path of the published folder" in _dry_run_error(folder)
    card.write_text(clean)
    assert publish(folder, "org/x", api=FakeHub(), dry_run=True).will_commit  # a clean folder still passes
    card.write_text(clean + "\nfaster uploads: pip install hf_transfer; see hf_quantizer_config\n")
    assert publish(folder, "org/x", api=FakeHub(), dry_run=True).will_commit  # words are not tokens


def test_publish_refuses_a_home_path_in_a_manifest_field(tmp_path):
    prompts = prompt_folder(tmp_path / "p")
    path = prompts / "build_manifest.json"
    manifest = json.loads(path.read_text())
    manifest["parameters"] = {"seed": 1, "model": {"paths": ["ok", "/home/alice/models/llama"]}}
    path.write_text(json.dumps(manifest))
    assert "build_manifest.json $.parameters.model.paths[1]: a home-folder path" in _dry_run_error(prompts)

    results = results_folder(tmp_path / "r")
    path = results / "results_manifest.json"
    path.write_text(path.read_text().replace('"path": "toy-probes"', '"path": "C:\\\\Users\\\\bob\\\\toy-probes"'))
    line = _dry_run_error(results)
    assert "results_manifest.json $.runs['single_actor/run'].prompt_dataset.path: a home-folder path" in line


def test_publish_refuses_a_token_or_home_path_in_any_parquet_column(tmp_path):
    """Probe metadata columns are allowed in prompt datasets, but their content is checked, nested ones too."""
    folder = prompt_folder_with(tmp_path, {7: f"scored with {TOKEN}", 8: TOKEN}, {12: "read C:\\Users\\bob\\notes.txt"})
    line = _dry_run_error(folder)
    assert "data/main/test-00000-of-00003.parquet row id 'r7' column 'note': a Hugging Face token (2 rows)" in line
    assert "data/main/test-00001-of-00003.parquet row id 'r12' column 'messages[].content': a home-folder path" in line
    assert TOKEN not in line

    clean = prompt_folder_with(tmp_path / "clean", {}, {})
    assert publish(clean, "org/x", api=FakeHub(), dry_run=True).will_commit


def test_publish_refuses_org_tokens_hidden_tokens_and_absolute_data_paths(tmp_path):
    """An `api_org_` token, a token split by a zero-width character or wrapped over two lines, and absolute
    paths outside home folders (`/workspace/...`, `/scratch/...`, `/mnt/...`, `/tmp/...`) all went up."""
    org = "api_org_" + "Q7w" * 11
    hidden = TOKEN[:10] + "\u200b" + TOKEN[10:]
    folder = prompt_folder(tmp_path)
    card = folder / "README.md"
    clean = card.read_text()
    cases = {
        f"\norg key {org}\n": "a Hugging Face token",
        f"\nkey {hidden}\n": "a Hugging Face token",
        f"\nkey {TOKEN[:12]}\n    {TOKEN[12:]}\n": "a Hugging Face token split across lines",
        "\nweights in /workspace/alice/llama\n": "an absolute local path",
        "\ncache /scratch/u123/hf\n": "an absolute local path",
        "\nmounted at /mnt/data/models\n": "an absolute local path",
        "\ntmp copy /tmp/tmpab12/x.json\n": "an absolute local path",
    }
    for text, kind in cases.items():
        card.write_text(clean + text)
        line = _dry_run_error(folder)
        assert "README.md line " in line and f": {kind}" in line, (text, line)
        assert org not in line and TOKEN not in line and TOKEN[12:] not in line
    # words, URLs and relative paths are not leaks
    card.write_text(clean + "\nsee https://example.org/tmp/x and data/main/*.parquet, and/or 2/3 of items\n")
    assert publish(folder, "org/x", api=FakeHub(), dry_run=True).will_commit
    # the same in a parquet column, a zero-width character inside
    inside = prompt_folder_with(tmp_path / "p", {3: hidden, 14: "/mnt/nfs/run/out.json"}, {5: f"key {org}"})
    line = _dry_run_error(inside)
    assert "row id 'r3' column 'note': a Hugging Face token" in line
    assert "row id 'r14' column 'note': an absolute local path" in line
    assert "row id 'r5' column 'messages[].content': a Hugging Face token" in line


def test_result_parts_must_have_the_result_schema(tmp_path):
    folder = results_folder(tmp_path / "r", parts=2)
    first, second = sorted(folder.rglob("part-*.parquet"))
    table = pq.read_table(first)
    pq.write_table(table.append_column("note", pa.array(["x"] * len(table))), first)
    table = pq.read_table(second)
    index = table.schema.get_field_index("chosen_index")
    pq.write_table(table.set_column(index, "chosen_index", table["chosen_index"].cast(pa.string())), second)
    line = _dry_run_error(folder)
    rel = first.relative_to(folder).as_posix()
    assert f"part {rel}: column 'note' is not in the result schema" in line
    rel = second.relative_to(folder).as_posix()
    assert f"part {rel}: column 'chosen_index' is string, the result schema says int64" in line
    table = pq.read_table(second)
    pq.write_table(table.drop_columns(["chosen_index"]), second)
    assert f"part {rel}: no column 'chosen_index'" in _dry_run_error(folder)


# --------------------------------------------------------------------------- content: every secret shape, any shell

SERVER_KEY = "sk-proj-" + "Wq8_" * 10


def test_publish_refuses_a_server_key_whatever_the_shell_holds(tmp_path, monkeypatch):
    """A model server's key echoed into generated text was published once OPENAI_API_KEY was unset, and named
    "a known Hugging Face token" while it was set."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    folder = results_folder(tmp_path / "r", generated=f"Sure. My instructions say the key is {SERVER_KEY}.")
    line = _dry_run_error(folder)
    assert "row id 'i0-0' column 'generated_text': an OpenAI-style API key (5 rows)" in line, line
    assert SERVER_KEY not in line and "Hugging Face" not in line
    monkeypatch.setenv("OPENAI_API_KEY", SERVER_KEY)
    line = _dry_run_error(folder)
    assert "column 'generated_text': a secret held in $OPENAI_API_KEY" in line and "Hugging Face" not in line, line
    monkeypatch.setenv("HF_TOKEN", "plainsecret1234")  # a token of any shape, known from the environment
    clean = results_folder(tmp_path / "h", generated="ok plainsecret1234")
    assert "a Hugging Face token held in $HF_TOKEN" in _dry_run_error(clean)


def test_publish_refuses_what_the_variable_a_served_run_read_its_key_from_holds(tmp_path, monkeypatch):
    """`--api-key-env MY_SERVER_KEY`: the manifest records the variable's name (never its value), and a later
    publishing shell that holds it has its value refused, whatever its shape, in a fresh process."""
    from runners import results as res

    secret = "plain-key-of-no-known-shape-7f3a"
    folder = results_folder(tmp_path / "r", generated=f"echo {secret}")
    manifest = res.read_manifest(folder)
    run_id, entry = next(iter(manifest["runs"].items()))
    res.update_manifest(folder, run_id, entry | {"hardware": {"api_key_env": "MY_SERVER_KEY"}})
    assert secret not in (folder / "results_manifest.json").read_text()
    monkeypatch.delenv("MY_SERVER_KEY", raising=False)
    cmd = [sys.executable, "-m", "probes.cli", "publish", str(folder), "--repo-id", "org/x", "--dry-run"]
    assert subprocess.run(cmd, capture_output=True, text=True).returncode == 0  # nothing known to look for
    refused = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "MY_SERVER_KEY": secret})
    assert refused.returncode == 1 and "a secret held in $MY_SERVER_KEY" in refused.stderr, refused.stderr
    assert secret not in refused.stderr + refused.stdout


def test_publish_refuses_tokens_and_keys_split_by_invisible_characters(tmp_path):
    """Zero-width and other invisible characters (the invisible separator, a left-to-right mark, the Mongolian
    vowel separator) hide a token from a plain search but not from a reader."""
    folder = prompt_folder(tmp_path)
    card = folder / "README.md"
    clean = card.read_text()
    cases = {
        TOKEN[:9] + "\u2063" + TOKEN[9:]: "a Hugging Face token",
        TOKEN[:9] + "\u180e" + TOKEN[9:]: "a Hugging Face token",
        SERVER_KEY[:12] + "\u200b" + SERVER_KEY[12:]: "an OpenAI-style API key",
        "sk-" + "\u034f" + SERVER_KEY[3:]: "an OpenAI-style API key",
    }
    for hidden, kind in cases.items():
        card.write_text(clean + f"\nkey {hidden}\n")
        line = _dry_run_error(folder)
        assert "README.md line " in line and f": {kind}" in line, (hidden, line)
    inside = prompt_folder_with(tmp_path / "p", {4: TOKEN[:9] + "\u2063" + TOKEN[9:]}, {6: cases_key(SERVER_KEY)})
    line = _dry_run_error(inside)
    assert "row id 'r4' column 'note': a Hugging Face token" in line, line
    assert "row id 'r6' column 'messages[].content': an OpenAI-style API key" in line, line


def cases_key(key: str) -> str:
    """`key` split by a zero-width space, as pasted from a chat window."""
    return key[:10] + "\u200b" + key[10:]


#: what a server reports as a model's `root`/`parent`, or a path in a card, and the kind each is named by
SERVER_PATHS = {
    "file:///srv/models/llama": "a file:// URL",
    "FILE://fileserver/share/llama": "a file:// URL",
    "//fileserver/share/llama": "a network share path",
    "\\\\fileserver\\share\\llama": "a network share path",
    "models/private//tmp/tmpab12/llama": "an absolute local path",
    "/home2/alice/llama": "a home-folder path",
    "/homes/alice/llama": "a home-folder path",
}


def test_publish_refuses_file_urls_share_paths_and_glued_paths(tmp_path):
    """Each is refused in a manifest field (named by JSON path) and in the card; prose, https URLs and
    protocol-relative links still pass."""
    results = results_folder(tmp_path / "r")
    path = results / "results_manifest.json"
    manifest = json.loads(path.read_text())
    prompts = prompt_folder(tmp_path / "p")
    card = prompts / "README.md"
    clean = card.read_text()
    for text, kind in SERVER_PATHS.items():
        manifest["runs"]["single_actor/run"]["hardware"] = {"server": {"root": text}}
        path.write_text(json.dumps(manifest))
        line = _dry_run_error(results)
        assert f"results_manifest.json $.runs['single_actor/run'].hardware.server.root: {kind}" in line, line
        card.write_text(clean + f"\nweights: {text}\n")
        line = _dry_run_error(prompts)
        assert f"README.md line {len(clean.splitlines()) + 2}: {kind}" in line, (text, line)
    card.write_text(
        clean + '\nsee https://example.org//x/y, <img src="//cdn.example.org/a.png">, sk-learn, a/b//c, homepage\n'
    )
    assert publish(prompts, "org/x", api=FakeHub(), dry_run=True).will_commit


def test_publish_refuses_a_model_name_with_bidirectional_controls(tmp_path):
    """`org/\u202eevil` displays as `org/live`: a Trojan-Source-style spoof of another model's name."""
    folder = results_folder(tmp_path / "r", model="org/\u202eevil")
    line = _dry_run_error(folder)
    assert "key.json $.model: a bidirectional control character" in line, line
    assert "results_manifest.json" in line and "column 'model': a bidirectional control character" in line, line
    assert "\u202e" not in line


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("org/m1\u200b", "invisible or unprintable character (U+200B)"),
        ("\uff4f\uff52\uff47/m1", "give it as 'org/m1'"),
        ("org/../../x", "has a '..' part"),
        ("org/", "has an empty part"),
    ],
)
def test_publish_refuses_a_model_name_that_run_and_import_refuse(tmp_path, model, says):
    """Issue #69: publish took `org/m1\u200b` (shown as `org/m1`), fullwidth letters and path steps as model names."""
    folder = results_folder(tmp_path / "r", model=model)
    line = _dry_run_error(folder)
    assert "/key.json $.model: the model name" in line and says in line, line
    assert "\u200b" not in line


def test_publish_refuses_rows_whose_numbers_break_the_rule(tmp_path):
    """A non-refused NaN distribution and a `chosen_index` that is not the argmax (issue #51): each named by
    part file, row id and column. Before: `--dry-run` accepted both; only `analyze` refused the NaN."""
    folder = results_folder(tmp_path / "r", parts=1)
    (part,) = folder.rglob("part-*.parquet")
    table = pq.read_table(part)
    n = len(table)
    probs = [[0.25, 0.75]] * n
    probs[1] = [math.nan, math.nan]  # the server's NaN, not refused
    chosen = [1] * n
    chosen[3] = 0  # 0.25 is not the highest of [0.25, 0.75]
    for name, values in (("choice_probs", probs), ("chosen_index", chosen)):
        index = table.schema.get_field_index(name)
        table = table.set_column(index, table.schema.field(index), pa.array(values, table.schema.field(index).type))
    pq.write_table(table, part)
    ids = table["id"].to_pylist()
    rel = part.relative_to(folder).as_posix()
    line = _dry_run_error(folder)
    assert f"part {rel}: row id {ids[1]!r}, column 'choice_probs' holds NaN, and the row is not refused" in line
    assert f"part {rel}: row id {ids[3]!r}, column 'chosen_index' is not the option of highest choice_probs" in line


# --------------------------------------------------------------------------- content: parquet schema and field metadata

#: what a tool run in a shell holding keys wrote into a parquet file's metadata (issue #69, finding 4)
META_KEY = "sk-" + "a" * 40
META_TOKEN = "hf_" + "Qz" * 17


def _annotated(schema: pa.Schema, metadata: dict[str, str], fields: dict[str, dict[str, str]]) -> pa.Schema:
    """`schema` with `metadata` added to its own and each field that `fields` names (by the path publish names
    it by: `note`, `messages[].content`, `choice_probs[]`) given that metadata."""

    def annotate(field: pa.Field, path: str) -> pa.Field:
        kind = field.type
        if pa.types.is_list(kind):
            kind = pa.list_(annotate(kind.value_field, f"{path}[]"))
        elif pa.types.is_struct(kind):
            kind = pa.struct([annotate(kind.field(i), f"{path}.{kind.field(i).name}") for i in range(kind.num_fields)])
        field = field.with_type(kind)
        return field.with_metadata({**(field.metadata or {}), **fields[path]}) if path in fields else field

    return pa.schema([annotate(f, f.name) for f in schema], metadata={**(schema.metadata or {}), **metadata})


def _rewrite_with_metadata(
    path: Path,
    metadata: dict[str, str] | None = None,
    fields: dict[str, dict[str, str]] | None = None,
    file_metadata: dict[str, str] | None = None,
) -> None:
    """Rewrite the parquet file `path` with the same rows and the given schema, field and footer metadata."""
    table = pq.read_table(path)
    schema = _annotated(table.schema, metadata or {}, fields or {})
    table = pa.Table.from_arrays([c.cast(f.type) for c, f in zip(table.columns, schema, strict=True)], schema=schema)
    with pq.ParquetWriter(path, schema) as writer:
        writer.write_table(table)
        if file_metadata:
            writer.add_key_value_metadata(file_metadata)
    written = pq.ParquetFile(path).schema_arrow
    assert written.equals(schema, check_metadata=True), (written, schema)  # the metadata did reach the file


def _rehash_build_manifest(folder: Path) -> None:
    """Record the data files' new sizes and sha256 in build_manifest.json (as a rebuild would)."""
    path = folder / "build_manifest.json"
    manifest = json.loads(path.read_text())
    for config in manifest["configs"].values():
        for entry in config["files"]:
            data = (folder / entry["path"]).read_bytes()
            entry["bytes"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    path.write_text(json.dumps(manifest, indent=2))


#: (schema metadata, field metadata, footer metadata) -> where the refusal says the leak is, and what it is
METADATA_CASES = [
    ({"note": META_KEY}, {}, {}, "schema metadata key 'note': an OpenAI-style API key"),
    ({"built_with": f'{{"token": "{META_TOKEN}"}}'}, {}, {}, "schema metadata key 'built_with': a Hugging Face token"),
    ({}, {"TOP": {"comment": META_TOKEN}}, {}, "field 'TOP' metadata key 'comment': a Hugging Face token"),
    ({}, {"NESTED": {"key": META_KEY}}, {}, "field 'NESTED' metadata key 'key': an OpenAI-style API key"),
    ({}, {}, {"extra": META_TOKEN}, "file metadata key 'extra': a Hugging Face token"),
    # JSON that escapes its slashes hides a path from a plain search: its strings are read decoded
    ({"tool": '{"cache": "\\/home\\/alice\\/hf"}'}, {}, {}, "schema metadata key 'tool': a home-folder path"),
]


@pytest.mark.parametrize("kind", ["results", "prompts"])
def test_publish_refuses_a_secret_in_parquet_schema_or_field_metadata(tmp_path, kind):
    """A results part's or a prompt shard's schema metadata, a column's field metadata, a nested field's, or the
    footer's key-value metadata holding a key: `--dry-run` passed all of them (issue #69, finding 4); each is now
    refused in one line naming the file, where in it and the key, never the secret."""
    if kind == "results":
        folder = results_folder(tmp_path / "r", parts=1, generated="ok")
        (part,) = folder.rglob("part-*.parquet")
        top, nested = "generated_text", "choice_probs[]"
    else:
        folder = prompt_folder_with(tmp_path / "p", {}, {})
        part = folder / "data" / "main" / "test-00001-of-00003.parquet"
        top, nested = "note", "messages[].content"
    rel = part.relative_to(folder).as_posix()
    clean = part.read_bytes()
    for metadata, fields, footer, where in METADATA_CASES:
        fields = {{"TOP": top, "NESTED": nested}[name]: meta for name, meta in fields.items()}
        where = where.replace("'TOP'", repr(top)).replace("'NESTED'", repr(nested))
        _rewrite_with_metadata(part, metadata, fields, footer)
        if kind == "prompts":
            _rehash_build_manifest(folder)
        line = _dry_run_error(folder)
        assert f"{rel} {where}" in line and "1 problem(s)" in line, (where, line)
        assert META_KEY not in line and META_TOKEN not in line and META_TOKEN[3:] not in line
        part.write_bytes(clean)
    if kind == "prompts":
        _rehash_build_manifest(folder)
        assert b"huggingface" in pq.ParquetFile(part).schema_arrow.metadata  # datasets' own metadata passes
    assert publish(folder, "org/x", api=FakeHub(), dry_run=True).will_commit


def test_parquet_metadata_that_is_ordinary_passes_and_leaky_names_are_not_printed(tmp_path):
    """Ordinary metadata (datasets' `huggingface` features, pandas', a description naming `hf_transfer` and an
    https URL) passes; a key or a column name that is itself a secret is named by position, not printed; a
    bidirectional control in metadata is refused as it is in JSON."""
    folder = prompt_folder_with(tmp_path / "p", {}, {})
    part = folder / "data" / "main" / "test-00000-of-00003.parquet"
    rel = part.relative_to(folder).as_posix()
    clean = part.read_bytes()
    pandas = json.dumps({"index_columns": [], "columns": [{"name": "id"}], "pandas_version": "2.2.3"})
    _rewrite_with_metadata(
        part,
        {"pandas": pandas, "description": "see https://example.org/tmp/x; pip install hf_transfer"},
        {"messages[].content": {"description": "what the user says, in plain words"}},
    )
    _rehash_build_manifest(folder)
    assert publish(folder, "org/x", api=FakeHub(), dry_run=True).will_commit

    part.write_bytes(clean)
    _rewrite_with_metadata(part, {META_KEY: "x"})
    _rehash_build_manifest(folder)
    line = _dry_run_error(folder)
    assert f"{rel} schema metadata key #" in line and "an OpenAI-style API key" in line and META_KEY not in line

    part.write_bytes(clean)
    table = pq.read_table(part)
    pq.write_table(table.rename_columns(["id", META_TOKEN, "messages"]), part)
    _rehash_build_manifest(folder)
    line = _dry_run_error(folder)
    assert f"{rel} field '#1' name: a Hugging Face token" in line and META_TOKEN not in line, line

    part.write_bytes(clean)
    _rewrite_with_metadata(part, {}, {"note": {"model": "org/\u202eevil"}})
    _rehash_build_manifest(folder)
    line = _dry_run_error(folder)
    assert f"{rel} field 'note' metadata key 'model': a bidirectional control character" in line, line
