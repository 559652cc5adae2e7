"""Bad input that used to end in a traceback: each is one `error:` line naming the file, exit 1.

Every case goes through the real command line (`probes build`, `analyze`, `rewrite`), so what
is asserted is what a user sees: exit code 1, a single line on the terminal, the file named,
no `Traceback`, and nothing written.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import runners.results as res
from cli_fixture import LIBRARY_PROGRESS, one_line_error
from envent_fixture import corpus_rows, write_recipe, write_sources
from probes.cli import app
from promptgen.build import build
from promptgen.core.errors import OutputError
from release_fixture import REPO

runner = CliRunner()
TSV = "crowd-enVent_generation.tsv"


def _build_empathy(tmp_path: Path, rows=None, *, as_zip: bool = False, cache: Path | None = None):
    sources = write_sources(tmp_path / "src", rows=rows, as_zip=as_zip)
    recipe = write_recipe(tmp_path / "r.yaml")
    args = ["build", str(recipe), "--sources", str(sources), "--out", str(tmp_path / "out"), "-q"]
    return runner.invoke(app, [*args, "--cache-dir", str(cache or tmp_path / "cache")])


# ----------------------------------------------------------------------------- sources


def test_corrupt_crowd_envent_zip_is_one_line(tmp_path):
    """A damaged deflate stream raised zlib.error from deep inside zipfile."""
    sources = write_sources(tmp_path / "src")
    tsv = sources / "crowd-envent" / "corpus" / TSV
    archive = sources / "crowd-envent" / "crowd-enVent2023.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(tsv, f"crowd-enVent2023/corpus/{TSV}")
    tsv.unlink()
    data = bytearray(archive.read_bytes())
    for i in range(100, 200):  # inside the member's compressed bytes, after its local header
        data[i] ^= 0x55
    archive.write_bytes(bytes(data))
    recipe = write_recipe(tmp_path / "r.yaml")
    out, cache = tmp_path / "out", tmp_path / "cache"
    args = ["build", str(recipe), "--sources", str(sources), "--out", str(out), "--cache-dir", str(cache), "-q"]
    line = one_line_error(runner.invoke(app, args), "crowd-enVent2023.zip", ignore=LIBRARY_PROGRESS)
    assert "corrupt" in line
    assert not out.exists()
    assert not [p for p in cache.rglob("*") if p.is_file()], "a partial extraction was left in the cache"


def test_truncated_crowd_envent_zip_is_one_line(tmp_path):
    write_sources(tmp_path / "src", as_zip=True)
    archive = tmp_path / "src" / "crowd-envent" / "crowd-enVent2023.zip"
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    recipe = write_recipe(tmp_path / "r.yaml")
    args = ["build", str(recipe), "--sources", str(tmp_path / "src"), "--out", str(tmp_path / "out"), "-q"]
    one_line_error(
        runner.invoke(app, [*args, "--cache-dir", str(tmp_path / "c")]), "crowd-enVent2023.zip", ignore=LIBRARY_PROGRESS
    )


@pytest.mark.parametrize("value", ["inf", "-inf", "1e400", "nan"])
def test_non_finite_intensity_is_one_line(tmp_path, value):
    """`inf` raised OverflowError from int(float(...)); `nan` was reported as not a number."""
    rows = corpus_rows()
    rows[3][4] = value
    line = one_line_error(
        _build_empathy(tmp_path, rows), TSV, "line 5 (text_id 'gen00004')", "'intensity'", ignore=LIBRARY_PROGRESS
    )
    assert f"{value!r} is not a finite number" in line


def test_short_tsv_row_names_the_missing_field(tmp_path):
    """A 3-field row was reported as "'nan' is not a number" (pandas fills absent cells with NaN)."""
    rows = corpus_rows()
    rows[3] = rows[3][:3]
    line = one_line_error(_build_empathy(tmp_path, rows), TSV, "line 5", "'hidden_emo_text'", ignore=LIBRARY_PROGRESS)
    assert "field missing" in line and "3 of the header's 8 fields" in line and "nan" not in line


def _trust_game_recipe(tmp_path: Path, census_path: str) -> tuple[Path, Path]:
    """(recipe, sources) of the trust-game recipe with its census source unpinned at `census_path`."""
    recipe = yaml.safe_load((REPO / "builders" / "trust_game.yaml").read_text(encoding="utf-8"))
    census = next(s for s in recipe["sources"] if s["id"] == "census")
    census["path"] = census_path
    census.pop("sha256")
    census.pop("member", None)
    sources = tmp_path / "src"
    pairs = next(s for s in recipe["sources"] if s["id"] == "paper_pairs")
    (sources / pairs["path"]).parent.mkdir(parents=True)
    # a small stand-in for the pinned paper_pairs.json: the build stops at the census before using it
    (sources / pairs["path"]).write_text("{}", encoding="utf-8")
    pairs["sha256"] = hashlib.sha256(b"{}").hexdigest()
    path = tmp_path / "trust_game.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True), encoding="utf-8")
    (sources / census_path).parent.mkdir(parents=True, exist_ok=True)
    return path, sources


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("census_2010.parquet", b"PAR1" + b"\x00" * 200),  # a truncated parquet file: ArrowInvalid
        ("census_2010.parquet", b"not parquet at all"),
        ("names.zip", b"PK\x03\x04 not a zip"),  # BadZipFile
    ],
)
def test_corrupt_census_file_is_one_line(tmp_path, name, content):
    recipe, sources = _trust_game_recipe(tmp_path, f"census-surnames/{name}")
    (sources / "census-surnames" / name).write_bytes(content)
    out = tmp_path / "out"
    args = ["build", str(recipe), "--sources", str(sources), "--out", str(out), "-q"]
    line = one_line_error(runner.invoke(app, args), f"census-surnames/{name}", ignore=LIBRARY_PROGRESS)
    assert "not a readable" in line
    assert not out.exists()


def test_census_zip_with_a_damaged_member_is_one_line(tmp_path):
    recipe, sources = _trust_game_recipe(tmp_path, "census-surnames/names.zip")
    archive = sources / "census-surnames" / "names.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("Names_2010Census.csv", "name,rank,count\n" + "SMITH,1,2442977\n" * 2000)
    data = bytearray(archive.read_bytes())
    for i in range(60, 120):
        data[i] ^= 0x55
    archive.write_bytes(bytes(data))
    args = ["build", str(recipe), "--sources", str(sources), "--out", str(tmp_path / "out"), "-q"]
    one_line_error(runner.invoke(app, args), "census-surnames/names.zip", ignore=LIBRARY_PROGRESS)


# ----------------------------------------------------------------------------- outputs


@pytest.fixture()
def unwritable(tmp_path: Path) -> Path:
    """A folder the process cannot create anything in (read-only; under root, where a mode does not
    stop writes, a folder under /sys, which refuses creation to everyone)."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    probe = folder / "probe"
    try:
        probe.mkdir()
    except PermissionError:
        yield folder
    else:
        probe.rmdir()
        if not Path("/sys/kernel").is_dir():
            pytest.skip("running as root without /sys: no folder refuses writes")
        yield Path("/sys/kernel/probes-test-out")
    folder.chmod(0o755)


def test_read_only_out_for_build_is_one_line(fixture_release, unwritable):
    sources, recipe = fixture_release
    args = ["build", str(recipe), "--sources", str(sources), "--out", str(unwritable), "-q"]
    line = one_line_error(runner.invoke(app, args), str(unwritable), ignore=LIBRARY_PROGRESS)
    assert "cannot write" in line


def test_read_only_out_for_analyze_is_one_line(empathy_dataset, unwritable, tmp_path):
    from promptgen.empathy.events import REWRITE_CONFIG

    results = tmp_path / "results"
    _rewrite_results(empathy_dataset, results)
    args = ["analyze", "--prompts", str(empathy_dataset), "--results", str(results), "--config", REWRITE_CONFIG]
    line = one_line_error(
        runner.invoke(app, [*args, "--out", str(unwritable / "report"), "--no-figures"]), ignore=LIBRARY_PROGRESS
    )
    assert "cannot write the report into" in line and str(unwritable) in line


def test_config_names_must_be_one_path_segment(tmp_path):
    """A crafted config name `..` must not write outside data/."""
    from promptgen.hub.folder import check_path_segment

    for bad in ("..", ".", "../x", "a/b", "a\\b", ".hidden", "", "a\x00b", "a\nb"):
        with pytest.raises(OutputError, match="one path segment"):
            check_path_segment(bad, "config name")
    for good in ("single_actor", "P0S0T0", "games_paper_phi_2", "race_probe", "a.b-c"):
        check_path_segment(good, "config name")
    from hub_folder_fixture import toy_config, write_toy_folder

    with pytest.raises(OutputError, match=re.escape("'..'")):
        write_toy_folder(tmp_path / "out", [toy_config("..", 3, 3)])
    assert not any(p.suffix == ".parquet" for p in tmp_path.rglob("*"))


# ----------------------------------------------------------------------------- result parts


def _corrupt_first_part(results: Path) -> Path:
    part = sorted(results.rglob("part-*.parquet"))[0]
    part.write_bytes(part.read_bytes()[:300])  # truncated: "Parquet magic bytes not found"
    return part


@pytest.fixture(scope="module")
def empathy_dataset(tmp_path_factory) -> Path:
    """A small intergroup-empathy folder; its recipe is beside it as `r.yaml`."""
    root = tmp_path_factory.mktemp("emp")
    recipe = write_recipe(root / "r.yaml")
    return build(str(recipe), out_dir=root / "out", sources=write_sources(root / "src"), max_events=12).path


def _rewrite_results(dataset: Path, results: Path) -> None:
    """rewrite_t2 generations as `probes run --scoring generate` writes them (a few hundred rows)."""
    from promptgen.empathy.events import REWRITE_CONFIG
    from release_fixture import load_config

    ids = load_config(dataset, REWRITE_CONFIG).to_pandas()["id"].tolist()
    scoring = '{"mode":"generate"}'
    key = res.ResultKey("org/rewriter", "rev", scoring)
    folder = res.key_dir(results, REWRITE_CONFIG, key)
    res.write_key_file(folder, key)
    rows = [
        {
            "id": i,
            "model": key.model,
            "model_revision": "rev",
            "scoring": scoring,
            "generated_text": "The person.}",
            "refused": False,
        }
        for i in ids
    ]
    res.write_part(folder, (0, 1), rows)
    res.update_manifest(
        results,
        f"{REWRITE_CONFIG}/{key.slug}/shard-0of1",
        {"prompt_dataset": {"config": REWRITE_CONFIG}, "model": key.model, "key": key.slug, "items": len(ids)},
    )


def test_corrupt_result_part_in_rewrite_is_one_line(empathy_dataset, tmp_path):
    results = tmp_path / "rewrites"
    _rewrite_results(empathy_dataset, results)
    part = _corrupt_first_part(results)
    out = tmp_path / "out"
    args = ["rewrite", str(empathy_dataset), "--results", str(results), "--out", str(out)]
    args += ["--recipe", str(empathy_dataset.parent.parent / "r.yaml"), "--sources", str(tmp_path / "unused")]
    line = one_line_error(runner.invoke(app, args), str(part), ignore=LIBRARY_PROGRESS)
    assert "cannot read result part" in line
    assert not out.exists() or not any(out.iterdir())


def test_corrupt_result_part_in_curate_pairs_is_one_line(built_trust_game, shared_sources, tmp_path):
    from probes.trust_game.pair_curation import RACE_PROBE
    from release_fixture import load_config

    dataset = built_trust_game
    ids = load_config(dataset, RACE_PROBE).to_pandas()["id"].head(20).tolist()
    results = tmp_path / "results"
    scoring = '{"choice_mode":"letter"}'
    key = res.ResultKey("org/model", "rev", scoring)
    folder = res.key_dir(results, RACE_PROBE, key)
    res.write_key_file(folder, key)
    rows = [{"id": i, **key.as_dict(), "choice_logprobs": [-0.1, -2.0], "refused": False} for i in ids]
    res.write_part(folder, (0, 1), rows)
    run = {"prompt_dataset": {"config": RACE_PROBE}, "model": key.model, "key": key.slug, "items": len(ids)}
    res.update_manifest(results, f"{RACE_PROBE}/{key.slug}/shard-0of1", run)
    part = _corrupt_first_part(results)
    out = tmp_path / "out"
    args = [
        "curate-pairs",
        str(results),
        "--prompts",
        str(dataset),
        "--out",
        str(out),
        "--sources",
        str(shared_sources),
    ]
    line = one_line_error(runner.invoke(app, args), str(part), ignore=LIBRARY_PROGRESS)
    assert "cannot read result part" in line and not out.exists()


def test_corrupt_result_part_in_analyze_is_one_line(empathy_dataset, tmp_path):
    from promptgen.empathy.events import REWRITE_CONFIG  # any config with result rows will do

    results = tmp_path / "results"
    _rewrite_results(empathy_dataset, results)
    part = _corrupt_first_part(results)
    args = ["analyze", "--prompts", str(empathy_dataset), "--results", str(results), "--out", str(tmp_path / "rep")]
    line = one_line_error(
        runner.invoke(app, [*args, "--config", REWRITE_CONFIG, "--no-figures"]), str(part), ignore=LIBRARY_PROGRESS
    )
    assert "cannot read result part" in line
    assert not (tmp_path / "rep").exists()


# ----------------------------------------------------------------------------- logs


def test_verbose_log_lines_are_scrubbed_of_tokens(tmp_path):
    """`-v` turns on DEBUG lines of libraries that may print headers; the CLI masks tokens in all of them."""
    env_token = "hf_" + "E" * 34
    other_token = "hf_" + "Q" * 34
    code = (
        "import logging, os, sys\n"
        "from probes.cli import main\n"
        "main(verbose=True)\n"
        "log = logging.getLogger('huggingface_hub.request')\n"
        "log.debug('Authorization: Bearer %s', os.environ['HF_TOKEN'])\n"
        f"log.debug('url https://x/?t={other_token}')\n"
        "try:\n"
        "    raise RuntimeError('bad ' + os.environ['HF_TOKEN'])\n"
        "except RuntimeError:\n"
        "    log.exception('failed')\n"
    )
    env = {**os.environ, "HF_TOKEN": env_token, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "DEBUG huggingface_hub.request: Authorization: Bearer ***" in done.stderr
    assert "url https://x/?t=hf_***" in done.stderr and "RuntimeError: bad ***" in done.stderr
    assert env_token not in done.stderr and other_token not in done.stderr
    assert "E" * 20 not in done.stderr


@pytest.mark.slow
def test_corrupt_result_part_on_run_resume_is_one_line(fixture_release, smollm2, tmp_path):
    """A damaged part in the key being resumed, or junk in another config's folder (read when the
    manifest is refreshed after scoring), raised ArrowInvalid; now one line naming the part."""
    sources, recipe = fixture_release
    dataset = build(str(recipe), out_dir=tmp_path / "ds", sources=sources).path
    results = tmp_path / "results"
    args = ["run", str(dataset), "--config", "single_actor", "--model", str(smollm2), "--out", str(results)]
    args += ["--no-chat", "--quiet"]
    first = runner.invoke(app, [*args, "--limit", "2"])
    assert first.exit_code == 0, first.output
    part = _corrupt_first_part(results)
    # --limit on a template-crossed config warns that it is not a sample (runners.selection.sample); that line is
    # not the error, so it is set aside as the libraries' progress lines are
    ignore = re.compile(rf"{LIBRARY_PROGRESS.pattern}|^warning: config 'single_actor': --limit takes its first rows")
    one_line_error(runner.invoke(app, [*args, "--limit", "3"]), str(part), "cannot read result part", ignore=ignore)

    part.unlink()
    junk = results / "data" / "actor_actor" / "other-0123456789abcdef" / "part-00000of00001-000000.parquet"
    junk.parent.mkdir(parents=True)
    junk.write_bytes(b"PAR1 junk")
    one_line_error(runner.invoke(app, [*args, "--limit", "2"]), str(junk), "cannot read result part", ignore=ignore)


def test_log_scrubber_handles_any_record():
    """Mismatched args never make logging raise, and secrets in args and tracebacks are masked."""
    import logging

    from promptgen.core.secrets import ScrubTokens

    scrubber = ScrubTokens(["s3cret-value"])
    bad = logging.LogRecord("x", logging.DEBUG, __file__, 1, "token %s and %s", ("s3cret-value",), None)
    assert scrubber.filter(bad) and "s3cret-value" not in bad.getMessage() and "***" in bad.getMessage()
    try:
        raise ValueError("s3cret-value hf_" + "A" * 30)
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    scrubber.filter(record)
    text = logging.Formatter().format(record)
    assert "s3cret-value" not in text and "A" * 30 not in text and "ValueError: *** hf_***" in text
