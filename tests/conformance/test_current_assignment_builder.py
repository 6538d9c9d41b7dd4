"""Kafka's CurrentAssignmentBuilderTest, ported against `reconcile` (coordinator/core/consumer/reconciliation.py).

Kafka's `withCurrentPartitionEpoch((t, p) -> e)` says who holds a partition: -1 is free, anything else is
another member. Assigned partitions here carry the epoch they were granted at; the comparison looks at the
partition sets, the state and both epochs, as Kafka's `assertEquals(member)` does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import pytest

from groupcoord.coordinator.core.consumer.group import ConsumerGroupMember, MemberState
from groupcoord.coordinator.core.consumer.reconciliation import OwnerLookup, reconcile
from groupcoord.coordinator.core.consumer.target_assignment import subscribed_topic_ids
from groupcoord.coordinator.core.errors import CoordinatorError, Errors
from tests.core.context import image_of, tid

T1, T2 = "topic-1", "topic-2"
Sets = Mapping[str, tuple[int, ...]]


def member(state: MemberState, epoch: int, previous: int, assigned: Sets,
           pending: Sets | None = None) -> ConsumerGroupMember:
    return ConsumerGroupMember(
        "member", member_epoch=epoch, previous_member_epoch=previous, state=state,
        assigned_partitions={t: {p: epoch for p in ps} for t, ps in assigned.items()},
        partitions_pending_revocation={t: frozenset(ps) for t, ps in (pending or {}).items()},
    )


def held_by(epoch: int | Mapping[str, int]) -> OwnerLookup:
    """Kafka's currentPartitionEpoch: -1 free, any other epoch held by another member."""
    def owner(topic: str, partition: int) -> str | None:
        e = epoch if isinstance(epoch, int) else epoch.get(topic, -1)
        return None if e == -1 else "other"
    return owner


def build(m: ConsumerGroupMember, target_epoch: int, target: Sets, partition_epoch: int | Mapping[str, int],
          owned: Sets | None = None, subscribed: tuple[str, ...] | None = None,
          subscription_changed: bool = False) -> ConsumerGroupMember:
    return reconcile(m, target_epoch, {t: frozenset(ps) for t, ps in target.items()},
                     None if subscribed is None else frozenset(subscribed), held_by(partition_epoch),
                     None if owned is None else {t: frozenset(ps) for t, ps in owned.items()}, subscription_changed)


def view(m: ConsumerGroupMember) -> tuple[MemberState, int, int, dict[str, set[int]], dict[str, set[int]]]:
    return (m.state, m.member_epoch, m.previous_member_epoch,
            {t: set(ps) for t, ps in m.assigned_partitions.items() if ps},
            {t: set(ps) for t, ps in m.partitions_pending_revocation.items() if ps})


def expect(state: MemberState, epoch: int, previous: int, assigned: Sets,
           pending: Sets | None = None) -> tuple[MemberState, int, int, dict[str, set[int]], dict[str, set[int]]]:
    return view(member(state, epoch, previous, assigned, pending))


S, UREV, UREL = MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS, MemberState.UNRELEASED_PARTITIONS


def test_kafka_testStableToStable() -> None:
    m = member(S, 10, 10, {T1: (1, 2, 3), T2: (4, 5, 6)})
    out = build(m, 11, {T1: (1, 2, 3), T2: (4, 5, 6)}, 10)
    assert view(out) == expect(S, 11, 10, {T1: (1, 2, 3), T2: (4, 5, 6)})


def test_kafka_testStableToStableWithNewPartitions() -> None:
    m = member(S, 10, 10, {T1: (1, 2, 3), T2: (4, 5, 6)})
    out = build(m, 11, {T1: (1, 2, 3, 4), T2: (4, 5, 6, 7)}, -1)
    assert view(out) == expect(S, 11, 10, {T1: (1, 2, 3, 4), T2: (4, 5, 6, 7)})
    assert out.assigned_partitions[T1] == {1: 10, 2: 10, 3: 10, 4: 11}  # granted at the target epoch


def test_kafka_testStableToUnrevokedPartitions() -> None:
    m = member(S, 10, 10, {T1: (1, 2, 3), T2: (4, 5, 6)})
    out = build(m, 11, {T1: (2, 3, 4), T2: (5, 6, 7)}, -1)
    assert view(out) == expect(UREV, 10, 10, {T1: (2, 3), T2: (5, 6)}, {T1: (1,), T2: (4,)})


def test_kafka_testStableToUnreleasedPartitions() -> None:
    m = member(S, 10, 10, {T1: (1, 2, 3), T2: (4, 5, 6)})
    out = build(m, 11, {T1: (1, 2, 3, 4), T2: (4, 5, 6, 7)}, 10)
    assert view(out) == expect(UREL, 11, 10, {T1: (1, 2, 3), T2: (4, 5, 6)})


def test_kafka_testStableToUnreleasedPartitionsWithOwnedPartitionsNotHavingRevokedPartitions() -> None:
    m = member(S, 10, 10, {T1: (1, 2, 3), T2: (4, 5, 6)})
    out = build(m, 11, {T1: (1, 2, 3), T2: (4, 5, 7)}, {T2: 10}, owned={})
    assert view(out) == expect(UREL, 11, 10, {T1: (1, 2, 3), T2: (4, 5)})


def test_kafka_testUnrevokedPartitionsToStable() -> None:
    m = member(UREV, 10, 10, {T1: (2, 3), T2: (5, 6)}, {T1: (1,), T2: (4,)})
    out = build(m, 11, {T1: (2, 3), T2: (5, 6)}, -1, owned={T1: (2, 3), T2: (5, 6)})
    assert view(out) == expect(S, 11, 10, {T1: (2, 3), T2: (5, 6)})


def test_kafka_testRemainsInUnrevokedPartitions() -> None:
    m = member(UREV, 10, 10, {T1: (2, 3), T2: (5, 6)}, {T1: (1,), T2: (4,)})
    target = {T1: (3,), T2: (6,)}
    assert build(m, 12, target, -1, owned=None) is m
    assert build(m, 12, target, -1, owned={T1: (1, 2, 3), T2: (5, 6)}) is m
    assert build(m, 12, target, -1, owned={T1: (2, 3), T2: (4, 5, 6)}) is m


def test_kafka_testUnrevokedPartitionsToUnrevokedPartitions() -> None:
    m = member(UREV, 10, 10, {T1: (2, 3), T2: (5, 6)}, {T1: (1,), T2: (4,)})
    out = build(m, 12, {T1: (3,), T2: (6,)}, -1, owned={T1: (2, 3), T2: (5, 6)})
    # The acknowledged revocation moves the member to the next epoch (11), short of the target (12).
    assert view(out) == expect(UREV, 11, 10, {T1: (3,), T2: (6,)}, {T1: (2,), T2: (5,)})


def test_kafka_testUnrevokedPartitionsToUnreleasedPartitions() -> None:
    m = member(UREV, 11, 10, {T1: (2, 3), T2: (5, 6)})
    out = build(m, 11, {T1: (2, 3, 4), T2: (5, 6, 7)}, 10, owned={T1: (2, 3), T2: (5, 6)})
    assert view(out) == expect(UREL, 11, 11, {T1: (2, 3), T2: (5, 6)})


def test_kafka_testUnreleasedPartitionsToStable() -> None:
    m = member(UREL, 11, 11, {T1: (2, 3), T2: (5, 6)})
    out = build(m, 12, {T1: (2, 3), T2: (5, 6)}, 10)
    assert view(out) == expect(S, 12, 11, {T1: (2, 3), T2: (5, 6)})


def test_kafka_testUnreleasedPartitionsToStableWithNewPartitions() -> None:
    m = member(UREL, 11, 11, {T1: (2, 3), T2: (5, 6)})
    out = build(m, 11, {T1: (2, 3, 4), T2: (5, 6, 7)}, -1)
    assert view(out) == expect(S, 11, 11, {T1: (2, 3, 4), T2: (5, 6, 7)})


def test_kafka_testUnreleasedPartitionsToUnreleasedPartitions() -> None:
    m = member(UREL, 11, 11, {T1: (2, 3), T2: (5, 6)})
    assert build(m, 11, {T1: (2, 3, 4), T2: (5, 6, 7)}, 10) is m


def test_kafka_testUnreleasedPartitionsToUnrevokedPartitions() -> None:
    m = member(UREL, 11, 11, {T1: (2, 3), T2: (5, 6)})
    out = build(m, 12, {T1: (3,), T2: (6,)}, 10)
    assert view(out) == expect(UREV, 11, 11, {T1: (3,), T2: (6,)}, {T1: (2,), T2: (5,)})


def test_kafka_testUnknownState() -> None:
    m = member(MemberState.UNKNOWN, 11, 11, {T1: (3,), T2: (6,)}, {T1: (2,), T2: (5,)})
    # First the member is fenced, to force the client to reset its state...
    with pytest.raises(CoordinatorError) as e:
        build(m, 12, {T1: (3,), T2: (6,)}, 10)
    assert e.value.code is Errors.FENCED_MEMBER_EPOCH
    # ...then it rejoins owning nothing and reconciles from scratch.
    out = build(m, 12, {T1: (3,), T2: (6,)}, 11, owned={})
    assert view(out) == expect(S, 12, 11, {T1: (3,), T2: (6,)})


@pytest.mark.parametrize(("member_epoch", "target_epoch", "expected_epoch", "changed"),
                         [(10, 11, 11, False), (10, 11, 11, True), (10, 10, 10, True)])
def test_kafka_testStableToStableWithAssignmentTopicsNoLongerInSubscription(
    member_epoch: int, target_epoch: int, expected_epoch: int, changed: bool
) -> None:
    m = member(S, member_epoch, member_epoch, {T1: (1, 2, 3), T2: (4, 5, 6)})
    out = build(m, target_epoch, {T1: (1, 2, 3), T2: (4, 5, 6)}, -1, owned={T2: (4, 5, 6)}, subscribed=(T2,),
                subscription_changed=changed)
    assert view(out) == expect(S, expected_epoch, member_epoch, {T2: (4, 5, 6)})


@pytest.mark.parametrize(("member_epoch", "target_epoch", "expected_epoch", "changed"),
                         [(10, 11, 10, False), (10, 11, 10, True), (10, 10, 10, True)])
def test_kafka_testStableToUnrevokedPartitionsWithAssignmentTopicsNoLongerInSubscription(
    member_epoch: int, target_epoch: int, expected_epoch: int, changed: bool
) -> None:
    m = member(S, member_epoch, member_epoch, {T1: (1, 2, 3), T2: (4, 5, 6)})
    out = build(m, target_epoch, {T1: (1, 2, 3), T2: (4, 5, 6)}, -1, owned={T1: (1, 2, 3), T2: (4, 5, 6)},
                subscribed=(T2,), subscription_changed=changed)
    assert view(out) == expect(UREV, expected_epoch, member_epoch, {T2: (4, 5, 6)}, {T1: (1, 2, 3)})


def test_kafka_testRemainsInUnrevokedPartitionsWithAssignmentTopicsNoLongerInSubscription() -> None:
    m = member(UREV, 10, 10, {T1: (2, 3), T2: (5, 6)}, {T1: (1,), T2: (4,)})
    out = build(m, 12, {T1: (1, 3, 4), T2: (6, 7)}, -1, owned={T1: (1, 2, 3), T2: (4, 5, 6)}, subscribed=(T2,),
                subscription_changed=True)
    # Still revoking, and now also revoking what it no longer subscribes to; its epoch does not move.
    assert view(out) == expect(UREV, 10, 10, {T2: (5, 6)}, {T1: (1, 2, 3), T2: (4,)})


# --- regex subscriptions: the subscribed set is names ∪ what the regex resolved to -----------------------
def regex_case(names: tuple[str, ...], resolved: Mapping[str, frozenset[str]]) -> ConsumerGroupMember:
    image = image_of({"foo": 10, "bar": 10})
    foo, bar = tid("foo"), tid("bar")
    m = dataclasses.replace(member(S, 10, 10, {foo: (1, 2, 3), bar: (4, 5, 6)}), subscribed_topic_names=names,
                            subscribed_topic_regex="bar*")
    subscribed = subscribed_topic_ids(m, image, lambda r: resolved.get(r, frozenset()))
    return reconcile(m, 10, {foo: frozenset({1, 2, 3}), bar: frozenset({4, 5, 6})}, subscribed, held_by(-1),
                     {foo: frozenset({1, 2, 3}), bar: frozenset({4, 5, 6})}, True)


def test_kafka_testSubscribedTopicNameAndUnresolvedRegularExpression() -> None:
    out = regex_case(("foo",), {})
    assert view(out) == expect(UREV, 10, 10, {tid("foo"): (1, 2, 3)}, {tid("bar"): (4, 5, 6)})


def test_kafka_testUnresolvedRegularExpression() -> None:
    out = regex_case((), {})
    assert view(out) == expect(UREV, 10, 10, {}, {tid("foo"): (1, 2, 3), tid("bar"): (4, 5, 6)})


def test_kafka_testSubscribedTopicNameAndResolvedRegularExpression() -> None:
    out = regex_case(("foo",), {"bar*": frozenset({"bar"})})
    assert view(out) == expect(S, 10, 10, {tid("foo"): (1, 2, 3), tid("bar"): (4, 5, 6)})
