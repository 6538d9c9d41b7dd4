"""Reconciliation (KIP-848's CurrentAssignmentBuilder): revoke first, then move epoch, then receive what is free."""

from __future__ import annotations

from groupcoord.coordinator.core.consumer.group import MemberState
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.records import ConsumerGroupCurrentMemberAssignment
from tests.core.context import CoreContext, check_group_invariants, tid

FOO = tid("foo")


def two_members_on_foo() -> CoreContext:
    """a owned all of foo (6 partitions); b has just joined: the target splits foo 3/3 at epoch 3."""
    ctx = CoreContext({"foo": 6}, group_consumer_assignors="range")
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.join("b", subscribed_topic_names=("foo",))
    return ctx


def test_new_member_gets_nothing_while_the_previous_owner_holds_its_target() -> None:
    ctx = two_members_on_foo()
    b = ctx.member("b")
    assert ctx.group().target_assignment["b"] == {FOO: frozenset({3, 4, 5})}
    assert b.member_epoch == 3
    assert b.state is MemberState.UNRELEASED_PARTITIONS
    assert b.assigned_partitions == {}


def test_member_revokes_before_moving_to_the_new_epoch() -> None:
    ctx = two_members_on_foo()
    r = ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo=range(6)))
    assert r.member_epoch == 2  # still at its old epoch
    assert r.assignment == ctx.tps(foo={0, 1, 2})  # what it may keep: revoke the rest
    a = ctx.member("a")
    assert a.state is MemberState.UNREVOKED_PARTITIONS
    assert a.partitions_pending_revocation == {FOO: frozenset({3, 4, 5})}
    # Partitions pending revocation are still a's: nobody else may have them.
    assert all(ctx.group().partition_owner[(FOO, p)] == "a" for p in range(6))


def test_member_cannot_get_partition_until_previous_owner_revokes() -> None:
    ctx = two_members_on_foo()
    ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo=range(6)))
    r = ctx.heartbeat(member_id="b", member_epoch=3, topic_partitions={})
    assert r.assignment is None or r.assignment == {}
    assert ctx.member("b").state is MemberState.UNRELEASED_PARTITIONS
    # a still reports the partitions: it has not revoked, so it stays where it is.
    r = ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo=range(6)))
    assert r.member_epoch == 2
    assert ctx.member("a").state is MemberState.UNREVOKED_PARTITIONS
    assert ctx.heartbeat(member_id="b", member_epoch=3, topic_partitions={}).assignment is None
    # a revokes; now b receives them on its next heartbeat.
    r = ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo={0, 1, 2}))
    assert r.member_epoch == 3
    assert ctx.member("a").state is MemberState.STABLE
    r = ctx.heartbeat(member_id="b", member_epoch=3, topic_partitions={})
    assert r.assignment == ctx.tps(foo={3, 4, 5})
    assert ctx.member("b").state is MemberState.STABLE
    assert ctx.group().state().value == "STABLE"


def test_unrevoked_member_that_does_not_report_owned_partitions_keeps_waiting() -> None:
    ctx = two_members_on_foo()
    ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo=range(6)))
    before = len(ctx.records)
    r = ctx.heartbeat(member_id="a", member_epoch=2)  # owned partitions not sent: we cannot know
    assert r.member_epoch == 2 and ctx.member("a").state is MemberState.UNREVOKED_PARTITIONS
    assert ctx.records[before:] == []


def test_stable_member_that_must_revoke_without_reporting_owned_partitions_goes_unrevoked() -> None:
    ctx = two_members_on_foo()
    r = ctx.heartbeat(member_id="a", member_epoch=2)
    assert r.member_epoch == 2 and r.assignment == ctx.tps(foo={0, 1, 2})
    assert ctx.member("a").state is MemberState.UNREVOKED_PARTITIONS


def test_member_that_no_longer_owns_revoked_partitions_moves_straight_to_the_target_epoch() -> None:
    ctx = two_members_on_foo()
    r = ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo={0, 1, 2}))
    assert r.member_epoch == 3 and ctx.member("a").state is MemberState.STABLE
    assert r.assignment == ctx.tps(foo={0, 1, 2})


def test_response_assignment_holds_only_partitions_the_member_may_own_now() -> None:
    ctx = CoreContext({"foo": 6}, group_consumer_assignors="range")
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.join("b", subscribed_topic_names=("foo",))
    ctx.join("c", subscribed_topic_names=("foo",))  # target: a {0,1} b {2,3} c {4,5}
    group = ctx.group()
    r = ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo=range(6)))
    assert r.assignment == ctx.tps(foo={0, 1})
    ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo={0, 1}))
    # b was in UNRELEASED at epoch 3; its target at epoch 4 is {2,3}, which a has released.
    r = ctx.heartbeat(member_id="b", member_epoch=3, topic_partitions={})
    assert r.assignment == ctx.tps(foo={2, 3})
    for member in group.members.values():
        for t, ps in member.assigned_partitions.items():
            assert set(ps) <= set(group.target_assignment[member.member_id].get(t, ()))
    check_group_invariants(group)


def test_unreleased_partitions_are_granted_on_a_later_heartbeat() -> None:
    ctx = two_members_on_foo()
    r = ctx.heartbeat(member_id="b", member_epoch=3, topic_partitions={})
    assert ctx.member("b").state is MemberState.UNRELEASED_PARTITIONS and not r.assignment
    ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo=range(6)))
    ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo={0, 1, 2}))
    r = ctx.heartbeat(member_id="b", member_epoch=3, topic_partitions={})
    assert r.assignment == ctx.tps(foo={3, 4, 5})


def test_granted_partitions_record_the_epoch_at_which_they_were_assigned() -> None:
    ctx = two_members_on_foo()
    ctx.stabilise()
    assert ctx.member("a").assigned_partitions[FOO] == {0: 2, 1: 2, 2: 2}
    assert ctx.member("b").assigned_partitions[FOO] == {3: 3, 4: 3, 5: 3}


def test_assignment_is_sent_on_join_when_it_changes_and_on_a_full_request_only() -> None:
    ctx = CoreContext({"foo": 6, "bar": 3})
    assert ctx.join("a", subscribed_topic_names=("foo",)).assignment == ctx.tps(foo=range(6))
    # b subscribes to another topic: the epoch moves but a's partitions do not change.
    ctx.join("b", subscribed_topic_names=("bar",))
    r = ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo=range(6)))
    assert r.member_epoch == 3
    assert r.assignment is None
    # Nothing changed: nothing sent.
    assert ctx.heartbeat(member_id="a", member_epoch=3).assignment is None
    # A full request (after a client-side failure) gets the assignment again.
    r = ctx.heartbeat(member_id="a", member_epoch=3, rebalance_timeout_ms=5000, subscribed_topic_names=("foo",),
                      topic_partitions=ctx.tps(foo=range(6)))
    assert r.assignment == ctx.tps(foo=range(6))


def test_partitions_of_a_topic_the_member_unsubscribed_are_revoked_before_the_target_catches_up() -> None:
    """KIP-1263 (KAFKA-19431): the target may lag behind subscriptions, so revoke what is no longer subscribed."""
    ctx = CoreContext({"foo": 6, "bar": 3}, group_consumer_assignment_interval_ms=10_000)
    ctx.join("a")
    ctx.advance(1000)
    group = ctx.group()
    target_epoch = group.target_assignment_epoch
    r = ctx.heartbeat(member_id="a", member_epoch=2, subscribed_topic_names=("foo",),
                      topic_partitions=ctx.tps(foo=range(6), bar=range(3)))
    assert group.target_assignment_epoch == target_epoch < group.group_epoch  # batched: no new target yet
    assert r.assignment == ctx.tps(foo=range(6))
    assert ctx.member("a").partitions_pending_revocation == ctx.tps(bar=range(3))
    r = ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo=range(6)))
    assert ctx.member("a").state is MemberState.STABLE and ctx.member("a").assigned_sets() == ctx.tps(foo=range(6))


def test_regex_matching_nothing_is_an_empty_subscription() -> None:
    ctx = CoreContext({"foo": 6, "bar": 3})
    ctx.join("a")
    r = ctx.heartbeat(member_id="a", member_epoch=2, subscribed_topic_regex="nothing-.*",
                      topic_partitions=ctx.tps(foo=range(6), bar=range(3)))
    assert r.assignment == {}
    ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions={})
    assert ctx.member("a").assigned_partitions == {} and ctx.group().partition_owner == {}


def test_member_state_goes_stable_unrevoked_stable_and_records_every_step() -> None:
    ctx = two_members_on_foo()
    seen = []
    for owned in (range(6), {0, 1, 2}):
        before = len(ctx.records)
        ctx.heartbeat(member_id="a", member_epoch=ctx.member("a").member_epoch, topic_partitions=ctx.tps(foo=owned))
        recs = [x for x in ctx.records[before:] if isinstance(x, ConsumerGroupCurrentMemberAssignment)]
        seen.append((recs[-1].state, recs[-1].member_epoch))
    assert seen == [("UNREVOKED_PARTITIONS", 2), ("STABLE", 3)]


def test_member_in_unrevoked_waits_for_revocation_even_when_the_target_moves_again() -> None:
    ctx = CoreContext({"foo": 6}, group_consumer_assignors="range")
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.join("b", subscribed_topic_names=("foo",))
    ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo=range(6)))
    ctx.join("c", subscribed_topic_names=("foo",))  # target epoch 4: a {0,1}
    r = ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo=range(6)))
    assert r.member_epoch == 2 and ctx.member("a").state is MemberState.UNREVOKED_PARTITIONS
    # a revokes what it was asked to (3,4,5): it moves to epoch 4 and must now revoke 2 as well.
    r = ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo={0, 1, 2}))
    a = ctx.member("a")
    assert a.state is MemberState.UNREVOKED_PARTITIONS and a.partitions_pending_revocation == {FOO: frozenset({2})}
    assert r.assignment == ctx.tps(foo={0, 1})
    r = ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo={0, 1}))
    assert r.member_epoch == 4 and ctx.member("a").state is MemberState.STABLE
    assert r.error_code is Errors.NONE


def test_an_epoch_only_bump_keeps_the_members_partitions_and_their_owners_untouched() -> None:
    ctx = CoreContext({"foo": 6, "bar": 2}, group_consumer_assignors="range")
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.join("b", subscribed_topic_names=("foo",))
    ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo=range(6)))
    ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo={0, 1, 2}))
    ctx.heartbeat(member_id="b", member_epoch=3, topic_partitions={})
    before = ctx.member("a")
    assert before.member_epoch == 3 and before.state is MemberState.STABLE
    owners = dict(ctx.group().partition_owner)
    ctx.join("c", subscribed_topic_names=("bar",))  # the target moves to epoch 4; a's part of it does not
    r = ctx.heartbeat(member_id="a", member_epoch=3, topic_partitions=ctx.tps(foo={0, 1, 2}))
    after = ctx.member("a")
    assert r.member_epoch == 4 and after.state is MemberState.STABLE
    assert after.assigned_partitions is before.assigned_partitions  # the same mapping: nothing to re-index
    assert after.partitions_pending_revocation is before.partitions_pending_revocation
    assert {tp: m for tp, m in ctx.group().partition_owner.items() if m != "c"} == owners
    check_group_invariants(ctx.group())
