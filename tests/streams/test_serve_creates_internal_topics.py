"""`groupcoord serve --embedded-kafka` creates a streams group's internal topics in the mock cluster (which has
no CreateTopics API), and the group becomes ready: the CLI's wiring of the topic creator, end to end."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import grpc

from groupcoord.wire.v1 import streams_pb2 as spb
from groupcoord.wire.v1 import streams_pb2_grpc as spb_grpc
from tests.integration.test_serve_cli import free_port
from tests.streams.test_grpc_streams_group import topology


def test_serve_with_embedded_kafka_creates_the_internal_topics_and_the_group_becomes_ready() -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "groupcoord", "serve", "--listen", f"127.0.0.1:{port}",
                             "--embedded-kafka", "--topic", "lines:4", "--metadata-refresh-ms", "200",
                             "--set", "group.streams.initial.rebalance.delay.ms=0",
                             "--set", "group.streams.min.heartbeat.interval.ms=200",
                             "--set", "group.streams.heartbeat.interval.ms=200"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
            stub = spb_grpc.StreamsGroupCoordinatorStub(channel)
            req = spb.StreamsGroupHeartbeatRequest(group_id="app", member_id="m", member_epoch=0, process_id="p",
                                                   rebalance_timeout_ms=1000)
            req.topology.CopyFrom(topology())
            req.active_tasks.SetInParent()
            req.standby_tasks.SetInParent()
            req.warmup_tasks.SetInParent()
            deadline = time.monotonic() + 60
            resp = stub.StreamsGroupHeartbeat(req, timeout=10)
            while resp.error_code == 14 or [s.status_code for s in resp.status.items] == [1]:  # loading / metadata
                assert time.monotonic() < deadline, resp
                time.sleep(0.2)
                resp = stub.StreamsGroupHeartbeat(req, timeout=10)
            assert resp.error_code == 0, resp.error_message
            assert [s.status_code for s in resp.status.items] == [3], "the internal topics are missing at first"
            req.ClearField("topology")
            while resp.status.items or not resp.active_tasks.tasks:
                assert time.monotonic() < deadline, "the internal topics were never created"
                time.sleep(0.2)
                req.member_epoch = resp.member_epoch
                resp = stub.StreamsGroupHeartbeat(req, timeout=10)
                assert resp.error_code == 0, resp.error_message
            assert sum(len(t.partitions) for t in resp.active_tasks.tasks) == 8
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
