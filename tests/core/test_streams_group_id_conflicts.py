"""One group id, one group type: what Kafka 4.4's GroupMetadataManager answers when a request of one protocol
names a group of another.

Kafka (GroupMetadataManager, 4.4):
- consumerGroupHeartbeat -> getOrMaybeCreateConsumerGroup: GROUP_ID_NOT_FOUND "Group %s is not a consumer group."
- classicGroupJoin: a group that is neither consumer nor classic -> INCONSISTENT_GROUP_PROTOCOL, member id ""
  ("Group exists but it's not a consumer group"); classicGroupSync -> UNKNOWN_MEMBER_ID; classicGroupHeartbeat
  and classicGroupLeave -> UNKNOWN_MEMBER_ID "Group %s not found."
- shareGroupHeartbeat -> GROUP_ID_NOT_FOUND "Group %s is not a share group."
- streamsGroupHeartbeat -> castToStreamsGroup: GROUP_ID_NOT_FOUND "Group %s is not a streams group."; a join
  to an empty classic group deletes it first (getOrCreateStreamsGroup -> maybeDeleteEmptyClassicGroup).
"""

from __future__ import annotations

from groupcoord.coordinator.core.classic.group import ClassicGroup
from groupcoord.coordinator.core.classic.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    MemberIdentity,
    SyncGroupRequest,
)
from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.messages import ConsumerGroupHeartbeatRequest
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from groupcoord.coordinator.core.share import handlers as share_handlers
from groupcoord.coordinator.core.share.records import ShareGroupHeartbeatRequest
from groupcoord.coordinator.core.streams import handlers as streams_shard
from groupcoord.coordinator.core.streams.group import StreamsHeartbeatRequest
from groupcoord.coordinator.core.streams.records import NO_TASKS
from tests.core.streams_context import READY, image, word_count

GID = "app"


def new_shard() -> GroupCoordinatorShard:
    ids = iter(f"m{i}" for i in range(1000))
    return GroupCoordinatorShard(BrokerConfig.from_mapping({
        "group.streams.initial.rebalance.delay.ms": 0, "group.streams.assignor.offload.enable": False,
        "group.streams.assignment.interval.ms": 0, "group.consumer.assignor.offload.enable": False}),
        lambda: next(ids), image(**READY))


def streams_join(shard: GroupCoordinatorShard, member: str = "s1", gid: str = GID):
    req = StreamsHeartbeatRequest(gid, member, 0, topology=word_count(), process_id="p1", rebalance_timeout_ms=1000,
                                  active_tasks=NO_TASKS, standby_tasks=NO_TASKS, warmup_tasks=NO_TASKS)
    res = streams_shard.heartbeat(shard, req, 0)
    shard.apply(res)
    return res


def consumer_join(shard: GroupCoordinatorShard, gid: str = GID):
    result = shard.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
        gid, "", 0, rebalance_timeout_ms=1000, subscribed_topic_names=("lines",), topic_partitions={}), 0)
    shard.apply(result)
    return result


def classic_join(shard: GroupCoordinatorShard, gid: str = GID, member_id: str = ""):
    result = shard.classic_group_join(JoinGroupRequest(gid, member_id, "consumer", (("range", b""),), 10_000), 0, 1)
    shard.apply(result)
    return result


def share_join(shard: GroupCoordinatorShard, gid: str = GID):
    req = ShareGroupHeartbeatRequest(gid, "sh1", 0, subscribed_topic_names=("lines",))
    result = share_handlers.heartbeat(shard, req, 0)
    shard.apply(result)
    return result


def test_a_consumer_heartbeat_cannot_take_a_streams_groups_id() -> None:
    shard = new_shard()
    assert streams_join(shard).response.error_code == 0
    res = consumer_join(shard)
    assert (res.response.error_code, res.response.error_message) == \
        (Errors.GROUP_ID_NOT_FOUND, "Group app is not a consumer group.")
    assert not res.records and shard.groups[GID].group_type == "streams"
    assert GID in shard.streams.groups and shard.streams.groups[GID].members


def test_a_consumer_heartbeat_at_a_member_epoch_is_refused_for_a_streams_group() -> None:
    shard = new_shard()
    streams_join(shard)
    res = shard.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(GID, "s1", 1), 0)
    assert (res.response.error_code, res.response.error_message) == \
        (Errors.GROUP_ID_NOT_FOUND, "Group app is not a consumer group.")


def test_an_empty_streams_group_still_holds_its_id_against_a_consumer_group() -> None:
    shard = new_shard()
    streams_join(shard)
    shard.apply(streams_shard.heartbeat(shard, StreamsHeartbeatRequest(GID, "s1", -1), 10))
    assert shard.streams.state(GID).value == "Empty"
    assert consumer_join(shard).response.error_code == Errors.GROUP_ID_NOT_FOUND


def test_a_classic_join_to_a_streams_group_is_an_inconsistent_group_protocol() -> None:
    shard = new_shard()
    streams_join(shard)
    for member_id in ("", "someone"):
        res = classic_join(shard, member_id=member_id)
        assert res.response is not None
        assert res.response.error_code == Errors.INCONSISTENT_GROUP_PROTOCOL
        assert res.response.member_id == ""
        assert not res.records and shard.groups[GID].group_type == "streams"


def test_classic_sync_heartbeat_and_leave_to_a_streams_group_are_unknown_members() -> None:
    shard = new_shard()
    streams_join(shard)
    sync = shard.classic_group_sync(SyncGroupRequest(GID, 1, "s1"), 0, 1).response
    assert sync is not None and sync.error_code == Errors.UNKNOWN_MEMBER_ID
    hb = shard.classic_group_heartbeat(HeartbeatRequest(GID, 1, "s1"), 0).response
    assert (hb.error_code, hb.error_message) == (Errors.UNKNOWN_MEMBER_ID, "Group app not found.")
    leave = shard.classic_group_leave(LeaveGroupRequest(GID, (MemberIdentity("s1"),)), 0).response
    assert [(m.error_code, m.error_message) for m in leave.members] == \
        [(Errors.UNKNOWN_MEMBER_ID, "Group app not found.")]
    assert shard.streams.groups[GID].members, "nothing touched the streams group"


def test_a_share_heartbeat_cannot_take_a_streams_groups_id() -> None:
    shard = new_shard()
    streams_join(shard)
    res = share_join(shard)
    assert (res.response.error_code, res.response.error_message) == \
        (Errors.GROUP_ID_NOT_FOUND, "Group app is not a share group.")
    assert shard.groups[GID].group_type == "streams"


def test_a_streams_heartbeat_cannot_take_a_consumer_or_share_groups_id() -> None:
    shard = new_shard()
    assert consumer_join(shard, "c").response.error_code == 0
    assert share_join(shard, "s").response.error_code == 0
    for gid in ("c", "s"):
        res = streams_join(shard, gid=gid)
        assert (res.response.error_code, res.response.error_message) == \
            (Errors.GROUP_ID_NOT_FOUND, f"Group {gid} is not a streams group.")
        assert gid not in shard.streams.groups


def test_a_streams_heartbeat_cannot_take_a_classic_group_with_members() -> None:
    shard = new_shard()
    first = classic_join(shard, "k").response
    assert first is not None and first.error_code == Errors.MEMBER_ID_REQUIRED
    classic_join(shard, "k", member_id=first.member_id)
    assert isinstance(shard.groups["k"], ClassicGroup) and not shard.groups["k"].is_empty()
    res = streams_join(shard, gid="k")
    assert (res.response.error_code, res.response.error_message) == \
        (Errors.GROUP_ID_NOT_FOUND, "Group k is not a streams group.")


def test_a_streams_join_converts_an_empty_classic_group_and_replay_agrees() -> None:
    shard = new_shard()
    res = classic_join(shard, "k")  # MEMBER_ID_REQUIRED: the group exists, empty
    log = list(res.records)
    assert isinstance(shard.groups.get("k"), ClassicGroup) and shard.groups["k"].is_empty()
    joined = streams_join(shard, gid="k")
    assert joined.response.error_code == 0
    log += joined.records
    assert shard.groups["k"].group_type == "streams"
    assert "k" not in shard.empty_since, "the classic group's GroupEmptySince goes with it"
    fresh = new_shard()
    for rec in log:
        fresh.replay(rec)
    assert fresh.groups["k"].group_type == "streams", "the classic group's tombstone is in the log"
    assert fresh.streams.groups["k"].persisted() == shard.streams.groups["k"].persisted()
    assert "k" not in fresh.empty_since


def test_a_streams_heartbeat_to_an_absent_group_says_streams_group_not_found() -> None:
    shard = new_shard()
    res = streams_shard.heartbeat(shard, StreamsHeartbeatRequest(GID, "s1", 3), 0)
    assert (res.response.error_code, res.response.error_message) == \
        (Errors.GROUP_ID_NOT_FOUND, "Streams group app not found.")
