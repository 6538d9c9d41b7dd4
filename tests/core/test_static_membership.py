"""Static membership (KIP-345 in KIP-848 form): instance ids, epoch -2, replacement without a rebalance."""

from __future__ import annotations

from groupcoord.coordinator.core.consumer.group import MemberState
from groupcoord.coordinator.core.errors import Errors
from tests.core.context import CoreContext, check_group_invariants, shard_state


def stable_static_pair() -> CoreContext:
    ctx = CoreContext({"foo": 6}, group_consumer_assignors="range")
    ctx.join("a", instance_id="i-a", subscribed_topic_names=("foo",))
    ctx.join("b", instance_id="i-b", subscribed_topic_names=("foo",))
    ctx.stabilise()
    return ctx


def test_temporary_leave_with_epoch_minus_2_keeps_member_and_assignment_without_rebalance() -> None:
    ctx = stable_static_pair()
    group = ctx.group()
    epoch = group.group_epoch
    owned_by_b = {tp for tp, m in group.partition_owner.items() if m == "b"}
    r = ctx.heartbeat(member_id="b", member_epoch=-2, instance_id="i-b")
    assert r.error_code is Errors.NONE and r.member_epoch == -2
    assert group.group_epoch == epoch
    assert group.members["b"].member_epoch == -2
    assert {tp for tp, m in group.partition_owner.items() if m == "b"} == owned_by_b
    assert group.static_members["i-b"] == "b"
    check_group_invariants(group)


def test_static_member_rejoining_under_a_new_id_inherits_the_assignment_without_epoch_bump() -> None:
    ctx = stable_static_pair()
    group = ctx.group()
    epoch = group.group_epoch
    assigned = group.members["b"].assigned_sets()
    target = group.target_assignment["b"]
    ctx.heartbeat(member_id="b", member_epoch=-2, instance_id="i-b")
    r = ctx.join("b2", instance_id="i-b", subscribed_topic_names=("foo",))
    assert r.error_code is Errors.NONE
    assert r.member_id == "b2" and r.member_epoch == epoch
    assert r.assignment == assigned
    assert group.group_epoch == epoch
    assert "b" not in group.members and group.static_members["i-b"] == "b2"
    assert group.target_assignment["b2"] == target and "b" not in group.target_assignment
    assert group.members["b2"].state is MemberState.STABLE
    assert {m for m in group.partition_owner.values()} == {"a", "b2"}
    check_group_invariants(group)


def test_static_rejoin_while_the_instance_is_still_held_is_unreleased_instance_id() -> None:
    ctx = stable_static_pair()
    before = shard_state(ctx.shard)
    r = ctx.join("b2", instance_id="i-b", subscribed_topic_names=("foo",))
    assert r.error_code is Errors.UNRELEASED_INSTANCE_ID
    assert shard_state(ctx.shard) == before


def test_heartbeat_with_an_instance_id_held_by_another_member_is_fenced_instance_id() -> None:
    ctx = stable_static_pair()
    epoch = ctx.member("a").member_epoch
    r = ctx.heartbeat(member_id="a", member_epoch=epoch, instance_id="i-b")
    assert r.error_code is Errors.FENCED_INSTANCE_ID


def test_heartbeat_with_an_instance_id_no_member_holds_is_unknown_member_id() -> None:
    """As Kafka 4.4 answers (found by tests/differential): the instance is unknown, not held by another."""
    ctx = stable_static_pair()
    epoch = ctx.member("a").member_epoch
    r = ctx.heartbeat(member_id="a", member_epoch=epoch, instance_id="i-nobody")
    assert r.error_code is Errors.UNKNOWN_MEMBER_ID


def test_static_leave_with_a_member_id_that_does_not_hold_the_instance_is_fenced_instance_id() -> None:
    ctx = stable_static_pair()
    before = shard_state(ctx.shard)
    assert ctx.heartbeat(member_id="a", member_epoch=-2, instance_id="i-b").error_code is Errors.FENCED_INSTANCE_ID
    assert ctx.heartbeat(member_id="a", member_epoch=-1, instance_id="i-b").error_code is Errors.FENCED_INSTANCE_ID
    assert shard_state(ctx.shard) == before


def test_static_leave_of_an_unknown_instance_is_unknown_member_id() -> None:
    ctx = stable_static_pair()
    assert ctx.heartbeat(member_id="a", member_epoch=-2, instance_id="i-x").error_code is Errors.UNKNOWN_MEMBER_ID


def test_static_member_leaving_for_good_with_epoch_minus_1_triggers_a_rebalance() -> None:
    ctx = stable_static_pair()
    epoch = ctx.group().group_epoch
    r = ctx.heartbeat(member_id="b", member_epoch=-1, instance_id="i-b")
    assert r.error_code is Errors.NONE
    assert ctx.group().group_epoch == epoch + 1 and "i-b" not in ctx.group().static_members


def test_static_member_that_never_returns_is_removed_at_its_session_timeout() -> None:
    ctx = stable_static_pair()
    epoch = ctx.group().group_epoch
    ctx.heartbeat(member_id="b", member_epoch=-2, instance_id="i-b")
    ctx.advance(44_000)
    ctx.heartbeat(member_id="a", member_epoch=ctx.member("a").member_epoch)  # a stays alive
    ctx.advance(1_001)
    assert "b" not in ctx.group().members and "i-b" not in ctx.group().static_members
    assert ctx.group().group_epoch == epoch + 1


def test_static_rejoin_after_the_old_member_timed_out_is_a_new_member() -> None:
    ctx = stable_static_pair()
    ctx.heartbeat(member_id="b", member_epoch=-2, instance_id="i-b")
    ctx.advance(30_000)
    ctx.heartbeat(member_id="a", member_epoch=ctx.member("a").member_epoch)
    ctx.advance(16_000)
    epoch = ctx.group().group_epoch
    r = ctx.join("b2", instance_id="i-b", subscribed_topic_names=("foo",))
    assert r.error_code is Errors.NONE and ctx.group().group_epoch == epoch + 1


def test_old_member_id_of_a_replaced_static_member_is_unknown() -> None:
    ctx = stable_static_pair()
    epoch = ctx.member("b").member_epoch
    ctx.heartbeat(member_id="b", member_epoch=-2, instance_id="i-b")
    ctx.join("b2", instance_id="i-b", subscribed_topic_names=("foo",))
    assert ctx.heartbeat(member_id="b", member_epoch=epoch).error_code is Errors.UNKNOWN_MEMBER_ID


def test_replacement_cancels_the_old_members_session_timer() -> None:
    ctx = stable_static_pair()
    ctx.heartbeat(member_id="b", member_epoch=-2, instance_id="i-b")
    ctx.join("b2", instance_id="i-b", subscribed_topic_names=("foo",))
    assert ("session", "grp", "b") not in ctx.timers
    assert ("session", "grp", "b2") in ctx.timers


def test_static_member_can_change_subscription_when_it_rejoins() -> None:
    ctx = CoreContext({"foo": 6, "bar": 3})
    ctx.join("a", instance_id="i-a", subscribed_topic_names=("foo",))
    ctx.heartbeat(member_id="a", member_epoch=-2, instance_id="i-a")
    epoch = ctx.group().group_epoch
    r = ctx.join("a2", instance_id="i-a", subscribed_topic_names=("foo", "bar"))
    assert r.error_code is Errors.NONE
    assert ctx.group().group_epoch == epoch + 1  # the subscription changed: that is a rebalance
    ctx.stabilise()
    assert ctx.member("a2").assigned_sets() == ctx.tps(foo=range(6), bar=range(3))
