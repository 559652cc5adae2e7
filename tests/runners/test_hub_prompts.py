"""`probes run` on a prompt dataset read by Hub id, through a real Hub server (olah): traceable to its commit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hub_server import HubServer, fault_proxy
from runners_fixtures import tiny_llama_folder

pytestmark = pytest.mark.slow  # each test loads a model in a `probes` process


@pytest.fixture()
def served(hub_server: HubServer, built_trust_game: Path, request: pytest.FixtureRequest) -> tuple[str, str]:
    repo = f"org/tgrun-{request.node.name.replace('_', '-')[:50].strip('-')}"
    return repo, hub_server.publish_folder(repo, built_trust_game, tag="v1.3.0")


def run(server: HubServer, home: Path, repo: str, out: Path, *extra: str, **env: str):
    model = tiny_llama_folder("float32")
    args = ["run", repo, "-c", "race_probe", "-m", str(model), "--limit", "4", "--out", str(out), *extra]
    return server.run_cli(home, *args, **env)


def prompts_of(out: Path) -> list[dict]:
    manifest = json.loads((out / "results_manifest.json").read_text())
    return [r["prompt_dataset"] for r in manifest["runs"].values()]


def test_a_run_by_hub_id_records_the_commit_it_scored_and_the_papers_protocol(
    hub_server: HubServer, served: tuple[str, str], tmp_path: Path, built_trust_game: Path
) -> None:
    repo, commit = served
    out = tmp_path / "results"
    done = run(hub_server, tmp_path, repo, out)
    assert done.returncode == 0, done.stdout
    assert "(the paper's)" in done.stdout and "protocol: none" not in done.stdout
    fingerprint = json.loads((built_trust_game / "build_manifest.json").read_text())["fingerprint"]
    [recorded] = prompts_of(out)
    assert recorded["repo_id"] == repo and recorded["revision"] is None and recorded["commit"] == commit
    assert recorded["fingerprint"] == fingerprint
    card = (out / "README.md").read_text()
    assert commit in card

    tagged = run(hub_server, tmp_path, repo, tmp_path / "tagged", "--revision", "v1.3.0")
    assert tagged.returncode == 0, tagged.stdout
    [recorded] = prompts_of(tmp_path / "tagged")
    assert (recorded["revision"], recorded["commit"]) == ("v1.3.0", commit)


def test_main_moving_to_another_build_is_refused_in_one_results_folder(
    hub_server: HubServer, served: tuple[str, str], tmp_path: Path, built_trust_game: Path
) -> None:
    repo, _ = served
    out = tmp_path / "results"
    assert run(hub_server, tmp_path, repo, out).returncode == 0
    manifest = json.loads((built_trust_game / "build_manifest.json").read_text())
    rebuilt = manifest | {"fingerprint": "0" * 64, "version": "1.3.1"}
    hub_server.write_files(repo, {"build_manifest.json": json.dumps(rebuilt).encode()}, message="another build")
    again = run(hub_server, tmp_path, repo, out)
    assert again.returncode != 0 and "Traceback" not in again.stdout
    assert "holds rows scored on another build of its prompts" in again.stdout
    assert len(prompts_of(out)) == 1  # nothing of the second build was written
    assert run(hub_server, tmp_path, repo, tmp_path / "second").returncode == 0  # its own folder is fine


def test_a_missing_manifest_is_the_no_protocol_line_and_a_failing_one_an_error(
    hub_server: HubServer, served: tuple[str, str], tmp_path: Path
) -> None:
    repo, _ = served
    # 501: a server error huggingface_hub does not retry (a 500 would wait its 5 backoffs, about 23 s, first)
    with fault_proxy(hub_server.url, lambda path: 501 if path.endswith("/build_manifest.json") else None) as url:
        failed = run(hub_server, tmp_path / "proxy-home", repo, tmp_path / "failed", HF_ENDPOINT=url)
    assert failed.returncode != 0 and "Traceback" not in failed.stdout, failed.stdout
    assert "cannot read build_manifest.json of prompt dataset" in failed.stdout and "501" in failed.stdout
    assert not (tmp_path / "failed" / "data").exists()

    commit = hub_server.write_files(repo, {"build_manifest.json": None}, message="manifest removed")
    done = run(hub_server, tmp_path, repo, tmp_path / "results")
    assert done.returncode == 0, done.stdout
    line = f"protocol: none declared by the dataset (the project's default scoring): {repo}@{commit[:12]} has no"
    assert line in " ".join(done.stdout.split())


def test_a_model_config_by_hub_id_is_priced_at_its_commit(hub_server: HubServer, tmp_path: Path) -> None:
    """The plan's and the run's Hub reads of a model: its config (pricing) and the commit that keys it."""
    commit = hub_server.publish_folder("org/tiny-llama", tiny_llama_folder("float32"), kind="models")
    code = (
        "import json\n"
        "from runners.plan.pricing import count_params, load_model_config\n"
        "from runners.model.identity import hub_commit\n"
        "config = load_model_config('org/tiny-llama')\n"
        "print(json.dumps({'params': count_params(config).params, 'commit': hub_commit('org/tiny-llama', None)}))\n"
    )
    out = hub_server.run_python(tmp_path, code)
    assert out.returncode == 0, out.stdout
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["commit"] == commit and found["params"] > 0
    missing = hub_server.run_python(
        tmp_path, "from runners.plan.pricing import load_model_config\nload_model_config('org/no-such-model')"
    )
    assert "ProbeError: cannot read the config of 'org/no-such-model'" in missing.stdout


def test_a_hub_build_whose_data_files_are_not_its_manifests_is_refused_as_a_local_one_is(
    hub_server: HubServer, served: tuple[str, str], tmp_path: Path, built_trust_game: Path
) -> None:
    """#51, finding 4: the downloaded files are checked against build_manifest.json's sha256 before anything runs."""
    import pyarrow.parquet as pq

    repo, _ = served
    manifest = json.loads((built_trust_game / "build_manifest.json").read_text())
    listed = [f["path"] for f in manifest["configs"]["race_probe"]["files"]]
    table = pq.read_table(built_trust_game / listed[0])
    other = tmp_path / "other.parquet"
    pq.write_table(table.slice(1), other)  # another build's rows under the listed name
    hub_server.write_files(repo, {listed[0]: other.read_bytes()}, message="other rows")
    refused = run(hub_server, tmp_path, repo, tmp_path / "swapped")
    assert refused.returncode != 0 and "Traceback" not in refused.stdout, refused.stdout
    flat = " ".join(refused.stdout.split())
    assert f"the data files do not match build_manifest.json (sha256 differs: {listed[0]})" in flat
    assert "publish the build again" in flat and not (tmp_path / "swapped" / "data").exists()

    zeroed = json.loads(json.dumps(manifest))  # a manifest that claims nothing: every sha256 zero
    for entry in zeroed["configs"]["race_probe"]["files"]:
        entry["sha256"] = "0" * 64
    hub_server.write_files(
        repo,
        {listed[0]: (built_trust_game / listed[0]).read_bytes(), "build_manifest.json": json.dumps(zeroed).encode()},
        message="zeroed manifest",
    )
    assert "sha256 differs" in run(hub_server, tmp_path, repo, tmp_path / "zeroed").stdout

    extra = f"data/race_probe/{Path(listed[0]).stem}-extra.parquet"
    hub_server.write_files(
        repo,
        {"build_manifest.json": json.dumps(manifest).encode(), extra: other.read_bytes()},
        message="an extra shard",
    )
    flat = " ".join(run(hub_server, tmp_path, repo, tmp_path / "extra").stdout.split())
    assert f"not listed in the manifest: {extra}" in flat
    hub_server.write_files(repo, {extra: None}, message="as built")
    assert run(hub_server, tmp_path, repo, tmp_path / "restored").returncode == 0  # the build itself runs
