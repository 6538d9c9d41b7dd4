"""Kafka's UniformHeterogeneousAssignmentBuilderTest, against assignors/uniform.py (mixed subscriptions).
Each case asserts Kafka's exact assignment; members in sorted order, as the test's TestGroupSpecImpl (for
these one-letter member ids Kafka's broker order is the same)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from groupcoord.assignors.api import AssignorError, GroupAssignment, MemberSpec, SubscriptionType
from tests.conformance import uniform_cases
from tests.conformance.uniform_cases import T1, T2, T3, T4, A, B, C, expect, norm, spec


def assign(members: Mapping[str, MemberSpec], counts: Mapping[str, int]) -> GroupAssignment:
    """As Kafka's test: the heterogeneous builder, whatever the subscriptions."""
    return uniform_cases.assign(members, counts, SubscriptionType.HETEROGENEOUS)


def test_kafka_testTwoMembersNoTopicSubscription() -> None:
    assert norm(assign({A: spec(()), B: spec(())}, {T1: 3})) == {}


def test_kafka_testTwoMembersSubscribedToNonexistentTopics() -> None:
    with pytest.raises(AssignorError):
        assign({A: spec((T3,)), B: spec((T2,))}, {T1: 3})


def test_kafka_testFirstAssignmentTwoMembersTwoTopics() -> None:
    out = assign({A: spec((T1, T3)), B: spec((T3,))}, {T1: 3, T3: 6})
    assert norm(out) == expect({A: {T1: (0, 1, 2), T3: (4,)}, B: {T3: (0, 1, 2, 3, 5)}})


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


def test_kafka_testReassignmentWhenOneMemberAddedAndPartitionsAddedTwoMembersTwoTopics() -> None:
    out = assign({A: spec((T1,), {T1: (0, 2), T2: (0,)}), B: spec((T1, T2), {T1: (1,), T2: (1, 2)}),
                  C: spec((T1, T2))}, {T1: 6, T2: 7})
    assert norm(out) == expect({A: {T1: (0, 2, 3, 4, 5)}, B: {T1: (1,), T2: (1, 2, 6)}, C: {T2: (0, 3, 4, 5)}})


def test_kafka_testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersThreeTopics() -> None:
    out = assign({A: spec((T1, T3), {T1: (0, 1, 2), T3: (0, 1)}), B: spec((T2,), {T2: (3, 4, 5, 6)})},
                 {T1: 3, T2: 8, T3: 3})
    assert norm(out) == expect({A: {T1: (0, 1, 2), T3: (0, 1, 2)}, B: {T2: (0, 1, 2, 3, 4, 5, 6, 7)}})


def test_kafka_testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics() -> None:
    out = assign({A: spec((T1,), {T1: (0, 2), T2: (1, 3)}), B: spec((T1, T2), {T1: (1,), T2: (0, 2, 4)})},
                 {T1: 3, T2: 5})
    assert norm(out) == expect({A: {T1: (0, 1, 2)}, B: {T2: (0, 1, 2, 3, 4)}})


def test_kafka_testReassignmentWhenTopicPartitionsRunOutAndMembersHaveNoPartitions() -> None:
    out = assign({A: spec((T1, T2, T3), {T1: (0, 1), T2: (0, 1), T3: (0, 1)}), B: spec((T1, T2, T3))},
                 {T1: 2, T2: 2, T3: 2})
    assert norm(out) == expect({A: {T2: (0,), T3: (0, 1)}, B: {T1: (0, 1), T2: (1,)}})


def test_kafka_testFirstAssignmentWithTwoMembersIncludingOneWithoutSubscriptions() -> None:
    out = assign({A: spec((T1,)), B: spec(())}, {T1: 3})
    assert norm(out) == expect({A: {T1: (0, 1, 2)}, B: {}})
