"""Kafka's RangeAssignorTest (group-coordinator/.../assignor/RangeAssignorTest.java), against assignors/range.py.

Each case asserts Kafka's exact assignment for Kafka's input. Topic ids are plain names here (Kafka's are
random UUIDs; range does not depend on them). Not here: the rack-aware cases (testRackAware*,
testNoRackAware*, testPartialRackMatching), added to Kafka after 4.4, whose RangeAssignor ignores racks.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from groupcoord.assignors.api import (
    AssignorError,
    GroupAssignment,
    GroupSpec,
    MemberSpec,
    StaticTopicDescriber,
    SubscriptionType,
)
from groupcoord.assignors.range import RangeAssignor

RANGE = RangeAssignor()
T1, T2, T3 = "topic1", "topic2", "topic3"
A, B, C = "A", "B", "C"
Plan = Mapping[str, Mapping[str, tuple[int, ...]]]


def spec(topics: tuple[str, ...], current: Mapping[str, tuple[int, ...]] | None = None,
         instance_id: str | None = None) -> MemberSpec:
    return MemberSpec(frozenset(topics), {t: frozenset(ps) for t, ps in (current or {}).items()},
                      instance_id=instance_id)


def assign(members: Mapping[str, MemberSpec], counts: Mapping[str, int]) -> GroupAssignment:
    return RANGE.assign(GroupSpec.of(dict(members)), StaticTopicDescriber(dict(counts)))


def norm(out: GroupAssignment) -> dict[str, dict[str, frozenset[int]]]:
    return {m: {t: ps for t, ps in a.items() if ps} for m, a in out.items()}


def expect(plan: Plan) -> dict[str, dict[str, frozenset[int]]]:
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in plan.items()}


@pytest.mark.parametrize("kind", [SubscriptionType.HOMOGENEOUS, SubscriptionType.HETEROGENEOUS])
@pytest.mark.parametrize("rack_aware", [False, True])
def test_kafka_testReassignmentStickiness(kind: SubscriptionType, rack_aware: bool) -> None:
    """CommonAssignorTests: fed its own result back, in any member order, the assignment stays."""
    counts = {T1: 2, T2: 5, T3: 7}
    racks = {t: tuple(frozenset({f"rack{p % 4}"}) for p in range(n)) for t, n in counts.items()}
    topics = StaticTopicDescriber(counts, racks)
    subs = frozenset(counts)
    rack = {B: "rack1"} if rack_aware else {}
    first = RANGE.assign(GroupSpec({m: MemberSpec(subs, rack_id=rack.get(m)) for m in (A, B, C)}, kind), topics)
    for order in ((A, B, C), (A, C, B), (B, A, C), (B, C, A), (C, A, B), (C, B, A)):
        fed = GroupSpec({m: MemberSpec(subs, dict(first[m]), rack.get(m)) for m in order}, kind)
        assert norm(RANGE.assign(fed, topics)) == norm(first)


def test_kafka_testOneMemberNoTopic() -> None:
    assert norm(assign({A: spec(())}, {T1: 3})) == {A: {}}


def test_kafka_testOneMemberSubscribedToNonExistentTopic() -> None:
    with pytest.raises(AssignorError):
        assign({A: spec((T2,))}, {T1: 3})


def test_kafka_testFirstAssignmentTwoMembersTwoTopicsSameSubscriptions() -> None:
    out = assign({A: spec((T1, T3)), B: spec((T1, T3))}, {T1: 3, T3: 2})
    assert norm(out) == expect({A: {T1: (0, 1), T3: (0,)}, B: {T1: (2,), T3: (1,)}})


def test_kafka_testFirstAssignmentThreeMembersThreeTopicsDifferentSubscriptions() -> None:
    out = assign({A: spec((T1, T2)), B: spec((T3,)), C: spec((T2, T3))}, {T1: 3, T2: 3, T3: 2})
    assert norm(out) == expect({A: {T1: (0, 1, 2), T2: (0, 1)}, B: {T3: (0,)}, C: {T2: (2,), T3: (1,)}})


def test_kafka_testFirstAssignmentNumMembersGreaterThanNumPartitions() -> None:
    out = assign({A: spec((T1, T3)), B: spec((T1, T3)), C: spec((T1, T3))}, {T1: 3, T3: 2})
    assert norm(out) == expect({A: {T1: (0,), T3: (0,)}, B: {T1: (1,), T3: (1,)}, C: {T1: (2,)}})


def test_kafka_testStaticMembership() -> None:
    initial = assign({A: spec((T1,), instance_id="instanceA"), B: spec((T1,), instance_id="instanceB")}, {T1: 3})
    # static member A leaves and comes back under a new member id, with the same instance id
    again = assign({B: spec((T1,), instance_id="instanceB"), "memberA1": spec((T1,), instance_id="instanceA")},
                   {T1: 3})
    assert again["memberA1"] == initial[A]
    assert again[B] == initial[B]


def test_kafka_testMixedStaticMembership() -> None:
    initial = assign({A: spec((T1,), instance_id="instanceA"), C: spec((T1,), instance_id="instanceC"),
                      B: spec((T1,))}, {T1: 5})
    again = assign({C: spec((T1,), instance_id="instanceC"), B: spec((T1,)),
                    "memberA1": spec((T1,), instance_id="instanceA")}, {T1: 5})
    assert again["memberA1"] == initial[A]
    assert again[B] == initial[B]
    assert again[C] == initial[C]


def test_kafka_testReassignmentNumMembersGreaterThanNumPartitionsWhenOneMemberAdded() -> None:
    out = assign({A: spec((T1, T2), {T1: (0,), T2: (0,)}), B: spec((T1, T2), {T1: (1,), T2: (1,)}),
                  C: spec((T1, T2))}, {T1: 2, T2: 2})
    assert norm(out) == expect({A: {T1: (0,), T2: (0,)}, B: {T1: (1,), T2: (1,)}, C: {}})


def test_kafka_testReassignmentWhenOnePartitionAddedForTwoMembersTwoTopics() -> None:
    out = assign({A: spec((T1, T2), {T1: (0, 1), T2: (0, 1)}), B: spec((T1, T2), {T1: (2,), T2: (2,)})},
                 {T1: 4, T2: 4})
    assert norm(out) == expect({A: {T1: (0, 1), T2: (0, 1)}, B: {T1: (2, 3), T2: (2, 3)}})


def test_kafka_testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics() -> None:
    out = assign({A: spec((T1, T2), {T1: (0, 1), T2: (0, 1)}), B: spec((T1, T2), {T1: (2,), T2: (2,)}),
                  C: spec((T1, T2))}, {T1: 3, T2: 3})
    assert norm(out) == expect({A: {T1: (0,), T2: (0,)}, B: {T1: (1,), T2: (1,)}, C: {T1: (2,), T2: (2,)}})


def test_kafka_testReassignmentWhenOneMemberAddedAndOnePartitionAfterInitialAssignmentWithTwoMembersTwoTopics() -> None:
    out = assign({A: spec((T1, T2), {T1: (0, 1), T2: (0, 1)}), B: spec((T1, T2), {T1: (2,), T2: (2,)}),
                  C: spec((T1,))}, {T1: 4, T2: 3})
    assert norm(out) == expect({A: {T1: (0, 1), T2: (0, 1)}, B: {T1: (2,), T2: (2,)}, C: {T1: (3,)}})


def test_kafka_testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithTwoMembersTwoTopics() -> None:
    out = assign({B: spec((T1, T2), {T1: (2,), T2: (2,)})}, {T1: 3, T2: 3})
    assert norm(out) == expect({B: {T1: (0, 1, 2), T2: (0, 1, 2)}})


def test_kafka_testReassignmentWhenMultipleSubscriptionsRemovedAfterInitialAssignmentWithThreeMembersTwoTopics(
) -> None:
    out = assign({A: spec((T1,), {T1: (0, 1, 2), T2: (0,)}), B: spec((T1, T2, T3), {T2: (1,)}),
                  C: spec((T2,), {T2: (2,), T3: (0, 1)})}, {T1: 3, T2: 3, T3: 2})
    assert norm(out) == expect({A: {T1: (0, 1)}, B: {T1: (2,), T2: (0, 1), T3: (0, 1)}, C: {T2: (2,)}})
