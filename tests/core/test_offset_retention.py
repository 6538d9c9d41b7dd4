"""Offset-only groups and offset expiry (KIP-211, Kafka's OffsetMetadataManager.cleanupExpiredOffsets).

Committed offsets expire `offsets.retention.minutes` after the group became empty (members once existed) or
after the commit (a group that never had members: standalone commits). The check is a core timer every
`offsets.retention.check.interval.ms` that writes tombstones, so replay gives the same state; a group with
no members and no offsets left is removed (GroupMetadataManager.maybeDeleteGroup). Offset-only groups are
listed and described as Kafka shows them: type classic, state Empty, protocol type "".
"""

from __future__ import annotations

from typing import Any

from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.messages import CommitPartition, OffsetCommitRequest
from groupcoord.coordinator.core.records import GroupEmptySince, OffsetCommitTombstone
from tests.core.context import CoreContext, shard_state

RETENTION_MS = 60 * 60_000  # offsets.retention.minutes=60
CHECK_MS = 60_000


def ctx_with_retention(**config: Any) -> CoreContext:
    return CoreContext({"foo": 4, "bar": 2}, overrides={"offsets.retention.minutes": 60,
                                                         "offsets.retention.check.interval.ms": CHECK_MS},
                       **config)


def commit(ctx: CoreContext, group_id: str, member_id: str = "", epoch: int = -1, partition: int = 0,
           topic: str = "foo") -> None:
    response = ctx.apply(ctx.shard.offset_commit(
        OffsetCommitRequest(group_id, member_id, epoch, [CommitPartition(topic, partition, 42)]), ctx.now))
    assert [p.error_code for p in response.partitions] == [Errors.NONE]


def committed(ctx: CoreContext, group_id: str) -> set[tuple[str, int]]:
    return set(ctx.shard.offsets.committed(group_id))


def keep_alive(ctx: CoreContext, ms: int, *members: str) -> None:
    """Advance the clock by `ms` while `members` heartbeat every 30 s (the session timeout is 45 s)."""
    end = ctx.now + ms
    while ctx.now < end:
        ctx.advance(min(30_000, end - ctx.now))
        for m in members:
            assert ctx.heartbeat(member_id=m, member_epoch=ctx.member(m).member_epoch).error_code is Errors.NONE


def listed(ctx: CoreContext) -> dict[str, tuple[str, str, str]]:
    return {g.group_id: (g.group_type, g.group_state, g.protocol_type)
            for g in ctx.shard.list_groups([], [], ctx.now).response}


def test_offset_only_groups_are_listed_and_described_as_empty_classic_groups() -> None:
    ctx = ctx_with_retention()
    commit(ctx, "standalone")
    assert listed(ctx)["standalone"] == ("classic", "Empty", "")
    assert [g.group_id for g in ctx.shard.list_groups(["Empty"], ["classic"], ctx.now).response] == ["standalone"]
    assert ctx.shard.list_groups(["Stable"], [], ctx.now).response == []
    (described,) = ctx.shard.describe_groups(["standalone"], ctx.now).response
    assert (described.error_code, described.group_type, described.group_state, described.protocol_type,
            list(described.members)) == (Errors.NONE, "classic", "Empty", "", [])


def test_standalone_commits_expire_retention_after_the_commit() -> None:
    ctx = ctx_with_retention()
    commit(ctx, "standalone", partition=0)
    ctx.advance(RETENTION_MS // 2)
    commit(ctx, "standalone", partition=1)  # a later commit keeps its own clock
    ctx.advance(RETENTION_MS // 2 + CHECK_MS)
    assert committed(ctx, "standalone") == {("foo", 1)}
    assert OffsetCommitTombstone("standalone", "foo", 0) in ctx.records
    ctx.advance(RETENTION_MS // 2)
    assert committed(ctx, "standalone") == set()
    assert "standalone" not in listed(ctx)


def test_offsets_of_a_group_that_became_empty_expire_retention_after_it_became_empty() -> None:
    ctx = ctx_with_retention()
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.stabilise()
    commit(ctx, "grp", "a", ctx.member("a").member_epoch)
    keep_alive(ctx, 2 * RETENTION_MS, "a")  # an old commit, but the group has members: nothing expires
    assert committed(ctx, "grp") == {("foo", 0)}
    left_at = ctx.now
    ctx.heartbeat(member_id="a", member_epoch=-1)
    assert GroupEmptySince("grp", left_at) in ctx.records
    ctx.advance(RETENTION_MS - CHECK_MS)  # counted from when it became empty, not from the commit
    assert committed(ctx, "grp") == {("foo", 0)}
    ctx.advance(2 * CHECK_MS)
    assert committed(ctx, "grp") == set()
    assert "grp" not in ctx.shard.groups  # no members and no offsets: removed
    assert "grp" not in listed(ctx)


def test_a_group_with_members_keeps_offsets_of_topics_it_subscribes_to() -> None:
    ctx = ctx_with_retention()
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.stabilise()
    commit(ctx, "grp", "a", ctx.member("a").member_epoch, topic="foo")
    commit(ctx, "grp", "a", ctx.member("a").member_epoch, topic="bar")  # no longer subscribed
    keep_alive(ctx, 3 * RETENTION_MS // 2, "a")
    assert committed(ctx, "grp") == {("foo", 0)}
    assert "a" in ctx.group().members


def test_an_empty_group_without_offsets_is_removed_at_the_next_check() -> None:
    ctx = ctx_with_retention()
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.heartbeat(member_id="a", member_epoch=-1)
    assert "grp" in ctx.shard.groups
    ctx.advance(CHECK_MS)
    assert "grp" not in ctx.shard.groups and "grp" not in listed(ctx)


def test_a_group_that_gets_members_again_restarts_the_clock() -> None:
    ctx = ctx_with_retention()
    ctx.join("a", subscribed_topic_names=("foo",))
    commit(ctx, "grp", "a", ctx.member("a").member_epoch)
    ctx.heartbeat(member_id="a", member_epoch=-1)
    ctx.advance(CHECK_MS // 2)
    ctx.join("b", subscribed_topic_names=("foo",))
    assert "grp" not in ctx.shard.empty_since
    keep_alive(ctx, RETENTION_MS, "b")
    ctx.heartbeat(member_id="b", member_epoch=-1)
    ctx.advance(RETENTION_MS - CHECK_MS)
    assert committed(ctx, "grp") == {("foo", 0)}
    ctx.advance(2 * CHECK_MS)
    assert committed(ctx, "grp") == set()


def test_the_check_is_split_into_batches_and_covers_every_group() -> None:
    ctx = ctx_with_retention()
    for i in range(2500):
        commit(ctx, f"g{i}")
    ctx.advance(RETENTION_MS + CHECK_MS)
    assert ctx.shard.offsets.group_ids() == []
    assert listed(ctx) == {}


def test_expiry_replays_to_the_same_state() -> None:
    ctx = ctx_with_retention()
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.stabilise()
    commit(ctx, "grp", "a", ctx.member("a").member_epoch)
    commit(ctx, "standalone")
    keep_alive(ctx, RETENTION_MS // 2, "a")
    ctx.heartbeat(member_id="a", member_epoch=-1)
    commit(ctx, "other")
    ctx.advance(RETENTION_MS // 2 + CHECK_MS)  # standalone expired; grp and other not yet
    replayed = ctx.fresh_replay()
    assert shard_state(replayed) == shard_state(ctx.shard)
    assert replayed.empty_since == ctx.shard.empty_since and set(replayed.empty_since) == {"grp"}
    assert set(replayed.offsets.group_ids()) == {"grp", "other"}
