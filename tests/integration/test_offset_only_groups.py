"""Groups known only by their committed offsets are visible over gRPC as Kafka shows them: ListGroups and
DescribeGroups report type classic, state Empty, protocol type ""."""

from __future__ import annotations

import grpc

from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc


def test_offset_only_groups_are_listed_and_described(server: ServerThread) -> None:
    with grpc.insecure_channel(server.address) as channel:
        stub = pb_grpc.GroupCoordinatorStub(channel)
        for i in range(3):
            r = stub.OffsetCommit(pb.OffsetCommitRequest(
                group_id=f"standalone-{i}", generation_id_or_member_epoch=-1,
                topics=[pb.OffsetCommitRequestTopic(name="orders", partitions=[
                    pb.OffsetCommitRequestPartition(partition_index=i, committed_offset=100 + i)])]), timeout=10)
            assert r.topics[0].partitions[0].error_code == 0
        listed = stub.ListGroups(pb.ListGroupsRequest(), timeout=10)
        assert {(g.group_id, g.group_type, g.group_state, g.protocol_type) for g in listed.groups} == {
            (f"standalone-{i}", "classic", "Empty", "") for i in range(3)}
        filtered = stub.ListGroups(pb.ListGroupsRequest(states_filter=["Empty"], types_filter=["classic"]),
                                   timeout=10)
        assert len(filtered.groups) == 3
        assert stub.ListGroups(pb.ListGroupsRequest(types_filter=["consumer"]), timeout=10).groups == []
        described = stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["standalone-1", "nobody"]),
                                        timeout=10).groups
        assert [(g.group_id, g.error_code, g.group_type, g.group_state, g.protocol_type, len(g.members))
                for g in described][0] == ("standalone-1", 0, "classic", "Empty", "", 0)
        assert described[1].error_code == 69  # GROUP_ID_NOT_FOUND
        deleted = stub.DeleteGroups(pb.DeleteGroupsRequest(group_ids=["standalone-0"]), timeout=10)
        assert deleted.results[0].error_code == 0
        assert {g.group_id for g in stub.ListGroups(pb.ListGroupsRequest(), timeout=10).groups} == {
            "standalone-1", "standalone-2"}
