"""Kafka's UniformHeterogeneousAssignmentBuilderTest, against assignors/uniform.py (mixed subscriptions).

Not here (ours differs from Kafka's asserted output; README "Differences from Kafka"):
testFirstAssignmentTwoMembersTwoTopics, testReassignmentWhenOneMemberAddedAndPartitionsAddedTwoMembersTwoTopics,
testReassignmentWhenTopicPartitionsRunOutAndMembersHaveNoPartitions, testTwoMembersSubscribedToNonexistentTopics.
"""

from __future__ import annotations

from tests.conformance.uniform_cases import T1, T2, T3, T4, A, B, C, assign, expect, norm, spec


def test_kafka_testTwoMembersNoTopicSubscription() -> None:
    assert norm(assign({A: spec(()), B: spec(())}, {T1: 3})) == {}


def test_kafka_testFirstAssignmentNumMembersGreaterThanTotalNumPartitions() -> None:
    out = assign({A: spec((T3,)), B: spec((T3,)), C: spec((T1,))}, {T3: 1, T1: 2})
    assert norm(out) == expect({A: {T3: (0,)}, B: {}, C: {T1: (0, 1)}})


def test_kafka_testReassignmentForTwoMembersThreeTopicsGivenUnbalancedPrevAssignment() -> None:
    out = assign({A: spec((T1,), {T1: (0, 1, 2)}), B: spec((T1, T2), {T1: (3,), T2: (0,)}),
                  C: spec((T1, T2, T3), {T1: (4, 5), T2: (1, 2, 3), T3: (0, 1, 2, 3)})}, {T1: 6, T2: 4, T3: 4})
    assert norm(out) == expect({A: {T1: (0, 1, 2, 5)}, B: {T1: (3,), T2: (0, 1, 2, 3)},
                                C: {T1: (4,), T3: (0, 1, 2, 3)}})


def test_kafka_testReassignmentWhenPartitionsAreAddedForTwoMembers() -> None:
    out = assign({A: spec((T1, T3), {T1: (0, 1, 2, 3), T3: (0, 1)}),
                  B: spec((T1, T2, T3, T4), {T2: (0, 1, 2), T4: (0, 1, 2)})}, {T1: 6, T2: 5, T3: 3, T4: 3})
    assert norm(out) == expect({A: {T1: (0, 1, 2, 3, 4, 5), T3: (0, 1, 2)}, B: {T2: (0, 1, 2, 3, 4), T4: (0, 1, 2)}})


def test_kafka_testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersThreeTopics() -> None:
    out = assign({A: spec((T1, T3), {T1: (0, 1, 2), T3: (0, 1)}), B: spec((T2,), {T2: (3, 4, 5, 6)})},
                 {T1: 3, T2: 8, T3: 3})
    assert norm(out) == expect({A: {T1: (0, 1, 2), T3: (0, 1, 2)}, B: {T2: (0, 1, 2, 3, 4, 5, 6, 7)}})


def test_kafka_testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics() -> None:
    out = assign({A: spec((T1,), {T1: (0, 2), T2: (1, 3)}), B: spec((T1, T2), {T1: (1,), T2: (0, 2, 4)})},
                 {T1: 3, T2: 5})
    assert norm(out) == expect({A: {T1: (0, 1, 2)}, B: {T2: (0, 1, 2, 3, 4)}})


def test_kafka_testFirstAssignmentWithTwoMembersIncludingOneWithoutSubscriptions() -> None:
    out = assign({A: spec((T1,)), B: spec(())}, {T1: 3})
    assert norm(out) == expect({A: {T1: (0, 1, 2)}, B: {}})
