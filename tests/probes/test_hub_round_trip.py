"""The whole Hub round trip, offline: build -> publish -> run by Hub id -> publish results -> analyze/export by Hub id.

Publishing goes to the publish tests' in-memory fake, tests/fake_hub.py (olah takes no uploads); each
commit the fake holds is then applied, file for file, to a git repository that olah serves, so every
read after it goes through a real Hub server with the real `huggingface_hub` and `datasets` clients.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fake_hub import FakeHub
from hub_server import HubServer, git
from probes.publish import publish
from runners_fixtures import tiny_llama_folder

PROMPTS, RESULTS = "org/trust-game-names", "org/trust-game-names-results"


def apply_fake(fake: FakeHub, repo_id: str, server: HubServer) -> str:
    """Make the olah repo's main hold the fake's head files (one commit) and carry the fake's tags; its sha."""
    files = fake.files(repo_id)
    target = server.repo(repo_id)
    if (target / ".git").is_dir():
        gone = {p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file() and ".git" not in p.parts}
        server.write_files(repo_id, dict.fromkeys(gone - set(files)), message="remove")
    else:
        target.mkdir(parents=True)
        git(target, "init", "-q", "-b", "main")
    commit = server.write_files(repo_id, files, message=fake.head(repo_id)["title"])
    for tag in fake.repo(repo_id)["tags"]:
        git(target, "tag", "-f", tag)
    return commit


@pytest.mark.slow
def test_build_publish_run_publish_analyze_and_export_through_the_hub(
    hub_server: HubServer, built_trust_game: Path, tmp_path: Path
) -> None:
    fake = FakeHub()
    published = publish(built_trust_game, PROMPTS, api=fake)
    version = json.loads((built_trust_game / "build_manifest.json").read_text())["version"]
    assert published.commit_id and f"v{version}" in fake.repo(PROMPTS)["tags"]
    prompts_commit = apply_fake(fake, PROMPTS, hub_server)

    model = tiny_llama_folder("float32")
    results = tmp_path / "results"
    run = hub_server.run_cli(
        tmp_path, "run", PROMPTS, "-c", "probing", "-m", str(model), "--limit", "8", "--out", str(results)
    )
    assert run.returncode == 0, run.stdout
    assert "(the paper's)" in run.stdout
    [recorded] = [
        r["prompt_dataset"] for r in json.loads((results / "results_manifest.json").read_text())["runs"].values()
    ]
    assert (recorded["repo_id"], recorded["commit"]) == (PROMPTS, prompts_commit)

    publish(results, RESULTS, api=fake)
    results_commit = apply_fake(fake, RESULTS, hub_server)

    report = tmp_path / "report"
    analyzed = hub_server.run_cli(
        tmp_path / "reader", "analyze", "--prompts", PROMPTS, "--results", RESULTS, "--out", str(report), "--no-figures"
    )
    assert analyzed.returncode == 0, analyzed.stdout
    html = (report / "report.html").read_text()
    assert prompts_commit in html and results_commit in html and PROMPTS in html
    fingerprint = json.loads((built_trust_game / "build_manifest.json").read_text())["fingerprint"]
    assert fingerprint in html and (report / "tables" / "trust_game_probing_accuracy.csv").is_file()

    exported = hub_server.run_cli(
        tmp_path / "reader",
        "export",
        RESULTS,
        "--prompts",
        f"{PROMPTS}",
        "--revision",
        f"v{version}",
        "--format",
        "jsonl",
        "--out",
        str(tmp_path / "export"),
    )
    assert exported.returncode == 0, exported.stdout
    lines = (tmp_path / "export" / "probing.jsonl").read_text().splitlines()
    assert len(lines) == 8 and all(json.loads(line)["model"] for line in lines)

    # the prompts' main moves to another build: analysing the published results against it is refused
    moved = json.loads((built_trust_game / "build_manifest.json").read_text()) | {"fingerprint": "0" * 64}
    hub_server.write_files(PROMPTS, {"build_manifest.json": json.dumps(moved).encode()}, message="rebuild")
    refused = hub_server.run_cli(
        tmp_path / "reader", "analyze", "--prompts", PROMPTS, "--results", RESULTS, "--out", str(tmp_path / "r2")
    )
    assert refused.returncode != 0 and "Traceback" not in refused.stdout
    assert "was scored on prompts with fingerprint" in refused.stdout and not (tmp_path / "r2").exists()
