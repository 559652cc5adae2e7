import hashlib
import http.server
import threading
import zipfile
from functools import partial

import pytest

from promptgen.core.errors import SourceError
from promptgen.recipe import SourceSpec
from promptgen.sources import resolve_source

BODY = b"col\n1\n2\n"
SHA = hashlib.sha256(BODY).hexdigest()


def _spec(url="http://127.0.0.1:1/x.csv", sha=SHA):
    return SourceSpec(id="demo", path="demo/x.csv", url=url, sha256=sha, license="CC0", citation="")


@pytest.fixture()
def server(tmp_path):
    """A loopback HTTP server serving tmp_path/www."""
    www = tmp_path / "www"
    www.mkdir()
    (www / "x.csv").write_bytes(BODY)
    (www / "bad.csv").write_bytes(b"tampered")
    with zipfile.ZipFile(www / "pkg.whl", "w") as zf:
        zf.writestr("pkg/data/x.csv", BODY)
        zf.writestr("pkg/other.txt", "noise")
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(www))
    handler.log_message = lambda *a, **k: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_local_sources_folder_is_read_and_verified(tmp_path):
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "x.csv").write_bytes(BODY)
    got = resolve_source(_spec(), sources_dir=tmp_path)
    assert got.path == tmp_path / "demo" / "x.csv" and got.sha256 == SHA and got.origin == "sources-dir"


def test_missing_source_names_the_path_url_and_remedy(tmp_path):
    with pytest.raises(SourceError) as info:
        resolve_source(_spec(), sources_dir=tmp_path)
    msg = str(info.value)
    assert str(tmp_path / "demo" / "x.csv") in msg
    assert "http://127.0.0.1:1/x.csv" in msg and "--sources" in msg


def test_hash_mismatch_names_file_expected_and_actual(tmp_path):
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / "x.csv").write_bytes(b"something else")
    with pytest.raises(SourceError) as info:
        resolve_source(_spec(), sources_dir=tmp_path)
    msg = str(info.value)
    assert SHA in msg and hashlib.sha256(b"something else").hexdigest() in msg and "x.csv" in msg


def test_download_fills_cache_once(server, tmp_path):
    cache = tmp_path / "cache"
    first = resolve_source(_spec(f"{server}/x.csv"), cache_dir=cache)
    assert first.origin == "download" and first.path.read_bytes() == BODY
    second = resolve_source(_spec("http://127.0.0.1:1/unreachable"), cache_dir=cache)
    assert second.origin == "cache" and second.sha256 == SHA


def test_download_with_wrong_hash_keeps_nothing(server, tmp_path):
    cache = tmp_path / "cache"
    with pytest.raises(SourceError, match="mismatch"):
        resolve_source(_spec(f"{server}/bad.csv"), cache_dir=cache)
    assert not any(p.is_file() for p in cache.rglob("*"))


def test_unpinned_source_records_observed_hash(server, tmp_path):
    got = resolve_source(_spec(f"{server}/x.csv", sha=None), cache_dir=tmp_path / "c")
    assert got.sha256 == SHA and not got.pinned


def test_http_error_and_offline_are_clear(server, tmp_path):
    with pytest.raises(SourceError, match="could not download"):
        resolve_source(_spec(f"{server}/missing.csv"), cache_dir=tmp_path / "c")
    with pytest.raises(SourceError, match="--offline"):
        resolve_source(_spec(f"{server}/x.csv"), cache_dir=tmp_path / "c2", offline=True)


def test_archive_member_is_extracted_and_verified(server, tmp_path):
    spec = SourceSpec(
        id="demo",
        path="demo/x.csv",
        url=f"{server}/pkg.whl",
        sha256=SHA,
        license="CC0",
        citation="",
        member="pkg/data/x.csv",
    )
    got = resolve_source(spec, cache_dir=tmp_path / "c")
    assert got.origin == "download" and got.path.read_bytes() == BODY
    assert sorted(p.name for p in (tmp_path / "c").rglob("*") if p.is_file()) == ["x.csv"]
    wrong = SourceSpec(**{**spec.__dict__, "member": "pkg/other.txt"})
    with pytest.raises(SourceError, match="mismatch"):
        resolve_source(wrong, cache_dir=tmp_path / "c2")
    missing = SourceSpec(**{**spec.__dict__, "member": "nope.csv"})
    with pytest.raises(SourceError, match=r"no member 'nope\.csv'"):
        resolve_source(missing, cache_dir=tmp_path / "c3")
    assert not any(p.is_file() for p in (tmp_path / "c2").rglob("*"))


def test_sources_folder_may_hold_the_archive_instead(tmp_path):
    (tmp_path / "src" / "demo").mkdir(parents=True)
    with zipfile.ZipFile(tmp_path / "src" / "demo" / "bundle.zip", "w") as zf:
        zf.writestr("corpus/x.csv", BODY)
    spec = SourceSpec(
        id="demo",
        path="demo/corpus/x.csv",
        url="http://127.0.0.1:1/bundle.zip",
        sha256=SHA,
        license="CC0",
        citation="",
        member="corpus/x.csv",
        archive="demo/bundle.zip",
    )
    got = resolve_source(spec, sources_dir=tmp_path / "src", cache_dir=tmp_path / "cache")
    assert got.origin == "sources-dir-archive" and got.path.read_bytes() == BODY
    assert got.path == tmp_path / "cache" / "demo" / "corpus" / "x.csv"
    (tmp_path / "src" / "demo" / "bundle.zip").unlink()
    with pytest.raises(SourceError, match=r"bundle\.zip"):
        resolve_source(spec, sources_dir=tmp_path / "src", cache_dir=tmp_path / "cache2")
