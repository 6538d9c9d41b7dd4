"""One principal cannot heartbeat, commit, sync or leave as another principal's member, in either protocol:
the member is answered as unknown (UNKNOWN_MEMBER_ID, 25) and stays in its group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from groupcoord.coordinator.core.records import ConsumerGroupMemberMetadata
from groupcoord.coordinator.runtime import record_codec
from groupcoord.wire.v1 import coordinator_pb2 as pb
from tests.auth.conftest import Pki, StartServer, stub, write_acls
from tests.auth.test_tls_auth import join

UNKNOWN_MEMBER_ID = 25


def _both_may_read(pki: Pki, start_secured: StartServer, tmp_path: Path) -> tuple[Any, Any, Any]:
    acls = tmp_path / "acls.toml"
    write_acls(acls, ("User:alice", "READ", "LITERAL:*", "ALLOW"), ("User:bob", "READ", "LITERAL:*", "ALLOW"))
    srv = start_secured(tls=pki.tls(), acl_file=acls)
    return srv, stub(srv, pki.client("alice")), stub(srv, pki.client("bob"))


def test_consumer_member_cannot_be_heartbeated_committed_or_removed_by_another_principal(
        pki: Pki, start_secured: StartServer, tmp_path: Path) -> None:
    _, alice, bob = _both_may_read(pki, start_secured, tmp_path)
    joined = join(alice)
    assert joined.error_code == 0
    mid, epoch = joined.member_id, joined.member_epoch

    as_alice = bob.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
        group_id="orders-app", member_id=mid, member_epoch=epoch), timeout=10)
    assert as_alice.error_code == UNKNOWN_MEMBER_ID
    leave = bob.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
        group_id="orders-app", member_id=mid, member_epoch=-1), timeout=10)
    assert leave.error_code == UNKNOWN_MEMBER_ID
    rejoin = bob.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
        group_id="orders-app", member_id=mid, member_epoch=0, rebalance_timeout_ms=5000,
        subscribed_topic_names=pb.StringList(values=["orders"])), timeout=10)
    assert rejoin.error_code == UNKNOWN_MEMBER_ID
    commit = bob.OffsetCommit(pb.OffsetCommitRequest(
        group_id="orders-app", member_id=mid, generation_id_or_member_epoch=epoch,
        topics=[pb.OffsetCommitRequestTopic(name="orders", partitions=[
            pb.OffsetCommitRequestPartition(partition_index=0, committed_offset=42)])]), timeout=10)
    assert commit.error_code == UNKNOWN_MEMBER_ID or commit.topics[0].partitions[0].error_code == UNKNOWN_MEMBER_ID

    # alice's member is untouched and still hers
    again = alice.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(
        group_id="orders-app", member_id=mid, member_epoch=epoch), timeout=10)
    assert again.error_code == 0
    mine = alice.OffsetCommit(pb.OffsetCommitRequest(
        group_id="orders-app", member_id=mid, generation_id_or_member_epoch=again.member_epoch,
        topics=[pb.OffsetCommitRequestTopic(name="orders", partitions=[
            pb.OffsetCommitRequestPartition(partition_index=0, committed_offset=42)])]), timeout=10)
    assert mine.error_code == 0
    described = alice.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["orders-app"]), timeout=10).groups[0]
    assert [m.member_id for m in described.members] == [mid]


def test_classic_member_cannot_be_heartbeated_synced_or_removed_by_another_principal(
        pki: Pki, start_secured: StartServer, tmp_path: Path) -> None:
    _, alice, bob = _both_may_read(pki, start_secured, tmp_path)

    def join_classic(member_id: str) -> pb.JoinGroupResponse:
        return alice.JoinGroup(pb.JoinGroupRequest(  # type: ignore[no-any-return]
            group_id="classic-app", member_id=member_id, protocol_type="consumer", session_timeout_ms=6000,
            rebalance_timeout_ms=1000, protocols=[pb.JoinGroupRequestProtocol(name="range", metadata=b"x")]),
            timeout=10)

    first = join_classic("")
    assert first.error_code == 79  # MEMBER_ID_REQUIRED (KIP-394)
    joined = join_classic(first.member_id)
    assert joined.error_code == 0
    mid, generation = joined.member_id, joined.generation_id

    hb = bob.Heartbeat(pb.HeartbeatRequest(group_id="classic-app", member_id=mid, generation_id=generation),
                       timeout=10)
    assert hb.error_code == UNKNOWN_MEMBER_ID
    sync = bob.SyncGroup(pb.SyncGroupRequest(group_id="classic-app", member_id=mid, generation_id=generation,
                                             assignments=[pb.SyncGroupRequestAssignment(member_id=mid)]),
                         timeout=10)
    assert sync.error_code == UNKNOWN_MEMBER_ID
    left = bob.LeaveGroup(pb.LeaveGroupRequest(group_id="classic-app", members=[pb.MemberIdentity(member_id=mid)]),
                          timeout=10)
    assert left.members[0].error_code == UNKNOWN_MEMBER_ID
    commit = bob.OffsetCommit(pb.OffsetCommitRequest(
        group_id="classic-app", member_id=mid, generation_id_or_member_epoch=generation,
        topics=[pb.OffsetCommitRequestTopic(name="orders", partitions=[
            pb.OffsetCommitRequestPartition(partition_index=0, committed_offset=7)])]), timeout=10)
    assert commit.error_code == UNKNOWN_MEMBER_ID or commit.topics[0].partitions[0].error_code == UNKNOWN_MEMBER_ID

    synced = alice.SyncGroup(pb.SyncGroupRequest(group_id="classic-app", member_id=mid, generation_id=generation,
                                                 assignments=[pb.SyncGroupRequestAssignment(member_id=mid)]),
                             timeout=10)
    assert synced.error_code == 0
    described = alice.DescribeGroups(pb.DescribeGroupsRequest(group_ids=["classic-app"]), timeout=10).groups[0]
    assert [m.member_id for m in described.members] == [mid]


def test_member_principal_survives_the_record_log() -> None:
    record = ConsumerGroupMemberMetadata("g", "m1", None, None, "client", "/10.0.0.1", ("orders",), None, None,
                                         5000, "User:alice")
    assert record_codec.decode(record_codec.encode(record)) == record
    legacy = ConsumerGroupMemberMetadata("g", "m1", None, None, "client", "/10.0.0.1", ("orders",), None, None, 5000)
    assert record_codec.decode(record_codec.encode(legacy)).principal is None


def test_static_member_instance_cannot_be_taken_over_by_another_principal(
        pki: Pki, start_secured: StartServer, tmp_path: Path) -> None:
    _, alice, bob = _both_may_read(pki, start_secured, tmp_path)

    def join_static(s: Any, member_id: str = "", epoch: int = 0) -> pb.ConsumerGroupHeartbeatResponse:
        return s.ConsumerGroupHeartbeat(pb.ConsumerGroupHeartbeatRequest(  # type: ignore[no-any-return]
            group_id="static-app", member_id=member_id, member_epoch=epoch, instance_id="host-1",
            rebalance_timeout_ms=5000, subscribed_topic_names=pb.StringList(values=["orders"]),
            topic_partitions=pb.TopicPartitionsList()), timeout=10)

    joined = join_static(alice)
    assert joined.error_code == 0
    left = join_static(alice, joined.member_id, -2)  # a static member's temporary leave keeps its place
    assert left.error_code == 0
    taken = join_static(bob)
    assert taken.error_code == UNKNOWN_MEMBER_ID
    back = join_static(alice)
    assert back.error_code == 0
