"""While the state loads, requests are answered COORDINATOR_LOAD_IN_PROGRESS (14); afterwards they are served."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.runtime.log import FileLog, LoadReport
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc


class GatedLog(FileLog):
    """A real FileLog whose load waits for the test to open the gate."""

    def __init__(self, directory: Path, gate: threading.Event) -> None:
        super().__init__(directory)
        self.gate = gate

    def load(self, apply: Callable[[Any], None]) -> LoadReport:
        self.gate.wait(30)
        return super().load(apply)


def join(stub: Any) -> pb.ConsumerGroupHeartbeatResponse:
    return stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m1", member_epoch=0, rebalance_timeout_ms=1000,
        subscribed_topic_names=pb.StringList(values=["orders"]), topic_partitions=pb.TopicPartitionsList()), timeout=5)


def test_requests_during_load_get_coordinator_load_in_progress_then_succeed(tmp_path: Path) -> None:
    gate = threading.Event()
    options = ServerOptions(listen="127.0.0.1:0", config=BrokerConfig.from_mapping({}),
                            metadata_source=StaticMetadataSource({"orders": 4}), sink=GatedLog(tmp_path, gate))
    server = ServerThread(options)
    starting = threading.Thread(target=server.start)
    starting.start()
    try:
        while server.server.port == 0:
            threading.Event().wait(0.02)
        channel = grpc.insecure_channel(server.address)
        grpc.channel_ready_future(channel).result(timeout=10)
        stub = pb_grpc.GroupCoordinatorStub(channel)
        assert join(stub).error_code == 14
        fetch = stub.OffsetFetch(pb.OffsetFetchRequest(group_id="g"), timeout=5)
        assert fetch.error_code == 14
        gate.set()
        starting.join(timeout=30)
        resp = join(stub)
        assert resp.error_code == 0 and resp.member_epoch >= 1
        channel.close()
    finally:
        gate.set()
        starting.join(timeout=30)
        server.stop()


class FailingLog(FileLog):
    """A real FileLog whose disk 'fails' once the test says so."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.broken = False

    def append(self, records: list[Any]) -> Any:
        if self.broken:
            import asyncio

            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            future.set_exception(OSError(28, "No space left on device"))
            return future
        return super().append(records)


def test_a_failed_append_fails_the_request_and_stops_the_coordinator_serving(tmp_path: Path) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    failing = FailingLog(tmp_path)
    options = ServerOptions(listen="127.0.0.1:0", config=BrokerConfig.from_mapping({}),
                            metadata_source=StaticMetadataSource({"orders": 4}), sink=failing)
    with ServerThread(options) as server:
        channel = grpc.insecure_channel(server.address)
        stub = pb_grpc.GroupCoordinatorStub(channel)
        assert join(stub).error_code == 0
        failing.broken = True
        commit = stub.OffsetCommit(pb.OffsetCommitRequest(group_id="other", generation_id_or_member_epoch=-1, topics=[
            pb.OffsetCommitRequestTopic(name="orders", partitions=[
                pb.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)])]), timeout=5)
        assert commit.error_code == -1  # the commit is not acknowledged
        again = stub.OffsetFetch(pb.OffsetFetchRequest(group_id="other"), timeout=5)
        assert again.error_code == 15
        status = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service="groupcoord.v1.GroupCoordinator"), timeout=5).status
        assert status == health_pb2.HealthCheckResponse.NOT_SERVING
        channel.close()
