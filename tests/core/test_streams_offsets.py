"""Committed offsets of streams groups, as Kafka 4.4's StreamsGroup rules them: OffsetCommit and OffsetFetch
are checked against the streams member's epoch (validateOffsetCommit / validateOffsetFetch), OffsetDelete
refuses the topology's source topics while the group has members (isSubscribedToTopic), DeleteGroups needs
an empty group, and offset retention expires offsets from their commit time (offsetExpirationCondition)."""

from __future__ import annotations

from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.messages import CommitPartition, OffsetCommitRequest, OffsetFetchRequest
from groupcoord.coordinator.core.records import OffsetCommit, OffsetCommitTombstone
from groupcoord.coordinator.core.retention import RETENTION_TIMER
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from groupcoord.coordinator.core.streams import handlers as streams_shard
from groupcoord.coordinator.core.streams.group import StreamsHeartbeatRequest
from groupcoord.coordinator.core.streams.records import NO_TASKS, StreamsGroupMetadataTombstone
from tests.core.streams_context import GROUP, READY, image, word_count
from tests.purity import applied

RETENTION_MS = 60 * 60_000
CHECK_MS = 10_000


def shard_with_streams(**topics: int) -> GroupCoordinatorShard:
    return GroupCoordinatorShard(BrokerConfig.from_mapping({
        "group.streams.initial.rebalance.delay.ms": 0, "group.streams.assignor.offload.enable": False,
        "group.streams.assignment.interval.ms": 0, "offsets.retention.minutes": 60,
        "offsets.retention.check.interval.ms": CHECK_MS}),
        lambda: "unused", image(**{**READY, "other": 2, **topics}))


def join(shard: GroupCoordinatorShard, m: str, now: int = 0) -> int:
    req = StreamsHeartbeatRequest(GROUP, m, 0, topology=word_count(), process_id=m, rebalance_timeout_ms=1000,
                                  active_tasks=NO_TASKS, standby_tasks=NO_TASKS, warmup_tasks=NO_TASKS)
    res = streams_shard.heartbeat(shard, req, now)
    shard.apply(res)
    assert res.response.error_code == 0
    return res.response.member_epoch


def leave(shard: GroupCoordinatorShard, m: str, now: int = 0) -> None:
    res = streams_shard.heartbeat(shard, StreamsHeartbeatRequest(GROUP, m, -1), now)
    shard.apply(res)
    assert res.response.error_code == 0


def commit(shard: GroupCoordinatorShard, member: str, epoch: int, topic: str = "lines", partition: int = 0,
           offset: int = 10, now: int = 0):
    req = OffsetCommitRequest(GROUP, member, epoch, [CommitPartition(topic, partition, offset)])
    return applied(shard, shard.offset_commit(req, now))


def codes(res) -> list[Errors]:  # type: ignore[no-untyped-def]
    return [p.error_code for p in res.response.partitions]


def test_a_streams_member_commits_at_its_member_epoch() -> None:
    shard = shard_with_streams()
    epoch = join(shard, "a")
    res = commit(shard, "a", epoch)
    assert codes(res) == [Errors.NONE]
    assert shard.offsets.committed(GROUP)[("lines", 0)].committed_offset == 10


def test_a_commit_from_an_unknown_member_of_a_streams_group_is_unknown_member_id() -> None:
    shard = shard_with_streams()
    join(shard, "a")
    res = commit(shard, "ghost", 1)
    assert codes(res) == [Errors.UNKNOWN_MEMBER_ID]
    assert "is not a member of group" in res.response.partitions[0].error_message
    assert not shard.offsets.has_offsets(GROUP)


def test_a_streams_commit_at_any_other_epoch_is_stale_member_epoch() -> None:
    """Kafka's StreamsGroup.validateMemberEpoch: any mismatch, older or newer, is STALE_MEMBER_EPOCH (unlike
    consumer groups, where a newer epoch is FENCED_MEMBER_EPOCH)."""
    shard = shard_with_streams()
    epoch = join(shard, "a")
    for wrong in (epoch - 1, epoch + 1):
        res = commit(shard, "a", wrong)
        assert codes(res) == [Errors.STALE_MEMBER_EPOCH], wrong
        assert "does not match the expected member epoch" in res.response.partitions[0].error_message
    assert not shard.offsets.has_offsets(GROUP)


def test_an_admin_commit_at_epoch_minus_one_is_accepted_only_once_the_streams_group_is_empty() -> None:
    shard = shard_with_streams()
    join(shard, "a")
    assert codes(commit(shard, "", -1)) == [Errors.UNKNOWN_MEMBER_ID]
    leave(shard, "a")
    assert codes(commit(shard, "", -1, offset=42)) == [Errors.NONE]
    assert shard.offsets.committed(GROUP)[("lines", 0)].committed_offset == 42


def test_offset_fetch_of_a_streams_group_is_checked_against_the_member_epoch() -> None:
    shard = shard_with_streams()
    epoch = join(shard, "a")
    commit(shard, "a", epoch, offset=7)
    admin = shard.offset_fetch(OffsetFetchRequest(GROUP), 0).response
    assert admin.error_code == Errors.NONE and [o.committed_offset for o in admin.offsets] == [7]
    member = shard.offset_fetch(OffsetFetchRequest(GROUP, "a", epoch), 0).response
    assert member.error_code == Errors.NONE and [o.committed_offset for o in member.offsets] == [7]
    assert shard.offset_fetch(OffsetFetchRequest(GROUP, "ghost", epoch), 0).response.error_code \
        == Errors.UNKNOWN_MEMBER_ID
    assert shard.offset_fetch(OffsetFetchRequest(GROUP, "a", epoch + 1), 0).response.error_code \
        == Errors.STALE_MEMBER_EPOCH


def test_offset_delete_refuses_the_topology_source_topics_while_the_streams_group_has_members() -> None:
    shard = shard_with_streams()
    epoch = join(shard, "a")
    commit(shard, "a", epoch, "lines")
    commit(shard, "a", epoch, "other")
    group_result, parts = applied(shard, shard.delete_offsets(GROUP, [("lines", 0), ("other", 0)], 0)).response
    assert group_result.error_code == Errors.NONE
    assert [p.error_code for p in parts] == [Errors.GROUP_SUBSCRIBED_TO_TOPIC, Errors.NONE]
    assert set(shard.offsets.committed(GROUP)) == {("lines", 0)}
    leave(shard, "a")
    _, parts = applied(shard, shard.delete_offsets(GROUP, [("lines", 0)], 0)).response
    assert [p.error_code for p in parts] == [Errors.NONE] and not shard.offsets.has_offsets(GROUP)


def test_delete_groups_needs_an_empty_streams_group_and_removes_its_offsets() -> None:
    shard = shard_with_streams()
    epoch = join(shard, "a")
    commit(shard, "a", epoch)
    assert shard.delete_groups([GROUP], 0).response[0].error_code == Errors.NON_EMPTY_GROUP
    leave(shard, "a")
    res = applied(shard, shard.delete_groups([GROUP], 0))
    assert res.response[0].error_code == Errors.NONE
    assert OffsetCommitTombstone(GROUP, "lines", 0) in res.records
    assert not shard.offsets.has_offsets(GROUP) and GROUP not in shard.streams.groups


def fire_retention(shard: GroupCoordinatorShard, now: int) -> list[object]:
    shard.timer_deadlines[RETENTION_TIMER] = now
    return applied(shard, shard.on_timer(RETENTION_TIMER, now)).records


def test_retention_keeps_source_topic_offsets_of_a_running_streams_group_and_expires_the_rest() -> None:
    shard = shard_with_streams()
    epoch = join(shard, "a")
    commit(shard, "a", epoch, "lines")
    commit(shard, "a", epoch, "other")
    records = fire_retention(shard, RETENTION_MS + 1)
    assert records == [OffsetCommitTombstone(GROUP, "other", 0)]
    assert set(shard.offsets.committed(GROUP)) == {("lines", 0)}


def test_an_empty_streams_group_loses_its_offsets_after_retention_from_the_commit_and_is_deleted() -> None:
    """StreamsGroup.offsetExpirationCondition bases expiry on the commit timestamp; once every offset has
    expired the empty group is deleted (GroupMetadataManager.maybeDeleteGroup)."""
    shard = shard_with_streams()
    epoch = join(shard, "a")
    commit(shard, "a", epoch, "lines", now=0)
    leave(shard, "a", now=RETENTION_MS // 2)
    assert fire_retention(shard, RETENTION_MS - 1) == []
    records = fire_retention(shard, RETENTION_MS)
    assert OffsetCommitTombstone(GROUP, "lines", 0) in records
    assert GROUP not in shard.streams.groups and not shard.offsets.has_offsets(GROUP)
    replayed = shard_with_streams()
    for r in [OffsetCommit(GROUP, "lines", 0, 10, -1, "", 0)] + records:
        replayed.replay(r)
    assert not replayed.offsets.has_offsets(GROUP)


def test_a_streams_group_left_empty_without_offsets_is_deleted_by_the_next_retention_check() -> None:
    """The leave arms the retention check (Kafka runs it periodically), which deletes the empty group."""
    shard = shard_with_streams()
    join(shard, "a")
    res = streams_shard.heartbeat(shard, StreamsHeartbeatRequest(GROUP, "a", -1), 5)
    shard.apply(res)
    deadline = shard.timer_deadlines.get(RETENTION_TIMER)
    assert deadline is not None and any(getattr(t, "key", None) == RETENTION_TIMER for t in res.timers)
    records = applied(shard, shard.on_timer(RETENTION_TIMER, deadline)).records
    assert GROUP not in shard.streams.groups and records[-1] == StreamsGroupMetadataTombstone(GROUP)


def test_streams_offsets_retention_and_deletion_replay_to_the_same_state() -> None:
    shard, log = shard_with_streams(), []

    def take(res):  # type: ignore[no-untyped-def]
        log.extend(applied(shard, res).records)
        return res

    hb = StreamsHeartbeatRequest(GROUP, "a", 0, topology=word_count(), process_id="a", rebalance_timeout_ms=1000,
                                 active_tasks=NO_TASKS, standby_tasks=NO_TASKS, warmup_tasks=NO_TASKS)
    epoch = take(streams_shard.heartbeat(shard, hb, 0)).response.member_epoch
    log.extend(commit(shard, "a", epoch, "lines").records)  # applied by `commit`
    log.extend(commit(shard, "a", epoch, "other").records)
    take(shard.delete_offsets(GROUP, [("other", 0)], 1))
    mid = shard_with_streams()
    for r in log:
        mid.replay(r)
    assert mid.streams.groups[GROUP].persisted() == shard.streams.groups[GROUP].persisted()
    assert dict(mid.offsets.committed(GROUP)) == dict(shard.offsets.committed(GROUP))
    take(streams_shard.heartbeat(shard, StreamsHeartbeatRequest(GROUP, "a", -1), 2))
    shard.timer_deadlines[RETENTION_TIMER] = RETENTION_MS
    take(shard.on_timer(RETENTION_TIMER, RETENTION_MS))
    assert GROUP not in shard.streams.groups and not shard.offsets.has_offsets(GROUP)
    replayed = shard_with_streams()
    for r in log:
        replayed.replay(r)
    assert replayed.streams.groups == {} and replayed.offsets.group_ids() == []
