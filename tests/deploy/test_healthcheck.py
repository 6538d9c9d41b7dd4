"""`python -m groupcoord.healthcheck`, the image's HEALTHCHECK, against a real coordinator on loopback."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from grpc_health.v1 import health_pb2

from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource
from groupcoord.healthcheck import SERVICE_NAME

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def probe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "groupcoord.healthcheck", *args], capture_output=True, text=True,
                          timeout=30)


def start_server() -> ServerThread:
    options = ServerOptions(listen="127.0.0.1:0", config=BrokerConfig.from_mapping({}),
                            metadata_source=StaticMetadataSource({"orders": 4}))
    return ServerThread(options).start()


@pytest.fixture
def server() -> Iterator[ServerThread]:
    srv = start_server()
    try:
        yield srv
    finally:
        srv.stop()


def test_probe_exits_0_while_the_coordinator_is_serving(server: ServerThread) -> None:
    result = probe("--address", server.address)
    assert result.returncode == 0, result.stderr
    assert "SERVING" in result.stdout and SERVICE_NAME in result.stdout
    assert probe("--address", server.address, "--service", SERVICE_NAME).returncode == 0
    assert probe("--address", server.address, "--service", "").returncode == 0  # the server as a whole


def test_probe_exits_1_when_the_coordinator_reports_not_serving(server: ServerThread) -> None:
    # what a coordinator that failed stop after a log error reports, while its port still answers
    server.call(server.server.health.set(SERVICE_NAME, health_pb2.HealthCheckResponse.NOT_SERVING))
    result = probe("--address", server.address)
    assert result.returncode == 1
    assert "NOT_SERVING" in result.stderr


def test_probe_exits_1_for_a_service_the_server_does_not_have(server: ServerThread) -> None:
    result = probe("--address", server.address, "--service", "groupcoord.v1.NoSuchService")
    assert result.returncode == 1
    assert "NOT_FOUND" in result.stderr


def test_probe_exits_1_after_the_coordinator_stops() -> None:
    srv = start_server()
    address = srv.address
    assert probe("--address", address).returncode == 0
    srv.stop()
    result = probe("--address", address, "--timeout", "2")
    assert result.returncode == 1
    assert "UNAVAILABLE" in result.stderr


def test_probe_gives_up_after_its_timeout_when_the_port_never_answers() -> None:
    with socket.socket() as silent:  # accepts TCP connections (backlog) but never speaks HTTP/2
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        started = time.monotonic()
        result = probe("--address", f"127.0.0.1:{silent.getsockname()[1]}", "--timeout", "1")
        elapsed = time.monotonic() - started
    assert result.returncode == 1
    assert "DEADLINE_EXCEEDED" in result.stderr
    assert elapsed < 10


def test_probe_usage_error_exits_1_because_docker_reserves_exit_code_2() -> None:
    result = probe("--no-such-flag")
    assert result.returncode == 1
    assert probe("--address", "127.0.0.1:1", "--timeout", "0").returncode == 1
