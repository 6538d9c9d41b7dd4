"""Hostile inputs over real gRPC on loopback: every id and name has a documented length limit, every list a
count cap, and an oversized request gets Kafka's error code before anything is written."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import grpc
import pytest

from groupcoord.coordinator.core.limits import (
    ADMIN_MAX_GROUP_IDS,
    ID_MAX_CHARS,
    SUBSCRIPTION_MAX_TOPICS,
    TOPIC_NAME_MAX_CHARS,
)
from groupcoord.coordinator.runtime.server import ServerThread
from groupcoord.wire.v1 import coordinator_pb2 as pb
from groupcoord.wire.v1 import coordinator_pb2_grpc as pb_grpc
from tests.integration.conftest import start_server

INVALID_REQUEST = 42
INVALID_GROUP_ID = 24
INVALID_CONFIG = 40
INVALID_REGULAR_EXPRESSION = 128
ECHO_BUDGET = 400  # an error message may name the limit and a 64-char excerpt, never the whole input


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    srv = start_server({"orders": 8}, **{"message.max.bytes": 100_000, "groupcoord.response.max.bytes": 4_000_000,
                                         "group.initial.rebalance.delay.ms": 0})
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def stub(server: ServerThread) -> Iterator[pb_grpc.GroupCoordinatorStub]:
    with grpc.insecure_channel(server.address) as channel:
        yield pb_grpc.GroupCoordinatorStub(channel)


def _commit(group_id: str, topic: str = "orders", partitions: int = 1) -> pb.OffsetCommitRequest:
    return pb.OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=-1, topics=[
        pb.OffsetCommitRequestTopic(name=topic, partitions=[
            pb.OffsetCommitRequestPartition(partition_index=i, committed_offset=5) for i in range(partitions)])])


def _join(group_id: str, member_id: str = "", protocol_type: str = "consumer", name: str = "range",
          metadata: bytes = b"m", reason: str = "") -> pb.JoinGroupRequest:
    return pb.JoinGroupRequest(group_id=group_id, member_id=member_id, session_timeout_ms=10_000,
                               rebalance_timeout_ms=10_000, protocol_type=protocol_type, reason=reason,
                               protocols=[pb.JoinGroupRequestProtocol(name=name, metadata=metadata)])


def test_offset_commit_refuses_an_oversized_group_id_with_invalid_group_id_and_writes_nothing(
        stub: pb_grpc.GroupCoordinatorStub) -> None:
    huge = "g" * 3_000_000
    resp = stub.OffsetCommit(_commit(huge), timeout=10)
    assert resp.error_code == INVALID_GROUP_ID
    assert len(resp.error_message) < ECHO_BUDGET
    edge = "e" * (ID_MAX_CHARS + 1)
    assert stub.OffsetCommit(_commit(edge), timeout=10).error_code == INVALID_GROUP_ID
    listed = stub.ListGroups(pb.ListGroupsRequest(), timeout=10)
    assert all(len(g.group_id) <= ID_MAX_CHARS for g in listed.groups)
    fetched = stub.OffsetFetch(pb.OffsetFetchRequest(group_id="e" * ID_MAX_CHARS), timeout=10)
    assert not fetched.topics
    ok = stub.OffsetCommit(_commit("e" * ID_MAX_CHARS), timeout=10)
    assert ok.error_code == 0


def test_alter_group_configs_refuses_an_oversized_group_id_and_config_names_and_values(
        stub: pb_grpc.GroupCoordinatorStub) -> None:
    resp = stub.AlterGroupConfigs(pb.AlterGroupConfigsRequest(group_id="a" * 1_000_000, configs=[
        pb.AlterableConfig(name="consumer.session.timeout.ms", value="1500")]), timeout=10)
    assert resp.error_code == INVALID_GROUP_ID and len(resp.error_message) < ECHO_BUDGET
    resp = stub.AlterGroupConfigs(pb.AlterGroupConfigsRequest(group_id="cfg", configs=[
        pb.AlterableConfig(name="x" * 1_000_000, value="1")]), timeout=10)
    assert resp.error_code == INVALID_CONFIG and len(resp.error_message) < ECHO_BUDGET
    resp = stub.AlterGroupConfigs(pb.AlterGroupConfigsRequest(group_id="cfg", configs=[
        pb.AlterableConfig(name="consumer.session.timeout.ms", value="9" * 100_000)]), timeout=10)
    assert resp.error_code == INVALID_CONFIG and len(resp.error_message) < ECHO_BUDGET
    described = stub.DescribeGroupConfigs(pb.DescribeGroupConfigsRequest(group_ids=["cfg"]), timeout=10)
    assert all(c.is_default for c in described.results[0].configs)


def test_heartbeat_refuses_oversized_topic_names_regexes_and_subscriptions(
        stub: pb_grpc.GroupCoordinatorStub) -> None:
    def join(**fields: object) -> pb.ConsumerGroupHeartbeatResponse:
        fields.setdefault("topic_partitions", pb.TopicPartitionsList())
        req = pb.ConsumerGroupHeartbeatRequest(group_id="hb", member_id="m1", member_epoch=0,
                                               rebalance_timeout_ms=1000, **fields)  # type: ignore[arg-type]
        return stub.ConsumerGroupHeartbeat(req, timeout=10)

    long_group = stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
        group_id="g" * 1_000_000, member_epoch=0, rebalance_timeout_ms=1000), timeout=10)
    assert long_group.error_code == INVALID_REQUEST  # Kafka validates heartbeat fields with INVALID_REQUEST
    assert len(long_group.error_message) < ECHO_BUDGET
    long_topic = join(subscribed_topic_names=pb.StringList(values=["t" * (TOPIC_NAME_MAX_CHARS + 1)]))
    assert long_topic.error_code == INVALID_REQUEST and len(long_topic.error_message) < ECHO_BUDGET
    many = join(subscribed_topic_names=pb.StringList(values=[f"t{i}" for i in range(SUBSCRIPTION_MAX_TOPICS + 1)]))
    assert many.error_code == INVALID_REQUEST
    regex = join(subscribed_topic_regex="o" * 100_000)
    assert regex.error_code == INVALID_REGULAR_EXPRESSION and len(regex.error_message) < ECHO_BUDGET
    rack = join(subscribed_topic_names=pb.StringList(values=["orders"]), rack_id="r" * 10_000)
    assert rack.error_code == INVALID_REQUEST
    owned = join(subscribed_topic_names=pb.StringList(values=["orders"]), topic_partitions=pb.TopicPartitionsList(
        topics=[pb.TopicPartitions(topic_id="x", partitions=list(range(1_000_000)))]))
    assert owned.error_code == INVALID_REQUEST
    described = stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["hb"]), timeout=10)
    assert described.groups[0].error_code != 0  # nothing was written: the group does not exist
    fine = join(subscribed_topic_names=pb.StringList(values=["orders"]))
    assert fine.error_code == 0


def test_classic_join_refuses_oversized_protocol_names_and_types_and_truncates_reasons(
        stub: pb_grpc.GroupCoordinatorStub) -> None:
    resp = stub.JoinGroup(_join("cj", protocol_type="c" * 1_000_000), timeout=10)
    assert resp.error_code == INVALID_REQUEST and len(resp.error_message) < ECHO_BUDGET
    resp = stub.JoinGroup(_join("cj", name="n" * 1000), timeout=10)
    assert resp.error_code == INVALID_REQUEST and len(resp.error_message) < ECHO_BUDGET
    resp = stub.JoinGroup(pb.JoinGroupRequest(group_id="cj", session_timeout_ms=10_000, protocol_type="consumer",
                                              protocols=[pb.JoinGroupRequestProtocol(name=f"p{i}")
                                                         for i in range(10_000)]), timeout=10)
    assert resp.error_code == INVALID_REQUEST
    resp = stub.JoinGroup(_join("cj", reason="why" * 100_000), timeout=10)
    assert resp.error_code == 79  # MEMBER_ID_REQUIRED: a long reason is truncated, as Kafka's clients do
    left = stub.LeaveGroup(pb.LeaveGroupRequest(group_id="cj", members=[
        pb.MemberIdentity(member_id=resp.member_id, reason="r" * 1_000_000)]), timeout=10)
    assert left.error_code in (0, 25)


def test_classic_group_metadata_is_capped_per_group_by_message_max_bytes(
        stub: pb_grpc.GroupCoordinatorStub) -> None:
    too_big = stub.JoinGroup(_join("meta", member_id="", metadata=b"x" * 100_001), timeout=10)
    assert too_big.error_code == INVALID_REQUEST and "message.max.bytes" in too_big.error_message
    accepted = 0
    for i in range(4):
        first = stub.JoinGroup(_join("meta", metadata=b"x" * 40_000), timeout=10)
        if first.error_code == INVALID_REQUEST:
            break
        assert first.error_code == 79, first.error_message
        try:  # a join may park until the rebalance completes; either way the member is now in the group
            joined = stub.JoinGroup(_join("meta", member_id=first.member_id, metadata=b"x" * 40_000), timeout=0.5)
            assert joined.error_code == 0, joined.error_message
        except grpc.RpcError as parked:
            assert parked.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        accepted = i + 1
    assert accepted == 2  # 2 x 40 kB fit in 100 kB; the third member would exceed it


def test_admin_requests_over_the_id_cap_are_refused_and_ids_are_length_checked(
        stub: pb_grpc.GroupCoordinatorStub) -> None:
    ids = [f"g{i}" for i in range(ADMIN_MAX_GROUP_IDS + 1)]
    for rpc, req in ((stub.DescribeGroupConfigs, pb.DescribeGroupConfigsRequest(group_ids=ids)),
                     (stub.DescribeGroups, pb.DescribeGroupsRequest(group_ids=ids)),
                     (stub.DeleteGroups, pb.DeleteGroupsRequest(group_ids=ids))):
        resp = rpc(req, timeout=30)
        results = list(getattr(resp, "results", None) or resp.groups)
        assert results and all(r.error_code == INVALID_REQUEST for r in results)
        assert all(len(r.error_message) < ECHO_BUDGET for r in results)
    filters = stub.ListGroups(pb.ListGroupsRequest(states_filter=["s"] * 1000), timeout=10)
    assert filters.error_code == INVALID_REQUEST
    at_cap = stub.DescribeGroupConfigs(pb.DescribeGroupConfigsRequest(group_ids=ids[:-1]), timeout=30)
    assert len(at_cap.results) == ADMIN_MAX_GROUP_IDS and all(r.error_code == 0 for r in at_cap.results)
    long_id = stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["ok", "z" * 100_000]), timeout=10)
    assert [g.error_code for g in long_id.groups] == [69, INVALID_GROUP_ID]
    assert len(long_id.groups[1].group_id) < ECHO_BUDGET


def test_offset_commit_and_fetch_over_the_partition_cap_are_refused(stub: pb_grpc.GroupCoordinatorStub) -> None:
    resp = stub.OffsetCommit(_commit("many", partitions=200_000), timeout=30)
    assert resp.error_code == INVALID_REQUEST
    assert stub.OffsetFetch(pb.OffsetFetchRequest(group_id="many"), timeout=10).topics == []
    long_topic = stub.OffsetCommit(_commit("many", topic="t" * 10_000), timeout=10)
    assert long_topic.error_code == INVALID_REQUEST and len(long_topic.error_message) < ECHO_BUDGET
    fetch = stub.OffsetFetch(pb.OffsetFetchRequest(group_id="many", topics=pb.OffsetFetchRequestTopics(topics=[
        pb.OffsetFetchRequestTopic(name="orders", partition_indexes=list(range(200_000)))])), timeout=10)
    assert fetch.error_code == INVALID_REQUEST


def test_a_request_larger_than_the_grpc_receive_limit_is_refused_by_the_transport(
        stub: pb_grpc.GroupCoordinatorStub) -> None:
    with pytest.raises(grpc.RpcError) as refused:
        stub.OffsetCommit(_commit("x" * 6_000_000), timeout=10)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_describing_one_large_group_many_times_stops_at_the_response_budget(
        stub: pb_grpc.GroupCoordinatorStub) -> None:
    first = stub.JoinGroup(_join("large", metadata=b"m" * 40_000), timeout=10)
    joined = stub.JoinGroup(_join("large", member_id=first.member_id, metadata=b"m" * 40_000), timeout=10)
    assert joined.error_code == 0 and joined.leader == first.member_id
    synced = stub.SyncGroup(pb.SyncGroupRequest(
        group_id="large", generation_id=joined.generation_id, member_id=first.member_id,
        assignments=[pb.SyncGroupRequestAssignment(member_id=first.member_id, assignment=b"a" * 40_000)]), timeout=10)
    assert synced.error_code == 0
    resp = stub.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["large"] * ADMIN_MAX_GROUP_IDS), timeout=60)
    assert resp.ByteSize() <= 4_000_000
    described = [g for g in resp.groups if g.error_code == 0]
    assert described and described[0].members[0].member_metadata == b"m" * 40_000
    refused = [g for g in resp.groups if g.error_code == INVALID_REQUEST]
    assert len(described) + len(refused) == ADMIN_MAX_GROUP_IDS
    assert "groupcoord.response.max.bytes" in refused[0].error_message


def test_the_cli_reads_the_largest_legal_classic_group(server: ServerThread,
                                                       stub: pb_grpc.GroupCoordinatorStub) -> None:
    members = []
    for _ in range(2):  # 2 x 45 kB of metadata: near this server's message.max.bytes (100 kB)
        first = stub.JoinGroup(_join("cli-large", metadata=b"c" * 45_000), timeout=10)
        assert first.error_code == 79, first.error_message
        members.append(first.member_id)
        try:
            stub.JoinGroup(_join("cli-large", member_id=first.member_id, metadata=b"c" * 45_000), timeout=0.5)
        except grpc.RpcError as parked:
            assert parked.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    result = subprocess.run([sys.executable, "-m", "groupcoord", "groups", "describe", "cli-large", "--json",
                             "--server", server.address], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert all(m in result.stdout for m in members)


def test_find_coordinator_refuses_oversized_keys_and_too_many_keys(stub: pb_grpc.GroupCoordinatorStub) -> None:
    resp = stub.FindCoordinator(pb.FindCoordinatorRequest(keys=["ok", "k" * 1_000_000]), timeout=10)
    assert [c.error_code for c in resp.coordinators] == [0, INVALID_GROUP_ID]
    assert len(resp.coordinators[1].key) < ECHO_BUDGET
    many = stub.FindCoordinator(pb.FindCoordinatorRequest(keys=["k"] * (ADMIN_MAX_GROUP_IDS + 1)), timeout=10)
    assert all(c.error_code == INVALID_REQUEST for c in many.coordinators)


def test_a_member_assigned_more_than_the_owned_limit_can_acknowledge_its_assignment() -> None:
    """The owned-list cap is at least every partition the metadata knows: a member the coordinator assigned
    60,000 partitions reports them all (it was refused with 42 when the cap was a fixed 50,000)."""
    # A session long enough for 60,000-partition heartbeats on a loaded machine: the test is about the owned cap.
    srv = start_server({"huge": 60_000}, **{"group.initial.rebalance.delay.ms": 0,
                                           "group.consumer.session.timeout.ms": 30_000})
    try:
        with grpc.insecure_channel(srv.address, options=[("grpc.max_receive_message_length", 64 << 20)]) as ch:
            stub = pb_grpc.GroupCoordinatorStub(ch)
            joined = stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
                group_id="big", member_epoch=0, rebalance_timeout_ms=1000,
                subscribed_topic_names=pb.StringList(values=["huge"]), topic_partitions=pb.TopicPartitionsList()),
                timeout=30)
            assert joined.error_code == 0
            assigned = joined.assignment.topic_partitions
            deadline = time.monotonic() + 60
            while not assigned and time.monotonic() < deadline:  # the target comes a heartbeat or two later
                time.sleep(0.1)
                joined = stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
                    group_id="big", member_id=joined.member_id, member_epoch=joined.member_epoch), timeout=30)
                assert joined.error_code == 0, joined.error_message
                assigned = joined.assignment.topic_partitions
            assert sum(len(tp.partitions) for tp in assigned) == 60_000
            ack = stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
                group_id="big", member_id=joined.member_id, member_epoch=joined.member_epoch,
                topic_partitions=pb.TopicPartitionsList(topics=list(assigned))), timeout=30)
            assert (ack.error_code, ack.error_message) == (0, "")
            too_many = stub.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
                group_id="big", member_id=joined.member_id, member_epoch=joined.member_epoch,
                topic_partitions=pb.TopicPartitionsList(topics=[pb.TopicPartitions(
                    topic_id="x", partitions=list(range(60_001)))])), timeout=30)
            assert too_many.error_code == INVALID_REQUEST  # still capped: by what the metadata knows
    finally:
        srv.stop()
