"""Kafka's UniformHomogeneousAssignmentBuilderTest, against assignors/uniform.py (homogeneous subscriptions).

Not here (ours differs from Kafka's asserted output; README "Differences from Kafka"):
testFirstAssignmentTwoMembersTwoTopicsNoMemberRacks, testFirstAssignmentNumMembersGreaterThanTotalNumPartitions,
testReassignmentWhenPartitionsAreAddedForTwoMembersTwoTopics,
testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersTwoTopics,
testOneMemberSubscribedToNonexistentTopic.
"""

from __future__ import annotations

from tests.conformance.uniform_cases import (
    T1,
    T2,
    A,
    B,
    C,
    assign,
    check_valid_and_balanced,
    expect,
    norm,
    spec,
)


def test_kafka_testOneMemberNoTopicSubscription() -> None:
    assert norm(assign({A: spec(())}, {T1: 3})) == {}


def test_kafka_testValidityAndBalanceForLargeSampleSet() -> None:
    topics = {f"topic-{i}": 3 for i in range(1, 101)}
    members = {f"member{i}": spec(tuple(topics)) for i in range(1, 50)}
    check_valid_and_balanced(members, assign(members, topics))


def test_kafka_testReassignmentForTwoMembersTwoTopicsGivenUnbalancedPrevAssignment() -> None:
    members = {A: spec((T1, T2), {T1: (0, 1), T2: (0, 1)}), B: spec((T1, T2), {T1: (2,), T2: (2,)})}
    out = assign(members, {T1: 3, T2: 3})
    assert norm(out) == expect({A: {T1: (0, 1), T2: (0,)}, B: {T1: (2,), T2: (1, 2)}})
    check_valid_and_balanced(members, out)


def test_kafka_testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics() -> None:
    members = {A: spec((T1, T2), {T1: (0, 2), T2: (0,)}), B: spec((T1, T2), {T1: (1,), T2: (1, 2)}),
               C: spec((T1, T2))}
    out = assign(members, {T1: 3, T2: 3})
    assert norm(out) == expect({A: {T1: (0, 2)}, B: {T1: (1,), T2: (1,)}, C: {T2: (0, 2)}})
    check_valid_and_balanced(members, out)


def test_kafka_testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics() -> None:
    members = {A: spec((T2,), {T1: (0,), T2: (0,)}), B: spec((T2,), {T1: (1,), T2: (1,)})}
    out = assign(members, {T1: 2, T2: 2})
    assert norm(out) == expect({A: {T2: (0,)}, B: {T2: (1,)}})
    check_valid_and_balanced(members, out)
