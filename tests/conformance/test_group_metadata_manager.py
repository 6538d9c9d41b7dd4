"""Kafka's GroupMetadataManagerTest, its consumer-group heartbeat cases, ported against the shard.

Translated in spirit: Kafka seeds groups with records and a mock assignor; here the group is driven by
heartbeats with the real `range` assignor on a virtual clock (tests/core/context.py), and the assertions are
Kafka's (error codes, epochs, who gets what, what bumps the group epoch).

The one planned difference (README, "Differences from Kafka"): KIP-1263 reserves epoch 1 for the empty
target assignment, so a new group starts at group epoch 2 where Kafka's starts at 1.
"""

from __future__ import annotations

from typing import Any

from groupcoord.coordinator.core.consumer.group import MemberState
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.modern.group import FIRST_GROUP_EPOCH
from groupcoord.coordinator.core.results import ScheduleTimer
from groupcoord.coordinator.core.shard import rebalance_timer, session_timer
from tests.core.context import CoreContext, check_group_invariants, shard_state


def ctx_range(topics: dict[str, int] | None = None, **config: Any) -> CoreContext:
    return CoreContext(topics if topics is not None else {"foo": 6, "bar": 3}, group_consumer_assignors="range",
                       **config)


def test_kafka_testMemberIdGeneration() -> None:
    ctx = ctx_range({})
    r = ctx.heartbeat(group_id="group-foo", member_id="", server_assignor="range")
    assert r.error_code is Errors.NONE
    assert r.member_id != ""
    assert r.member_epoch == FIRST_GROUP_EPOCH  # Kafka: 1 (epoch 1 is KIP-1263's empty assignment)
    assert r.heartbeat_interval_ms == 5000
    assert r.assignment == {}  # no topic metadata: nothing to assign, but an (empty) assignment is sent


def test_kafka_testUnknownGroupId() -> None:
    ctx = ctx_range()
    r = ctx.heartbeat(group_id="fooup", member_id="m", member_epoch=100, rebalance_timeout_ms=5000,
                      subscribed_topic_names=("foo", "bar"), topic_partitions={})
    assert r.error_code is Errors.GROUP_ID_NOT_FOUND


def test_kafka_testUnknownMemberIdJoinsConsumerGroup() -> None:
    ctx = ctx_range()
    assert ctx.join("m1").error_code is Errors.NONE
    r = ctx.heartbeat(member_id="someone-else", member_epoch=1, rebalance_timeout_ms=5000,
                      subscribed_topic_names=("foo", "bar"), topic_partitions={})
    assert r.error_code is Errors.UNKNOWN_MEMBER_ID


def test_kafka_testConsumerGroupMemberEpochValidation() -> None:
    ctx = ctx_range({"foo": 6})
    ctx.join("m", subscribed_topic_names=("foo",))
    ctx.stabilise()
    ctx.join("m2", subscribed_topic_names=("foo",))  # bump the epoch so m has a previous epoch
    ctx.stabilise()
    m = ctx.member("m")
    assert m.previous_member_epoch < m.member_epoch
    owned = m.assigned_sets()
    foo = ctx.tid("foo")
    # Greater than the expected epoch.
    assert ctx.heartbeat(member_id="m", member_epoch=m.member_epoch + 100).error_code is Errors.FENCED_MEMBER_EPOCH
    # Smaller than the expected (and not the previous) epoch.
    assert ctx.heartbeat(member_id="m", member_epoch=m.previous_member_epoch - 1,
                         topic_partitions=owned).error_code is Errors.FENCED_MEMBER_EPOCH
    # The previous epoch without owned partitions.
    assert ctx.heartbeat(member_id="m", member_epoch=m.previous_member_epoch).error_code is Errors.FENCED_MEMBER_EPOCH
    # The previous epoch with a subset of the assignment: the response with the bump may have been lost.
    subset = {foo: frozenset(sorted(owned[foo])[:1])}
    r = ctx.heartbeat(member_id="m", member_epoch=m.previous_member_epoch, topic_partitions=subset)
    assert r.error_code is Errors.NONE and r.member_epoch == m.member_epoch


def test_kafka_testMemberJoinsEmptyConsumerGroup() -> None:
    ctx = ctx_range()
    r = ctx.join("m", server_assignor="range")
    assert r.error_code is Errors.NONE
    assert r.member_epoch == FIRST_GROUP_EPOCH  # Kafka: 1
    assert r.assignment == ctx.tps(foo=range(6), bar=range(3))
    group = ctx.group()
    assert group.group_epoch == FIRST_GROUP_EPOCH and group.target_assignment_epoch == FIRST_GROUP_EPOCH
    assert ctx.member("m").state is MemberState.STABLE


def test_kafka_testUpdatingSubscriptionTriggersNewTargetAssignment() -> None:
    ctx = ctx_range()
    ctx.join("m", subscribed_topic_names=("foo",))
    ctx.stabilise()
    epoch = ctx.group().group_epoch
    r = ctx.heartbeat(member_id="m", member_epoch=epoch, subscribed_topic_names=("foo", "bar"))
    assert r.error_code is Errors.NONE
    assert ctx.group().group_epoch == epoch + 1
    assert r.member_epoch == epoch + 1
    assert r.assignment == ctx.tps(foo=range(6), bar=range(3))


def test_kafka_testNewJoiningMemberTriggersNewTargetAssignment() -> None:
    ctx = ctx_range()
    ctx.join("m1")
    ctx.join("m2")
    ctx.stabilise()
    epoch = ctx.group().group_epoch
    r = ctx.join("m3")
    group = ctx.group()
    assert group.group_epoch == epoch + 1 and group.target_assignment_epoch == epoch + 1
    # range over 3 members: foo 0-1 / 2-3 / 4-5, bar 0 / 1 / 2.
    assert group.target_assignment["m3"] == ctx.tps(foo=(4, 5), bar=(2,))
    # Its partitions are still held by m2, so it joins at the new epoch with nothing yet.
    assert r.member_epoch == epoch + 1 and r.assignment == {}
    assert ctx.member("m3").state is MemberState.UNRELEASED_PARTITIONS
    check_group_invariants(group)


def test_kafka_testLeavingMemberBumpsGroupEpoch() -> None:
    ctx = ctx_range()
    ctx.join("m1")
    ctx.join("m2")
    ctx.stabilise()
    epoch = ctx.group().group_epoch
    r = ctx.heartbeat(member_id="m2", member_epoch=-1)
    assert r.error_code is Errors.NONE and r.member_id == "m2" and r.member_epoch == -1
    assert r.assignment is None
    group = ctx.group()
    assert "m2" not in group.members and "m2" not in group.target_assignment
    assert group.group_epoch == epoch + 1
    # The next heartbeat computes the new target (as in Kafka, a leave only bumps the epoch).
    ctx.heartbeat(member_id="m1", member_epoch=epoch)
    assert group.target_assignment["m1"] == ctx.tps(foo=range(6), bar=range(3))


def test_kafka_testGroupEpochBumpWhenNewStaticMemberJoins() -> None:
    ctx = ctx_range()
    ctx.join("m1", instance_id="i1")
    ctx.join("m2", instance_id="i2")
    ctx.stabilise()
    epoch = ctx.group().group_epoch
    r = ctx.join("m3", instance_id="i3")
    assert r.error_code is Errors.NONE and r.member_epoch == epoch + 1
    assert ctx.group().group_epoch == epoch + 1
    assert ctx.group().static_members["i3"] == "m3"


def stable_static_pair() -> CoreContext:
    ctx = ctx_range()
    ctx.join("m1", instance_id="i1")
    ctx.join("m2", instance_id="i2")
    ctx.stabilise()
    return ctx


def test_kafka_testStaticMemberGetsBackAssignmentUponRejoin() -> None:
    ctx = stable_static_pair()
    epoch = ctx.group().group_epoch
    held = ctx.member("m2").assigned_sets()
    r = ctx.heartbeat(member_id="m2", member_epoch=-2, instance_id="i2", topic_partitions={})
    assert r.error_code is Errors.NONE and r.member_id == "m2" and r.member_epoch == -2
    assert ctx.member("m2").member_epoch == -2
    r = ctx.join("m2-rejoin", instance_id="i2")
    assert r.error_code is Errors.NONE
    assert r.member_id == "m2-rejoin" and r.member_epoch == epoch
    assert r.assignment == held
    group = ctx.group()
    assert group.group_epoch == epoch and "m2" not in group.members
    assert group.static_members["i2"] == "m2-rejoin"
    assert group.target_assignment["m2-rejoin"] == held
    rejoined = ctx.member("m2-rejoin")
    assert (rejoined.state, rejoined.member_epoch, rejoined.previous_member_epoch) == (MemberState.STABLE, epoch, 0)
    check_group_invariants(group)


def test_kafka_testStaticMemberRejoinsWithNewSubscribedTopics() -> None:
    ctx = stable_static_pair()
    epoch = ctx.group().group_epoch
    ctx.heartbeat(member_id="m2", member_epoch=-2, instance_id="i2")
    r = ctx.join("m2-rejoin", instance_id="i2", subscribed_topic_names=("foo",))
    assert r.error_code is Errors.NONE
    group = ctx.group()
    assert group.group_epoch == epoch + 1  # a new subscription is a new assignment input
    assert group.target_assignment["m2-rejoin"] == ctx.tps(foo=(3, 4, 5))
    assert group.target_assignment["m1"] == ctx.tps(foo=(0, 1, 2), bar=(0, 1, 2))


def test_kafka_testNoGroupEpochBumpWhenStaticMemberTemporarilyLeaves() -> None:
    ctx = stable_static_pair()
    epoch = ctx.group().group_epoch
    before = ctx.member("m2")
    r = ctx.heartbeat(member_id="m2", member_epoch=-2, instance_id="i2")
    assert r.error_code is Errors.NONE and r.member_epoch == -2
    assert ctx.group().group_epoch == epoch
    after = ctx.member("m2")
    assert after.member_epoch == -2 and after.assigned_partitions == before.assigned_partitions


def test_kafka_testLeavingStaticMemberBumpsGroupEpoch() -> None:
    ctx = stable_static_pair()
    epoch = ctx.group().group_epoch
    r = ctx.heartbeat(member_id="m2", member_epoch=-1, instance_id="i2")
    assert r.error_code is Errors.NONE and r.member_epoch == -1
    group = ctx.group()
    assert group.group_epoch == epoch + 1
    assert "m2" not in group.members and "i2" not in group.static_members


def test_kafka_testShouldThrownUnreleasedInstanceIdExceptionWhenNewMemberJoinsWithInUseInstanceId() -> None:
    ctx = stable_static_pair()
    before = shard_state(ctx.shard)
    r = ctx.join("m3", instance_id="i1", server_assignor="range")
    assert r.error_code is Errors.UNRELEASED_INSTANCE_ID
    assert shard_state(ctx.shard) == before


def test_kafka_static_rejoin_with_epoch_0_under_the_holders_own_member_id_is_unreleased_instance_id() -> None:
    """Kafka checks the instance's holder before anything else: epoch 0 while the holder is active (not at
    -2) is UNRELEASED_INSTANCE_ID, even when the request carries the holder's own member id."""
    ctx = stable_static_pair()
    before = shard_state(ctx.shard)
    r = ctx.join("m1", instance_id="i1")
    assert r.error_code is Errors.UNRELEASED_INSTANCE_ID
    assert shard_state(ctx.shard) == before
    # After a temporary leave (-2) the same member id may rejoin, and keeps its assignment.
    held = ctx.member("m1").assigned_sets()
    ctx.heartbeat(member_id="m1", member_epoch=-2, instance_id="i1")
    r = ctx.join("m1", instance_id="i1")
    assert r.error_code is Errors.NONE and r.assignment == held
    assert ctx.member("m1").previous_member_epoch == 0


def test_kafka_testShouldThrowUnknownMemberIdExceptionWhenUnknownStaticMemberJoins() -> None:
    ctx = stable_static_pair()
    r = ctx.heartbeat(member_id="m3", member_epoch=1, instance_id="unknown-instance", rebalance_timeout_ms=5000,
                      subscribed_topic_names=("foo",), topic_partitions={})
    assert r.error_code is Errors.UNKNOWN_MEMBER_ID


def test_kafka_testShouldThrowFencedInstanceIdExceptionWhenStaticMemberWithDifferentMemberIdLeaves() -> None:
    ctx = stable_static_pair()
    r = ctx.heartbeat(member_id="m2", member_epoch=-2, instance_id="i1")
    assert r.error_code is Errors.FENCED_INSTANCE_ID
    r = ctx.heartbeat(member_id="m2", member_epoch=-1, instance_id="i1")
    assert r.error_code is Errors.FENCED_INSTANCE_ID


def test_kafka_testConsumerGroupHeartbeatFullResponse() -> None:
    ctx = ctx_range({"foo": 2})
    ctx.join("m", subscribed_topic_names=("foo",))
    epoch = ctx.member("m").member_epoch
    foo = ctx.tps(foo=(0, 1))
    # A heartbeat that sends nothing new gets no assignment back...
    r = ctx.heartbeat(member_id="m", member_epoch=epoch, topic_partitions=foo)
    assert r.error_code is Errors.NONE and r.assignment is None
    # ...a full request (as after a lost response) gets the full assignment.
    r = ctx.heartbeat(member_id="m", member_epoch=epoch, rebalance_timeout_ms=5000, subscribed_topic_names=("foo",),
                      topic_partitions=foo)
    assert r.error_code is Errors.NONE and r.assignment == foo and r.member_epoch == epoch


def test_kafka_testReconciliationProcess() -> None:
    ctx = ctx_range()
    ctx.join("m1")
    ctx.join("m2")
    ctx.stabilise()
    epoch = ctx.group().group_epoch
    ctx.join("m3")
    new = epoch + 1
    # m1 must revoke foo-2 and bar-1 before anything moves: it stays at its epoch, unrevoked.
    r1 = ctx.heartbeat(member_id="m1", member_epoch=epoch, topic_partitions=ctx.tps(foo=(0, 1, 2), bar=(0, 1)))
    assert r1.member_epoch == epoch and r1.assignment == ctx.tps(foo=(0, 1), bar=(0,))
    assert ctx.member("m1").state is MemberState.UNREVOKED_PARTITIONS
    # m2 likewise must give up foo-4/5 and bar-2 (and will receive foo-2, bar-1 once m1 released them).
    r2 = ctx.heartbeat(member_id="m2", member_epoch=epoch, topic_partitions=ctx.tps(foo=(3, 4, 5), bar=(2,)))
    assert r2.member_epoch == epoch and r2.assignment == ctx.tps(foo=(3,))
    assert ctx.member("m2").state is MemberState.UNREVOKED_PARTITIONS
    # m3 waits for partitions held by m2.
    r3 = ctx.heartbeat(member_id="m3", member_epoch=new, topic_partitions={})
    assert r3.member_epoch == new and r3.assignment is None
    assert ctx.member("m3").state is MemberState.UNRELEASED_PARTITIONS
    # m1 acknowledges: it moves to the new epoch, stable.
    r1 = ctx.heartbeat(member_id="m1", member_epoch=epoch, topic_partitions=ctx.tps(foo=(0, 1), bar=(0,)))
    assert r1.member_epoch == new and ctx.member("m1").state is MemberState.STABLE
    # m2 acknowledges: it moves to the new epoch and now receives what m1 released.
    r2 = ctx.heartbeat(member_id="m2", member_epoch=epoch, topic_partitions=ctx.tps(foo=(3,)))
    assert r2.member_epoch == new and r2.assignment == ctx.tps(foo=(2, 3), bar=(1,))
    assert ctx.member("m2").state is MemberState.STABLE
    # m3 finally receives what m2 released.
    r3 = ctx.heartbeat(member_id="m3", member_epoch=new, topic_partitions={})
    assert r3.member_epoch == new and r3.assignment == ctx.tps(foo=(4, 5), bar=(2,))
    assert ctx.group().state().value == "STABLE"
    check_group_invariants(ctx.group())


def test_kafka_testSessionTimeoutLifecycle() -> None:
    ctx = ctx_range(group_consumer_session_timeout_ms=45000)
    r = ctx.join("m")
    deadline = ctx.shard.timer_deadlines[session_timer("grp", "m")]
    assert deadline == ctx.now + 45000
    epoch = ctx.group().group_epoch
    # A heartbeat re-arms the session timer.
    ctx.advance(30000)
    ctx.heartbeat(member_id="m", member_epoch=r.member_epoch)
    assert ctx.shard.timer_deadlines[session_timer("grp", "m")] == ctx.now + 45000
    # Expiry fences the member: removed, and the group epoch bumps.
    ctx.advance(45000)
    assert "m" not in ctx.group().members
    assert ctx.group().group_epoch == epoch + 1


def test_kafka_testRebalanceTimeoutLifecycle() -> None:
    ctx = ctx_range({"foo": 3})
    ctx.join("m1", subscribed_topic_names=("foo",), rebalance_timeout_ms=12000)
    ctx.stabilise()
    epoch = ctx.group().group_epoch
    ctx.join("m2", subscribed_topic_names=("foo",), rebalance_timeout_ms=90000)
    # m1 is asked to revoke: the rebalance timer is armed with its rebalance timeout.
    r = ctx.heartbeat(member_id="m1", member_epoch=epoch, topic_partitions=ctx.tps(foo=(0, 1, 2)))
    assert r.assignment == ctx.tps(foo=(0, 1))
    assert ctx.member("m1").state is MemberState.UNREVOKED_PARTITIONS
    assert ctx.shard.timer_deadlines[rebalance_timer("grp", "m1")] == ctx.now + 12000
    # It keeps heartbeating but never revokes: it is fenced when the rebalance timeout expires.
    for _ in range(3):
        ctx.advance(4000)
        ctx.heartbeat(member_id="m1", member_epoch=epoch, topic_partitions=ctx.tps(foo=(0, 1, 2)))
    ctx.advance(1)
    assert "m1" not in ctx.group().members
    assert ctx.group().group_epoch == epoch + 2


def test_kafka_testRebalanceTimeoutLifecycle_timer_cancelled_when_revocation_completes() -> None:
    ctx = ctx_range({"foo": 3})
    ctx.join("m1", subscribed_topic_names=("foo",), rebalance_timeout_ms=12000)
    ctx.stabilise()
    epoch = ctx.group().group_epoch
    ctx.join("m2", subscribed_topic_names=("foo",))
    ctx.heartbeat(member_id="m1", member_epoch=epoch, topic_partitions=ctx.tps(foo=(0, 1, 2)))
    assert rebalance_timer("grp", "m1") in ctx.shard.timer_deadlines
    ctx.heartbeat(member_id="m1", member_epoch=epoch, topic_partitions=ctx.tps(foo=(0, 1)))
    assert rebalance_timer("grp", "m1") not in ctx.shard.timer_deadlines
    ctx.advance(20000)
    assert "m1" in ctx.group().members


def test_kafka_testSubscriptionMetadataRefreshedAfterGroupIsLoaded() -> None:
    ctx = ctx_range({"foo": 3})
    ctx.join("m", subscribed_topic_names=("foo",))
    ctx.stabilise()
    epoch = ctx.group().group_epoch
    # The group is loaded (replayed) by a coordinator whose metadata says foo now has 6 partitions.
    loaded = CoreContext({"foo": 6}, group_consumer_assignors="range")
    for record in ctx.records:
        loaded.shard.replay(record)
    loaded.now = ctx.now
    r = loaded.heartbeat(member_id="m", member_epoch=epoch)
    assert r.error_code is Errors.NONE
    assert loaded.group().group_epoch == epoch + 1
    assert r.member_epoch == epoch + 1 and r.assignment == loaded.tps(foo=range(6))


def test_kafka_testPartitionAssignorExceptionOnRegularHeartbeat() -> None:
    """Kafka runs the assignor inside the heartbeat and answers UNKNOWN_SERVER_ERROR when it throws. Here
    the run is a background task (KIP-1263 offload): a failed run leaves the previous target in place, the
    heartbeat that triggered it has already been answered, and the next heartbeat tries again."""
    ctx = CoreContext({"foo": 6}, group_consumer_assignors="range", auto_complete_runs=False,
                      group_consumer_assignor_offload_enable=True)
    r = ctx.join("m", subscribed_topic_names=("foo",))
    assert r.error_code is Errors.NONE
    run = ctx.pending_runs[0]
    ctx.complete_run(run.run_id, fail=True)
    assert ctx.group().target_assignment_epoch == 0
    r = ctx.heartbeat(member_id="m", member_epoch=r.member_epoch, topic_partitions={})
    assert r.error_code is Errors.NONE
    assert ctx.pending_runs, "the next heartbeat retries the assignor"
    ctx.complete_runs()
    r = ctx.heartbeat(member_id="m", member_epoch=r.member_epoch, topic_partitions={})
    assert r.assignment == ctx.tps(foo=range(6))


def test_kafka_session_timer_is_armed_by_every_heartbeat_result() -> None:
    ctx = ctx_range()
    result = ctx.shard.consumer_group_heartbeat(ctx.request(member_id="m"), ctx.now)
    assert any(isinstance(t, ScheduleTimer) and t.key == session_timer("grp", "m") for t in result.timers)


def test_kafka_testShouldThrowFencedInstanceIdExceptionWhenStaticMemberWithDifferentMemberIdJoins() -> None:
    ctx = stable_static_pair()
    epoch = ctx.member("m1").member_epoch
    r = ctx.heartbeat(member_id="unknown-m1", member_epoch=epoch + 1, instance_id="i1", rebalance_timeout_ms=5000,
                      subscribed_topic_names=("foo", "bar"), topic_partitions={})
    # Kafka checks the instance before the member: the instance is held by another member id.
    assert r.error_code is Errors.FENCED_INSTANCE_ID


def test_kafka_testConsumerGroupMemberEpochValidationForStaticMember() -> None:
    ctx = ctx_range({"foo": 6})
    ctx.join("m", instance_id="m", subscribed_topic_names=("foo",))
    ctx.stabilise()
    ctx.join("m2", subscribed_topic_names=("foo",))
    ctx.stabilise()
    m = ctx.member("m")
    assert ctx.heartbeat(member_id="m", instance_id="m",
                         member_epoch=m.member_epoch + 100).error_code is Errors.FENCED_MEMBER_EPOCH
    assert ctx.heartbeat(member_id="m", instance_id="m", member_epoch=m.previous_member_epoch - 1,
                         topic_partitions=m.assigned_sets()).error_code is Errors.FENCED_MEMBER_EPOCH
    assert ctx.heartbeat(member_id="m", instance_id="m",
                         member_epoch=m.previous_member_epoch).error_code is Errors.FENCED_MEMBER_EPOCH
    r = ctx.heartbeat(member_id="m", instance_id="m", member_epoch=m.previous_member_epoch,
                      topic_partitions=m.assigned_sets())
    assert r.error_code is Errors.NONE and r.member_epoch == m.member_epoch


def test_kafka_testShouldThrowUnknownMemberIdExceptionWhenUnknownStaticMemberLeaves() -> None:
    ctx = stable_static_pair()
    r = ctx.heartbeat(member_id="m1", member_epoch=-2, instance_id="unknown-instance")
    assert r.error_code is Errors.UNKNOWN_MEMBER_ID


def test_kafka_testNewMemberIsRejectedWithMaximumMembersIsReached() -> None:
    ctx = ctx_range(group_consumer_max_size=2)
    ctx.join("m1")
    ctx.join("m2")
    ctx.stabilise()
    before = shard_state(ctx.shard)
    r = ctx.join("m3")
    assert r.error_code is Errors.GROUP_MAX_SIZE_REACHED
    assert shard_state(ctx.shard) == before


def test_kafka_testConsumerGroupStates() -> None:
    ctx = CoreContext({"foo": 6}, group_consumer_assignors="range", auto_complete_runs=False,
                      group_consumer_assignor_offload_enable=True)
    ctx.join("m", subscribed_topic_names=("foo",))
    assert ctx.group().state().value == "ASSIGNING"  # the group epoch is ahead of the target's
    ctx.complete_runs()
    assert ctx.group().state().value == "RECONCILING"  # the member is not at the target epoch yet
    epoch = ctx.group().group_epoch
    ctx.heartbeat(member_id="m", member_epoch=ctx.member("m").member_epoch, topic_partitions={})
    assert ctx.member("m").member_epoch == epoch
    assert ctx.group().state().value == "STABLE"
    ctx.heartbeat(member_id="m", member_epoch=-1)
    assert ctx.group().state().value == "EMPTY"


def test_kafka_testSessionTimeoutExpiration() -> None:
    ctx = ctx_range()
    ctx.join("m", rebalance_timeout_ms=90000)
    epoch = ctx.group().group_epoch
    ctx.advance(45000 + 1)
    group = ctx.group()
    assert "m" not in group.members and "m" not in group.target_assignment
    assert group.group_epoch == epoch + 1
    assert session_timer("grp", "m") not in ctx.shard.timer_deadlines
    assert rebalance_timer("grp", "m") not in ctx.shard.timer_deadlines


def test_kafka_testSessionTimeoutExpirationStaticMember() -> None:
    ctx = ctx_range()
    r = ctx.join("m", instance_id="m", rebalance_timeout_ms=90000)
    assert ctx.shard.timer_deadlines[session_timer("grp", "m")] == ctx.now + 45000
    r = ctx.heartbeat(member_id="m", instance_id="m", member_epoch=-2)
    assert r.member_epoch == -2
    # The session timer still runs: nobody rejoins under the instance id, so the member is removed.
    assert ctx.shard.timer_deadlines[session_timer("grp", "m")] == ctx.now + 45000
    epoch = ctx.group().group_epoch
    ctx.advance(45000 + 1)
    group = ctx.group()
    assert "m" not in group.members and "m" not in group.static_members
    assert group.group_epoch == epoch + 1
    assert session_timer("grp", "m") not in ctx.shard.timer_deadlines


def test_kafka_testRebalanceTimeoutExpiration() -> None:
    ctx = ctx_range({"foo": 3})
    ctx.join("m1", subscribed_topic_names=("foo",), rebalance_timeout_ms=10000)
    ctx.stabilise()
    epoch = ctx.group().group_epoch
    ctx.join("m2", subscribed_topic_names=("foo",), rebalance_timeout_ms=90000)
    ctx.heartbeat(member_id="m1", member_epoch=epoch, topic_partitions=ctx.tps(foo=(0, 1, 2)))
    assert ctx.member("m1").state is MemberState.UNREVOKED_PARTITIONS
    ctx.advance(10000 + 1)
    group = ctx.group()
    assert "m1" not in group.members
    assert group.group_epoch == epoch + 2
    # The remaining member gets everything once the new target is computed.
    r = ctx.heartbeat(member_id="m2", member_epoch=ctx.member("m2").member_epoch, topic_partitions={})
    ctx.stabilise()
    assert ctx.member("m2").assigned_sets() == ctx.tps(foo=(0, 1, 2))
    assert r.error_code is Errors.NONE


def test_kafka_heartbeat_with_an_instance_id_nobody_holds_is_unknown_member_id() -> None:
    """Kafka's throwIfStaticMemberIsUnknown: a regular heartbeat naming an instance id that no member holds is
    UNKNOWN_MEMBER_ID, even from a known (dynamic) member."""
    ctx = ctx_range()
    ctx.join("m")
    r = ctx.heartbeat(member_id="m", member_epoch=ctx.member("m").member_epoch, instance_id="never-joined")
    assert r.error_code is Errors.UNKNOWN_MEMBER_ID
