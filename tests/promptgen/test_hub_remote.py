"""Reads of a Hub dataset at one commit (`promptgen.hub.remote`), against a real Hub server (olah)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hub_server import HubServer, fault_proxy

READ = """
import json, sys
from promptgen.hub import remote
from promptgen.core.errors import ProbeError
try:
    ref = remote.resolve({repo!r}, {revision!r})
    manifest = remote.read_build_manifest(ref)
    header = remote.read_card_header(ref)
    print(json.dumps({{"ref": ref.provenance(), "label": ref.label,
                      "version": None if manifest is None else manifest.get("version"),
                      "manifest": manifest is not None, "license": header.get("license"),
                      "configs": remote.config_names(ref)}}))
except ProbeError as exc:
    print("ProbeError:", exc)
    sys.exit(2)
"""


def read(server: HubServer, home: Path, repo: str, revision: str | None = None, **env: str) -> dict:
    out = server.run_python(home, READ.format(repo=repo, revision=revision), **env)
    assert out.returncode == 0, out.stdout
    return json.loads(out.stdout.strip().splitlines()[-1])


def failing(server: HubServer, home: Path, repo: str, revision: str | None = None, **env: str) -> str:
    out = server.run_python(home, READ.format(repo=repo, revision=revision), **env)
    assert out.returncode == 2 and "Traceback" not in out.stdout, out.stdout
    errors = [line for line in out.stdout.strip().splitlines() if line.startswith("ProbeError: ")]
    assert len(errors) == 1 and out.stdout.strip().endswith(errors[0]), out.stdout  # before it: the client's retries
    return errors[0]


@pytest.fixture()
def served(hub_server: HubServer, built_trust_game: Path, request: pytest.FixtureRequest) -> tuple[str, str]:
    """(repo id, commit) of trust-game-names served at a repo of this test's own, tagged v1.3.0."""
    repo = f"org/tg-{request.node.name.replace('_', '-')[:60].strip('-')}"
    return repo, hub_server.publish_folder(repo, built_trust_game, tag="v1.3.0")


def test_revisions_resolve_to_commits_and_files_are_read_at_the_commit(
    hub_server: HubServer, served: tuple[str, str], tmp_path: Path, built_trust_game: Path
) -> None:
    repo, first = served
    at_main = read(hub_server, tmp_path, repo)
    assert at_main["ref"] == {"repo_id": repo, "revision": None, "commit": first}
    assert at_main["version"] == json.loads((built_trust_game / "build_manifest.json").read_text())["version"]
    assert at_main["license"] and "race_probe" in at_main["configs"]
    # main moves: another manifest; the tag and the old commit still read the first one
    moved = json.loads((built_trust_game / "build_manifest.json").read_text()) | {"version": "9.9.9"}
    second = hub_server.write_files(repo, {"build_manifest.json": json.dumps(moved).encode()}, message="move main")
    assert read(hub_server, tmp_path, repo)["ref"]["commit"] == second
    assert read(hub_server, tmp_path, repo)["version"] == "9.9.9"
    for revision in ("v1.3.0", first):
        old = read(hub_server, tmp_path, repo, revision)
        assert old["ref"] == {"repo_id": repo, "revision": revision, "commit": first} and old["version"] != "9.9.9"


def test_a_missing_manifest_is_none_and_a_failing_server_is_one_line(
    hub_server: HubServer, served: tuple[str, str], tmp_path: Path
) -> None:
    repo, _ = served
    commit = hub_server.write_files(repo, {"build_manifest.json": None}, message="no manifest")
    found = read(hub_server, tmp_path, repo)
    assert found["ref"]["commit"] == commit and found["manifest"] is False
    # 501: a server error huggingface_hub does not retry (a 500 would wait its 5 backoffs, about 23 s, first)
    with fault_proxy(hub_server.url, lambda path: 501 if path.endswith("/build_manifest.json") else None) as url:
        line = failing(hub_server, tmp_path / "other-cache", repo, "v1.3.0", HF_ENDPOINT=url)
    assert "cannot read build_manifest.json of prompt dataset" in line and repo in line and "501" in line


def test_an_unknown_repo_or_revision_is_one_line(
    hub_server: HubServer, served: tuple[str, str], tmp_path: Path
) -> None:
    repo, _ = served
    assert "no revision 'v0.0.1'" in failing(hub_server, tmp_path, repo, "v0.0.1")
    assert "no such dataset on the Hub" in failing(hub_server, tmp_path, "org/never-built")


def test_offline_a_revision_resolves_from_the_cache(
    hub_server: HubServer, served: tuple[str, str], tmp_path: Path
) -> None:
    repo, first = served
    read(hub_server, tmp_path, repo)  # online once: the cache records main -> first
    hub_server.write_files(repo, {"extra.txt": b"x"}, message="main moves while we are offline")
    offline = read(hub_server, tmp_path, repo, HF_HUB_OFFLINE="1")
    assert offline["ref"]["commit"] == first and offline["manifest"] is True
    assert "not in the Hugging Face cache" in failing(hub_server, tmp_path, repo, "v1.3.0", HF_HUB_OFFLINE="1")
