"""The streams RPCs go through the same request pipeline as every other RPC: a refusal by the router, the log or
the runtime comes back in-band with Kafka's error code (NOT_COORDINATOR, ...), never as a gRPC error."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.runtime.log import FileLog
from groupcoord.coordinator.runtime.record_codec import PartitionFenced
from groupcoord.coordinator.runtime.server import ServerOptions, ServerThread
from groupcoord.coordinator.runtime.static_metadata import StaticMetadataSource
from groupcoord.coordinator.runtime.workers import WorkerLayout
from groupcoord.wire.v1 import streams_pb2 as spb
from groupcoord.wire.v1 import streams_pb2_grpc as spb_grpc
from tests.integration.conftest import FAST

TOPICS = {"lines": 4}
NOT_COORDINATOR = int(Errors.NOT_COORDINATOR)


def join_request(group: str, subtopologies: int = 1) -> spb.StreamsGroupHeartbeatRequest:
    req = spb.StreamsGroupHeartbeatRequest(group_id=group, member_id="m", member_epoch=0, process_id="p",
                                           rebalance_timeout_ms=1000)
    req.topology.epoch = 1
    for k in range(subtopologies):
        req.topology.subtopologies.add(subtopology_id=f"subtopology-{k:04d}", source_topics=["lines"])
    req.active_tasks.SetInParent()
    req.standby_tasks.SetInParent()
    req.warmup_tasks.SetInParent()
    return req


def serve(**options: Any) -> ServerThread:
    return ServerThread(ServerOptions(listen="127.0.0.1:0", config=BrokerConfig.from_mapping(FAST),
                                      metadata_source=StaticMetadataSource(TOPICS), **options)).start()


@pytest.fixture
def worker0() -> Iterator[tuple[ServerThread, WorkerLayout]]:
    """Worker 0 of `serve --workers 2`: the groups of worker 1 are another instance's."""
    layout = WorkerLayout(index=0, workers=2, partitions=8, host="127.0.0.1", base_port=1)
    srv = serve(workers=layout)
    try:
        yield srv, layout
    finally:
        srv.stop()


def group_of(layout: WorkerLayout, worker: int) -> str:
    return next(g for g in (f"app-{k}" for k in range(1000)) if layout.owner(g) == worker)


def test_a_streams_heartbeat_for_a_group_another_instance_owns_gets_not_coordinator(
        worker0: tuple[ServerThread, WorkerLayout]) -> None:
    srv, layout = worker0
    with grpc.insecure_channel(srv.address) as channel:
        stub = spb_grpc.StreamsGroupCoordinatorStub(channel)
        refused = stub.StreamsGroupHeartbeat(join_request(group_of(layout, 1)), timeout=10)
        assert refused.error_code == NOT_COORDINATOR and "FindCoordinator" in refused.error_message
        assert stub.StreamsGroupHeartbeat(join_request(group_of(layout, 0)), timeout=10).error_code == 0


def test_a_streams_describe_asks_the_router_and_answers_not_coordinator_for_another_instances_group(
        worker0: tuple[ServerThread, WorkerLayout]) -> None:
    srv, layout = worker0
    mine, theirs = group_of(layout, 0), group_of(layout, 1)
    with grpc.insecure_channel(srv.address) as channel:
        stub = spb_grpc.StreamsGroupCoordinatorStub(channel)
        assert stub.StreamsGroupHeartbeat(join_request(mine), timeout=10).error_code == 0
        described = stub.StreamsGroupDescribe(spb.StreamsGroupDescribeRequest(group_ids=[theirs, mine]), timeout=10)
    assert [(g.group_id, g.error_code) for g in described.groups] == [(theirs, NOT_COORDINATOR), (mine, 0)]
    assert "FindCoordinator" in described.groups[0].error_message
    assert [m.member_id for m in described.groups[1].members] == ["m"]


class FencedSink:
    """The record sink of a state partition another instance has taken over: every append is refused as
    fenced (nothing written), as KafkaRecordLog's transactional writer reports it."""

    def append(self, records: list[Any]) -> Any:
        refused = asyncio.get_running_loop().create_future()
        refused.set_exception(PartitionFenced(0, "fenced by a newer instance"))
        return refused


def test_a_streams_heartbeat_whose_write_is_fenced_gets_not_coordinator_in_band() -> None:
    srv = serve(sink=FencedSink())
    try:
        with grpc.insecure_channel(srv.address) as channel:
            answer = spb_grpc.StreamsGroupCoordinatorStub(channel).StreamsGroupHeartbeat(join_request("app"),
                                                                                       timeout=10)
    finally:
        srv.stop()
    assert answer.error_code == NOT_COORDINATOR, answer.error_message
    assert answer.member_id == "m" and answer.member_epoch == 0


def test_a_streams_heartbeat_too_large_for_the_log_is_refused_in_band_and_the_server_keeps_serving(
        tmp_path: Path) -> None:
    srv = serve(sink=FileLog(tmp_path, max_frame_bytes=4096))
    try:
        with grpc.insecure_channel(srv.address) as channel:
            stub = spb_grpc.StreamsGroupCoordinatorStub(channel)
            refused = stub.StreamsGroupHeartbeat(join_request("big", subtopologies=400), timeout=10)
            assert refused.error_code == int(Errors.UNKNOWN_SERVER_ERROR)
            assert "not written" in refused.error_message and "4096" in refused.error_message
            assert stub.StreamsGroupHeartbeat(join_request("small"), timeout=10).error_code == 0
    finally:
        srv.stop()


class BrokenSink:
    """A record sink whose disk is gone: every append raises."""

    def append(self, records: list[Any]) -> Any:
        raise OSError(5, "Input/output error")


def test_a_streams_heartbeat_whose_write_fails_is_answered_in_band_with_unknown_server_error() -> None:
    srv = serve(sink=BrokenSink())
    try:
        with grpc.insecure_channel(srv.address) as channel:
            answer = spb_grpc.StreamsGroupCoordinatorStub(channel).StreamsGroupHeartbeat(join_request("app"),
                                                                                       timeout=10)
    finally:
        srv.stop()
    assert answer.error_code == int(Errors.UNKNOWN_SERVER_ERROR)
    assert "OSError" in answer.error_message and answer.member_id == "m"
