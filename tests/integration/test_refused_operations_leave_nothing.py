"""A refused operation changes nothing, seen from outside over real gRPC: the first StreamsGroupHeartbeat of a
group whose topology is invalid is answered STREAMS_INVALID_TOPOLOGY, and afterwards the group does not exist
(not listed, and a consumer group may take its id). The record creating the group used to stay in memory."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from groupcoord.wire.v1 import streams_pb2 as spb
from groupcoord.wire.v1 import streams_pb2_grpc as spb_grpc
from tests.integration.conftest import start_server


@pytest.fixture
def server() -> Iterator[ServerThread]:
    srv = start_server({"lines": 4})
    try:
        yield srv
    finally:
        srv.stop()


def test_a_streams_join_refused_for_its_topology_leaves_no_group_behind(server: ServerThread) -> None:
    with grpc.insecure_channel(server.address) as channel:
        streams = spb_grpc.StreamsGroupCoordinatorStub(channel)
        coordinator = pb_grpc.GroupCoordinatorStub(channel)
        req = spb.StreamsGroupHeartbeatRequest(group_id="app", member_id="m1", member_epoch=0, process_id="p1",
                                               rebalance_timeout_ms=5000)
        req.topology.CopyFrom(spb.StreamsTopology(epoch=1, subtopologies=[
            spb.StreamsSubtopology(subtopology_id="0")]))  # a subtopology without source topics
        req.active_tasks.SetInParent()
        req.standby_tasks.SetInParent()
        req.warmup_tasks.SetInParent()
        refused = streams.StreamsGroupHeartbeat(req, timeout=10)
        assert refused.error_code == int(Errors.STREAMS_INVALID_TOPOLOGY), refused.error_message

        listed = coordinator.ListGroups(pb.ListGroupsRequest(), timeout=10)
        assert [g.group_id for g in listed.groups] == []

        join = coordinator.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
            group_id="app", member_epoch=0, rebalance_timeout_ms=5000,
            subscribed_topic_names=pb.StringList(values=["lines"]),
            topic_partitions=pb.TopicPartitionsList()), timeout=10)
        assert join.error_code == 0, join.error_message
        assert join.member_epoch > 0
