"""A real `groupcoord serve --http-port` (a subprocess, as an operator runs it) for the web view's tests."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "web"  # gitignored; screenshots are copied here after each browser test
FAST = ("group.consumer.min.heartbeat.interval.ms=20", "group.consumer.heartbeat.interval.ms=100",
        "group.consumer.min.session.timeout.ms=300", "group.consumer.session.timeout.ms=10000")  # 10 s: loaded machines


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Served:
    proc: subprocess.Popen[str]
    grpc: str
    http: str
    bootstrap: str | None
    output: list[str]

    def get(self, path: str, headers: dict[str, str] | None = None, timeout: float = 30) -> tuple[int, Any]:
        req = urllib.request.Request(self.http + path, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                body = r.read()
                return r.status, json.loads(body) if r.headers.get_content_type() == "application/json" else body
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")


def wait_for(check: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def serve(*extra: str, embedded_kafka: bool = False) -> Served:
    """`groupcoord serve` on two free ports. A port found free can be taken by another process before the server
    binds it (another suite on the machine): that start is refused with a clear line, and is tried again on new
    ports, at most three times in all."""
    for attempt in range(3):
        started = _serve_once(free_port(), free_port(), extra, embedded_kafka)
        if isinstance(started, Served):
            return started
        if "Address already in use" not in started or attempt == 2:
            raise AssertionError("serve did not start:\n" + started)
    raise AssertionError("unreachable")


def _serve_once(grpc_port: int, http_port: int, extra: tuple[str, ...], embedded_kafka: bool) -> Served | str:
    cmd = [sys.executable, "-m", "groupcoord", "serve", "--listen", f"127.0.0.1:{grpc_port}",
           "--http-port", str(http_port), *(a for s in FAST for a in ("--set", s)), *extra]
    if embedded_kafka:
        cmd += ["--embedded-kafka", "--metadata-refresh-ms", "200", "--lag-refresh-ms", "200"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    output: list[str] = []
    bootstrap = None
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        output.append(line)
        m = re.search(r"bootstrap\.servers=(\S+)", line)
        if m:
            bootstrap = m.group(1)
        if "web view on" in line:
            scheme = "https" if "https://" in line else "http"
            # keep reading: a server whose log fills the pipe would block on its next line
            threading.Thread(target=lambda: output.extend(proc.stdout or ()), daemon=True).start()
            return Served(proc, f"127.0.0.1:{grpc_port}", f"{scheme}://127.0.0.1:{http_port}", bootstrap, output)
    proc.kill()
    return "".join(output) + (proc.stdout.read() or "")


def stop(served: Served) -> int:
    """SIGTERM (graceful), SIGKILL if it has not stopped within 30 s; the exit code. Its output is read by
    serve()'s thread."""
    served.proc.terminate()
    try:
        return served.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        served.proc.kill()
        return served.proc.wait()


@pytest.fixture
def artifacts(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """Screenshots go to the test's tmp dir, then are copied to test-artifacts/web/<test name>/."""
    shots = tmp_path / "screenshots"
    shots.mkdir()
    try:
        yield shots
    finally:
        dest = ARTIFACTS / request.node.name
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(shots, dest)


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    assert path, ("Debian's chromium is missing: run `make setup` (scripts/ci-setup.sh apt-installs it; `make test` "
                  "runs it first)")
    return path
