"""Kafka's OffsetMetadataManagerTest (commit and fetch validation), ported against the shard's offset rules.

Kafka answers a commit that fails group-level validation (unknown member, newer epoch, bad generation) with
that error on every partition; a partition-level failure (metadata too large, KIP-1251's stale epoch for one
partition) fails only that partition, and only accepted partitions are written.
"""

from __future__ import annotations

from collections.abc import Sequence

from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.messages import (
    CommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
)
from groupcoord.coordinator.core.records import OffsetCommit
from tests.classic.context import ClassicContext
from tests.core.context import START_MS, CoreContext


def commit(ctx: CoreContext | ClassicContext, member_id: str, epoch: int,
           partitions: Sequence[CommitPartition] = (CommitPartition("bar", 0, 100),), group_id: str = "foo",
           instance_id: str | None = None) -> OffsetCommitResponse:
    request = OffsetCommitRequest(group_id, member_id, epoch, list(partitions), instance_id)
    return ctx.apply(ctx.shard.offset_commit(request, ctx.now))  # type: ignore[no-any-return]


def codes(response: OffsetCommitResponse) -> dict[tuple[str, int], Errors]:
    return {(p.topic, p.partition): p.error_code for p in response.partitions}


def written(ctx: CoreContext, since: int = 0) -> list[OffsetCommit]:
    return [r for r in ctx.records[since:] if isinstance(r, OffsetCommit)]


def group_with_member(topics: dict[str, int] | None = None) -> CoreContext:
    """Group "foo" with one stable member "member" subscribed to bar."""
    ctx = CoreContext(topics or {"bar": 3}, group_consumer_assignors="range")
    ctx.join("member", group_id="foo", subscribed_topic_names=("bar",))
    ctx.stabilise("foo")
    return ctx


def empty_group() -> CoreContext:
    ctx = group_with_member()
    ctx.heartbeat("foo", "member", -1)
    assert not ctx.group("foo").members
    return ctx


# --- consumer groups -----------------------------------------------------------------------------------
def test_kafka_testOffsetCommitWithUnknownGroup() -> None:
    ctx = CoreContext({"bar": 3})
    r = commit(ctx, "member", 10)
    assert codes(r) == {("bar", 0): Errors.GROUP_ID_NOT_FOUND}
    assert not written(ctx)


def test_kafka_testConsumerGroupOffsetCommitWithUnknownMemberId() -> None:
    ctx = empty_group()
    n = len(ctx.records)
    r = commit(ctx, "member", 10)
    assert codes(r) == {("bar", 0): Errors.UNKNOWN_MEMBER_ID}
    assert not written(ctx, n)


def test_kafka_testConsumerGroupOffsetCommitWithStaleMemberEpoch() -> None:
    ctx = group_with_member()
    epoch = ctx.member("member", "foo").member_epoch
    n = len(ctx.records)
    # A smaller epoch is rejected for a partition the member did not hold at that epoch...
    assert codes(commit(ctx, "member", epoch - 1)) == {("bar", 0): Errors.STALE_MEMBER_EPOCH}
    # ...and a larger one always.
    assert codes(commit(ctx, "member", epoch + 1)) == {("bar", 0): Errors.STALE_MEMBER_EPOCH}
    assert not written(ctx, n)


def test_kafka_testConsumerGroupOffsetCommitFromAdminClient() -> None:
    ctx = empty_group()
    n = len(ctx.records)
    r = commit(ctx, "", -1)
    assert r.error_code is Errors.NONE and codes(r) == {("bar", 0): Errors.NONE}
    assert written(ctx, n) == [OffsetCommit("foo", "bar", 0, 100, -1, "", ctx.now)]


def test_kafka_testConsumerGroupOffsetCommit() -> None:
    ctx = group_with_member()
    epoch = ctx.member("member", "foo").member_epoch
    n = len(ctx.records)
    r = commit(ctx, "member", epoch, [CommitPartition("bar", 0, 100, 10, "metadata")])
    assert codes(r) == {("bar", 0): Errors.NONE}
    assert written(ctx, n) == [OffsetCommit("foo", "bar", 0, 100, 10, "metadata", ctx.now)]
    assert ctx.now >= START_MS


def test_kafka_testConsumerGroupOffsetCommitWithOffsetMetadataTooLarge() -> None:
    ctx = CoreContext({"bar": 3}, group_consumer_assignors="range", offset_metadata_max_bytes=5)
    ctx.join("member", group_id="foo", subscribed_topic_names=("bar",))
    epoch = ctx.member("member", "foo").member_epoch
    n = len(ctx.records)
    r = commit(ctx, "member", epoch, [CommitPartition("bar", 0, 100, 10, "toolarge"),
                                      CommitPartition("bar", 1, 100, 10, "small")])
    assert codes(r) == {("bar", 0): Errors.OFFSET_METADATA_TOO_LARGE, ("bar", 1): Errors.NONE}
    assert written(ctx, n) == [OffsetCommit("foo", "bar", 1, 100, 10, "small", ctx.now)]


# --- KIP-1251: commits at an older epoch ----------------------------------------------------------------
def test_kafka_kip1251_commit_at_an_older_epoch_for_partitions_held_since_then_is_accepted() -> None:
    ctx = CoreContext({"bar": 4}, group_consumer_assignors="range")
    ctx.join("a", group_id="foo", subscribed_topic_names=("bar",))
    ctx.stabilise("foo")
    old = ctx.member("a", "foo").member_epoch
    ctx.join("b", group_id="foo", subscribed_topic_names=("bar",))
    ctx.stabilise("foo")
    assert ctx.member("a", "foo").member_epoch > old
    n = len(ctx.records)
    # a kept bar-0/1 since `old`; bar-2 went to b. One request, per-partition answers.
    r = commit(ctx, "a", old, [CommitPartition("bar", 0, 1), CommitPartition("bar", 1, 1),
                               CommitPartition("bar", 2, 1)])
    assert r.error_code is Errors.NONE
    assert codes(r) == {("bar", 0): Errors.NONE, ("bar", 1): Errors.NONE, ("bar", 2): Errors.STALE_MEMBER_EPOCH}
    assert [(c.topic, c.partition) for c in written(ctx, n)] == [("bar", 0), ("bar", 1)]


def test_kafka_kip1251_commit_at_an_older_epoch_for_a_partition_assigned_later_is_stale() -> None:
    ctx = CoreContext({"bar": 4}, group_consumer_assignors="range")
    ctx.join("a", group_id="foo", subscribed_topic_names=("bar",))
    ctx.join("b", group_id="foo", subscribed_topic_names=("bar",))
    ctx.stabilise("foo")
    first = ctx.member("a", "foo").member_epoch
    ctx.heartbeat("foo", "b", -1)  # a takes over bar-2/3 at a newer epoch
    ctx.stabilise("foo")
    assert ctx.member("a", "foo").assigned_sets()[ctx.tid("bar")] == frozenset(range(4))
    r = commit(ctx, "a", first, [CommitPartition("bar", 0, 1), CommitPartition("bar", 3, 1)])
    assert codes(r) == {("bar", 0): Errors.NONE, ("bar", 3): Errors.STALE_MEMBER_EPOCH}


def test_kafka_kip1251_commit_at_an_older_epoch_for_a_partition_pending_revocation_is_accepted() -> None:
    ctx = CoreContext({"bar": 4, "other": 1}, group_consumer_assignors="range")
    ctx.join("a", group_id="foo", subscribed_topic_names=("bar",))
    ctx.stabilise("foo")
    first = ctx.member("a", "foo").member_epoch
    ctx.join("x", group_id="foo", subscribed_topic_names=("other",))  # a moves on, keeping bar-0..3
    ctx.stabilise("foo")
    second = ctx.member("a", "foo").member_epoch
    assert second > first
    ctx.join("b", group_id="foo", subscribed_topic_names=("bar",))
    # a must give up bar-2/3 and has not yet: they are pending revocation, a still holds them.
    ctx.heartbeat("foo", "a", second, topic_partitions=ctx.tps(bar=range(4)))
    assert ctx.member("a", "foo").partitions_pending_revocation == ctx.tps(bar=(2, 3))
    assert ctx.member("a", "foo").member_epoch == second
    # A commit from the first epoch (a has held bar-0 and bar-3 since then) is accepted for both.
    r = commit(ctx, "a", first, [CommitPartition("bar", 0, 5), CommitPartition("bar", 3, 5)])
    assert codes(r) == {("bar", 0): Errors.NONE, ("bar", 3): Errors.NONE}
    # Once revoked, the partition is no longer a's: a commit for it at an old epoch is stale.
    ctx.heartbeat("foo", "a", second, topic_partitions=ctx.tps(bar=(0, 1)))
    assert not ctx.member("a", "foo").partitions_pending_revocation
    r = commit(ctx, "a", first, [CommitPartition("bar", 0, 6), CommitPartition("bar", 3, 6)])
    assert codes(r) == {("bar", 0): Errors.NONE, ("bar", 3): Errors.STALE_MEMBER_EPOCH}


# --- classic ("generic") groups ------------------------------------------------------------------------
def classic_commit(ctx: ClassicContext, member_id: str, generation: int, instance_id: str | None = None) -> Errors:
    r = commit(ctx, member_id, generation, [CommitPartition("foo", 0, 100)], group_id="grp",
               instance_id=instance_id)
    (code,) = set(codes(r).values())
    return code


def test_kafka_testGenericGroupOffsetCommitWithUnknownMemberId() -> None:
    ctx = ClassicContext()
    ctx.stable_group(1)
    assert classic_commit(ctx, "member", 1) is Errors.UNKNOWN_MEMBER_ID


def test_kafka_testGenericGroupOffsetCommitWithIllegalGeneration() -> None:
    ctx = ClassicContext()
    (a,) = ctx.stable_group(1)
    assert classic_commit(ctx, a, 10) is Errors.ILLEGAL_GENERATION


def test_kafka_testGenericGroupOffsetCommitWithUnknownInstanceId() -> None:
    ctx = ClassicContext()
    (a,) = ctx.stable_group(1)
    assert classic_commit(ctx, a, 1, instance_id="instanceid") is Errors.UNKNOWN_MEMBER_ID


def test_kafka_testGenericGroupOffsetCommitWithFencedInstanceId() -> None:
    ctx = ClassicContext()
    ctx.join("", instance_id="new-instance-id")
    ctx.advance(200)
    member_id = ctx.group().static_members["new-instance-id"]
    assert classic_commit(ctx, member_id, 1, instance_id="old-instance-id") is Errors.UNKNOWN_MEMBER_ID
    assert classic_commit(ctx, "other", 1, instance_id="new-instance-id") is Errors.FENCED_INSTANCE_ID


def test_kafka_testGenericGroupOffsetCommitWhileInCompletingRebalanceState() -> None:
    ctx = ClassicContext()
    a, b = ctx.stable_group(2)
    ctx.rejoin_all([a, b], protocols=(("range", b"v2"),))
    assert classic_commit(ctx, a, 2) is Errors.REBALANCE_IN_PROGRESS


def test_kafka_testGenericGroupOffsetCommitWithoutMemberIdAndGeneration() -> None:
    ctx = ClassicContext()
    ctx.stable_group(1)
    assert classic_commit(ctx, "", -1) is Errors.UNKNOWN_MEMBER_ID


def test_kafka_testSimpleGroupOffsetCommit() -> None:
    ctx = CoreContext({"bar": 3})
    r = commit(ctx, "", -1, group_id="simple")
    assert codes(r) == {("bar", 0): Errors.NONE}
    assert ctx.shard.offsets.committed("simple")[("bar", 0)].committed_offset == 100


# --- fetch ---------------------------------------------------------------------------------------------
def fetch(ctx: CoreContext, member_id: str = "", epoch: int = -1, group_id: str = "foo",
          topics: dict[str, list[int] | None] | None = None):  # type: ignore[no-untyped-def]
    return ctx.apply(ctx.shard.offset_fetch(OffsetFetchRequest(group_id, member_id, epoch, topics), ctx.now))


def test_kafka_testFetchOffsetsWithUnknownGroup() -> None:
    ctx = CoreContext({"bar": 3})
    r = fetch(ctx, group_id="unknown", topics={"bar": [0, 1]})
    assert r.error_code is Errors.NONE
    assert [(o.partition, o.committed_offset) for o in r.offsets] == [(0, -1), (1, -1)]


def test_kafka_testFetchAllOffsetsWithUnknownGroup() -> None:
    ctx = CoreContext({"bar": 3})
    r = fetch(ctx, group_id="unknown")
    assert r.error_code is Errors.NONE and list(r.offsets) == []


def test_kafka_testConsumerGroupOffsetFetchWithMemberIdAndEpoch() -> None:
    ctx = group_with_member()
    epoch = ctx.member("member", "foo").member_epoch
    commit(ctx, "member", epoch)
    r = fetch(ctx, "member", epoch, topics={"bar": [0]})
    assert r.error_code is Errors.NONE and [(o.partition, o.committed_offset) for o in r.offsets] == [(0, 100)]


def test_kafka_testConsumerGroupOffsetFetchFromAdminClient() -> None:
    ctx = group_with_member()
    commit(ctx, "member", ctx.member("member", "foo").member_epoch)
    r = fetch(ctx, topics={"bar": [0]})
    assert r.error_code is Errors.NONE and [o.committed_offset for o in r.offsets] == [100]


def test_kafka_testConsumerGroupOffsetFetchWithUnknownMemberId() -> None:
    ctx = group_with_member()
    assert fetch(ctx, "member-id", 0, topics={"bar": [0]}).error_code is Errors.UNKNOWN_MEMBER_ID
    assert fetch(ctx, "member-id", 0).error_code is Errors.UNKNOWN_MEMBER_ID


def test_kafka_testConsumerGroupOffsetFetchWithStaleMemberEpoch() -> None:
    ctx = group_with_member()
    epoch = ctx.member("member", "foo").member_epoch
    assert fetch(ctx, "member", epoch + 10, topics={"bar": [0]}).error_code is Errors.STALE_MEMBER_EPOCH
    assert fetch(ctx, "member", epoch + 10).error_code is Errors.STALE_MEMBER_EPOCH
