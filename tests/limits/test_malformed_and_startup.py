"""Malformed protobuf, bad start-up configuration and common CLI mistakes: one clear answer, no traceback."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys

import grpc
import pytest

from groupcoord.coordinator.core.config import BrokerConfig, ConfigError
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.integration.conftest import start_server


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "groupcoord", *args], capture_output=True, text=True,
                          timeout=timeout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def assert_one_clear_line(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_malformed_protobuf_gets_invalid_argument_and_one_log_line_without_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    srv = start_server({"orders": 4})
    try:
        with grpc.insecure_channel(srv.address) as channel:
            raw = channel.unary_unary("/groupcoord.v1.GroupCoordinator/ConsumerGroupHeartbeat",
                                      request_serializer=lambda b: b, response_deserializer=lambda b: b)
            with caplog.at_level(logging.INFO):
                for _ in range(20):
                    with pytest.raises(grpc.RpcError) as bad:
                        raw(b"\xff\xff\xff\xff\x0f garbage", timeout=10)
                    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            stream = channel.stream_stream("/groupcoord.v1.GroupCoordinator/ConsumerGroupHeartbeatStream",
                                           request_serializer=lambda b: b, response_deserializer=lambda b: b)
            with pytest.raises(grpc.RpcError) as bad_stream:
                list(stream(iter([b"\xff\xff\xff\xff\x0f"]), timeout=10))
            assert bad_stream.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            stub = pb_grpc.GroupCoordinatorStub(channel)  # the server still serves well-formed requests
            assert stub.ListGroups(pb.ListGroupsRequest(), timeout=10).error_code == 0
    finally:
        srv.stop()
    malformed = [r for r in caplog.records if "malformed" in r.getMessage()]
    assert len(malformed) == 1
    assert not any(r.exc_info for r in caplog.records)


def test_an_unknown_assignor_is_refused_at_start_naming_the_key_and_the_known_assignors() -> None:
    with pytest.raises(ConfigError, match="group.consumer.assignors.*uniform"):
        BrokerConfig.from_mapping({"group.consumer.assignors": "uniform,foo"})
    result = run_cli("serve", "--listen", f"127.0.0.1:{free_port()}", "--set", "group.consumer.assignors=foo")
    assert_one_clear_line(result, "group.consumer.assignors", "'foo'", "range", "uniform")


@pytest.mark.parametrize("flags", [["--listen", "127.0.0.1:70000"], ["--listen", "127.0.0.1:0"],
                                   ["--listen", "127.0.0.1:http"], ["--metrics-port", "70000"],
                                   ["--metrics-port", "-1"]])
def test_ports_outside_1_to_65535_are_refused_at_start(flags: list[str]) -> None:
    assert_one_clear_line(run_cli("serve", *flags), "port")


def test_a_port_in_use_is_one_line_not_a_traceback() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert_one_clear_line(run_cli("serve", "--listen", f"127.0.0.1:{port}"), str(port))
        assert_one_clear_line(run_cli("serve", "--listen", f"127.0.0.1:{free_port()}", "--metrics-port",
                                      str(port)), str(port))


def test_an_unreachable_server_is_one_line_not_a_traceback() -> None:
    address = f"127.0.0.1:{free_port()}"
    for args in (["groups", "list"], ["groups", "describe", "g"], ["config", "get", "g"]):
        assert_one_clear_line(run_cli(*args, "--server", address), address)


def test_bad_set_syntax_and_a_missing_config_file_are_one_line() -> None:
    assert_one_clear_line(run_cli("serve", "--set", "no-equals-sign"), "--set", "key=value")
    assert_one_clear_line(run_cli("serve", "--config", "/nonexistent/groupcoord.toml"), "/nonexistent")
    assert_one_clear_line(run_cli("serve", "--set", "group.consumer.heartbeat.interval.ms=abc"),
                          "group.consumer.heartbeat.interval.ms")
