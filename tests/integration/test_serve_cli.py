"""`groupcoord serve` as a user runs it: a subprocess, health checks, reflection, SIGTERM."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "groupcoord", *args], capture_output=True, text=True, timeout=60)


def test_serve_answers_health_reflection_and_admin_commands_then_stops_gracefully_on_sigterm() -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "groupcoord", "serve", "--listen", f"127.0.0.1:{port}",
                             "--topic", "orders:8", "--set", "group.consumer.heartbeat.interval.ms=5000"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=30)
        health = health_pb2_grpc.HealthStub(channel)
        deadline = time.monotonic() + 10
        status = None
        while time.monotonic() < deadline:
            status = health.Check(health_pb2.HealthCheckRequest(service="groupcoord.v1.GroupCoordinator")).status
            if status == health_pb2.HealthCheckResponse.SERVING:
                break
            time.sleep(0.1)
        assert status == health_pb2.HealthCheckResponse.SERVING

        refl = reflection_pb2_grpc.ServerReflectionStub(channel)
        replies = list(refl.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")])))
        names = {s.name for s in replies[0].list_services_response.service}
        assert "groupcoord.v1.GroupCoordinator" in names

        stub = pb_grpc.GroupCoordinatorStub(channel)
        resp = stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
            group_id="cli", member_id="m1", member_epoch=0, rebalance_timeout_ms=1000,
            subscribed_topic_names=pb.StringList(values=["orders"]), topic_partitions=pb.TopicPartitionsList()))
        assert resp.error_code == 0 and resp.heartbeat_interval_ms == 5000

        listed = run_cli("groups", "list", "--server", f"127.0.0.1:{port}")
        assert listed.returncode == 0 and "cli" in listed.stdout and "consumer" in listed.stdout
        described = run_cli("groups", "describe", "cli", "--server", f"127.0.0.1:{port}", "--json")
        assert described.returncode == 0 and '"consumer_id": "m1"' in described.stdout
        bad = run_cli("config", "set", "cli", "consumer.session.timeout.ms=1", "--server", f"127.0.0.1:{port}")
        assert bad.returncode == 1 and "error 40" in bad.stdout
        channel.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert "shutting down" in out


def test_serve_rejects_invalid_configuration_with_a_clear_message() -> None:
    result = run_cli("serve", "--set", "group.consumer.heartbeat.interval.ms=99999999")
    assert result.returncode == 2
    assert "group.consumer.heartbeat.interval.ms" in result.stderr
    result = run_cli("serve", "--set", "group.consumer.no.such.thing=1")
    assert result.returncode == 2 and "unknown config" in result.stderr
    result = run_cli("serve", "--topic", "orders")
    assert result.returncode == 2
