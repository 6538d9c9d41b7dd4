"""KIP-848 heartbeat basics: joining (epoch 0), leaving (epoch -1), the three epochs, group states."""

from __future__ import annotations

from groupcoord.coordinator.core.consumer.group import ConsumerGroupState, MemberState
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.records import (
    ConsumerGroupCurrentMemberAssignmentTombstone,
    ConsumerGroupMemberMetadata,
    ConsumerGroupMemberMetadataTombstone,
    ConsumerGroupMetadata,
    ConsumerGroupTargetAssignmentMemberTombstone,
)
from tests.core.context import CoreContext, check_group_invariants, tid

FOO = tid("foo")
BAR = tid("bar")


def test_first_member_creates_group_at_epoch_2_and_gets_all_partitions() -> None:
    ctx = CoreContext()
    r = ctx.join("a")
    assert r.error_code is Errors.NONE
    assert r.member_id == "a"
    assert r.member_epoch == 2
    assert r.assignment == ctx.tps(foo=range(6), bar=range(3))
    group = ctx.group()
    assert group.group_epoch == 2 and group.target_assignment_epoch == 2
    assert group.state() is ConsumerGroupState.STABLE


def test_join_without_member_id_gets_one_from_the_coordinator() -> None:
    ctx = CoreContext()
    first, second = ctx.join(""), ctx.join("")
    assert first.member_id and second.member_id and first.member_id != second.member_id
    assert set(ctx.group().members) == {first.member_id, second.member_id}


def test_join_bumps_group_epoch_and_writes_member_metadata() -> None:
    ctx = CoreContext()
    ctx.join("a")
    before = len(ctx.records)
    r = ctx.join("b")
    new = ctx.records[before:]
    assert ctx.group().group_epoch == 3 and r.member_epoch == 3
    assert any(isinstance(x, ConsumerGroupMemberMetadata) and x.member_id == "b" for x in new)
    assert ConsumerGroupMetadata("grp", 3, ctx.group().metadata_hash) in new


def test_leave_with_epoch_minus_1_removes_member_bumps_epoch_and_frees_its_partitions() -> None:
    ctx = CoreContext()
    ctx.join("a")
    ctx.join("b")
    ctx.stabilise()
    epoch = ctx.group().group_epoch
    before = len(ctx.records)
    r = ctx.heartbeat(member_id="b", member_epoch=-1)
    assert r.error_code is Errors.NONE and r.member_id == "b" and r.member_epoch == -1
    group = ctx.group()
    assert "b" not in group.members
    assert group.group_epoch == epoch + 1
    assert all(owner == "a" for owner in group.partition_owner.values())
    new = ctx.records[before:]
    assert ConsumerGroupCurrentMemberAssignmentTombstone("grp", "b") in new
    assert ConsumerGroupMemberMetadataTombstone("grp", "b") in new
    assert ConsumerGroupTargetAssignmentMemberTombstone("grp", "b") in new
    # The remaining member picks up the freed partitions.
    r = ctx.ack("a")
    assert r.assignment == ctx.tps(foo=range(6), bar=range(3))


def test_last_member_leaving_leaves_an_empty_group() -> None:
    ctx = CoreContext()
    ctx.join("a")
    ctx.heartbeat(member_id="a", member_epoch=-1)
    group = ctx.group()
    assert group.state() is ConsumerGroupState.EMPTY
    assert group.partition_owner == {}
    assert group.group_epoch == 3


def test_leave_of_unknown_member_is_unknown_member_id() -> None:
    ctx = CoreContext()
    ctx.join("a")
    r = ctx.heartbeat(member_id="ghost", member_epoch=-1)
    assert r.error_code is Errors.UNKNOWN_MEMBER_ID


def test_heartbeat_of_unknown_member_is_unknown_member_id() -> None:
    ctx = CoreContext()
    ctx.join("a")
    r = ctx.heartbeat(member_id="ghost", member_epoch=2)
    assert r.error_code is Errors.UNKNOWN_MEMBER_ID


def test_heartbeat_to_missing_group_with_nonzero_epoch_is_group_id_not_found() -> None:
    ctx = CoreContext()
    assert ctx.heartbeat(group_id="nope", member_id="a", member_epoch=3).error_code is Errors.GROUP_ID_NOT_FOUND
    assert ctx.heartbeat(group_id="nope", member_id="a", member_epoch=-1).error_code is Errors.GROUP_ID_NOT_FOUND
    assert "nope" not in ctx.shard.groups


def test_subscription_change_bumps_group_epoch() -> None:
    ctx = CoreContext()
    ctx.join("a")
    ctx.heartbeat(member_id="a", member_epoch=2, subscribed_topic_names=("foo",))
    assert ctx.group().group_epoch == 3
    assert ctx.member("a").subscribed_topic_names == ("foo",)


def test_unchanged_subscription_does_not_bump_group_epoch() -> None:
    ctx = CoreContext()
    ctx.join("a", subscribed_topic_names=("foo", "bar"))
    ctx.heartbeat(member_id="a", member_epoch=2, subscribed_topic_names=("bar", "foo", "bar"),
                  rebalance_timeout_ms=5000, topic_partitions=ctx.member("a").assigned_sets())
    assert ctx.group().group_epoch == 2


def test_server_assignor_or_rack_change_bumps_group_epoch() -> None:
    ctx = CoreContext()
    ctx.join("a")
    ctx.heartbeat(member_id="a", member_epoch=2, server_assignor="range")
    assert ctx.group().group_epoch == 3
    ctx.heartbeat(member_id="a", member_epoch=3, rack_id="rack-1")
    assert ctx.group().group_epoch == 4


def test_steady_heartbeat_writes_no_records_and_sends_no_assignment() -> None:
    ctx = CoreContext()
    ctx.join("a")
    before = len(ctx.records)
    r = ctx.heartbeat(member_id="a", member_epoch=2)
    assert r.error_code is Errors.NONE and r.member_epoch == 2 and r.assignment is None
    assert ctx.records[before:] == []


def test_heartbeat_interval_comes_from_broker_config_or_group_override() -> None:
    ctx = CoreContext()
    assert ctx.join("a").heartbeat_interval_ms == 5000
    ctx.apply(ctx.shard.alter_group_configs("grp", {"consumer.heartbeat.interval.ms": "7000"}, False, ctx.now))
    assert ctx.heartbeat(member_id="a", member_epoch=2).heartbeat_interval_ms == 7000


def test_member_epoch_never_exceeds_target_epoch_which_never_exceeds_group_epoch() -> None:
    ctx = CoreContext(auto_complete_runs=False, group_consumer_assignor_offload_enable=True)
    r = ctx.join("a")
    group = ctx.group()
    assert (r.member_epoch, group.effective_target_epoch, group.group_epoch) == (1, 1, 2)
    ctx.complete_runs()
    ctx.join("b")
    assert ctx.member("b").member_epoch == 2 <= group.target_assignment_epoch == 2 < group.group_epoch == 3
    check_group_invariants(group)
    ctx.complete_runs()
    ctx.stabilise()
    assert {m.member_epoch for m in group.members.values()} == {3} == {group.target_assignment_epoch}


def test_known_member_rejoining_with_epoch_0_starts_over_without_a_rebalance() -> None:
    ctx = CoreContext()
    ctx.join("a")
    ctx.join("b")
    ctx.stabilise()
    epoch = ctx.group().group_epoch
    target_b = ctx.group().target_assignment["b"]
    r = ctx.join("b")  # the client lost its state and rejoins under the same id
    assert r.error_code is Errors.NONE
    assert ctx.group().group_epoch == epoch
    assert r.member_epoch == epoch
    assert r.assignment == {t: ps for t, ps in target_b.items() if ps}
    assert ctx.member("b").state is MemberState.STABLE


def test_group_states_empty_assigning_reconciling_stable() -> None:
    ctx = CoreContext(auto_complete_runs=False, group_consumer_assignor_offload_enable=True)
    ctx.join("a")
    group = ctx.group()
    assert group.state() is ConsumerGroupState.ASSIGNING  # group epoch 2, no target yet
    ctx.complete_runs()
    assert group.state() is ConsumerGroupState.RECONCILING  # target at 2, member still at 1
    ctx.ack("a")
    assert group.state() is ConsumerGroupState.STABLE
    ctx.heartbeat(member_id="a", member_epoch=-1)
    assert group.state() is ConsumerGroupState.EMPTY


def test_deleted_group_is_dead() -> None:
    ctx = CoreContext()
    ctx.join("a")
    group = ctx.group()
    ctx.heartbeat(member_id="a", member_epoch=-1)
    [result] = ctx.apply(ctx.shard.delete_groups(["grp"], ctx.now))
    assert result.error_code is Errors.NONE
    assert group.state() is ConsumerGroupState.DEAD
    [described] = ctx.shard.describe_groups(["grp"], ctx.now).response
    assert described.error_code is Errors.GROUP_ID_NOT_FOUND and described.group_state == "DEAD"
