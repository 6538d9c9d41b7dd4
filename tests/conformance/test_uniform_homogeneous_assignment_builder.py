"""Kafka's UniformHomogeneousAssignmentBuilderTest (and the CommonAssignorTests it runs), against
assignors/uniform.py on homogeneous subscriptions. Each case asserts Kafka's exact assignment.

Members are visited in the spec's order (Kafka's tests pass a TreeMap: sorted); topics in Kafka's
`HashSet<Uuid>` order of the test's topic ids. Not here: CommonAssignorTests' testStaticMemberReplacementStickiness
and testMemberReplacementStickiness (their source was not available to port).
"""

from __future__ import annotations

import pytest

from groupcoord.assignors.api import AssignorError, GroupSpec, MemberSpec, StaticTopicDescriber
from tests.conformance.uniform_cases import (
    T1,
    T2,
    T3,
    UNIFORM,
    A,
    B,
    C,
    assign,
    check_valid_and_balanced,
    expect,
    hashed,
    norm,
    spec,
)

# CommonAssignorTests' topics are random UUIDs in Kafka; fixed ones here
C1, C2, C3 = "f1a8f2b6-5f9e-4f0c-9d43-0b1f7c6a2e11", "0c3d9a77-2b1e-4c55-8f2a-6d9e1b3c4a22", \
    "9b7e6d5c-4a3b-4c2d-8e1f-0a9b8c7d6e33"


def common_topics(rack_aware: bool) -> StaticTopicDescriber:
    counts = {C1: 2, C2: 5, C3: 7}
    if not rack_aware:
        return StaticTopicDescriber(counts)
    racks = {t: tuple(frozenset({f"rack{p % 3 + 1}"}) for p in range(n)) for t, n in counts.items()}
    return StaticTopicDescriber(counts, racks)


@pytest.mark.parametrize("rack_aware", [False, True])
def test_kafka_testAssignmentReuse(rack_aware: bool) -> None:
    topics = common_topics(rack_aware)
    subs = frozenset({C1, C2, C3})
    racks = {A: "rack1", B: "rack2", C: "rack3"} if rack_aware else {}
    first = UNIFORM.assign(GroupSpec.of({m: MemberSpec(subs, rack_id=racks.get(m)) for m in (A, B, C)}), topics)
    # as plain mappings (not this assignor's own result objects), the second run's general path
    fed = {m: MemberSpec(subs, dict(first[m]), racks.get(m)) for m in (A, B, C)}
    second = UNIFORM.assign(GroupSpec.of(fed), topics)
    for m in (A, B, C):
        assert second[m] is fed[m].assigned_partitions
    again = UNIFORM.assign(GroupSpec.of({m: MemberSpec(subs, first[m], racks.get(m)) for m in (A, B, C)}), topics)
    for m in (A, B, C):
        assert again[m] is first[m]


@pytest.mark.parametrize("rack_aware", [False, True])
def test_kafka_testIterationOrderStickiness(rack_aware: bool) -> None:
    topics = common_topics(rack_aware)
    subs = frozenset({C1, C2, C3})
    racks = {B: "rack1"} if rack_aware else {}
    first = UNIFORM.assign(GroupSpec.of({m: MemberSpec(subs, rack_id=racks.get(m)) for m in (A, B, C)}), topics)
    for order in ((A, B, C), (A, C, B), (B, A, C), (B, C, A), (C, A, B), (C, B, A)):
        fed = GroupSpec.of({m: MemberSpec(subs, dict(first[m]), racks.get(m)) for m in order})
        assert norm(UNIFORM.assign(fed, topics)) == norm(first)


def test_kafka_testOneMemberNoTopicSubscription() -> None:
    assert norm(assign({A: spec(())}, {T1: 3})) == {}


def test_kafka_testOneMemberSubscribedToNonexistentTopic() -> None:
    with pytest.raises(AssignorError):
        assign({A: spec((T2,))}, {T1: 3})


def test_kafka_testFirstAssignmentTwoMembersTwoTopicsNoMemberRacks() -> None:
    members = {A: spec((T1, T3)), B: spec((T1, T3))}
    out = assign(members, {T1: 3, T3: 2})
    assert norm(out) == expect({A: {T3: (0, 1)}, B: {T1: (0, 1, 2)}})
    check_valid_and_balanced(members, out)


def test_kafka_testFirstAssignmentNumMembersGreaterThanTotalNumPartitions() -> None:
    members = {A: spec((T3,)), B: spec((T3,)), C: spec((T3,))}
    out = assign(members, {T3: 2})
    assert norm(out) == expect({A: {}, B: {T3: (0,)}, C: {T3: (1,)}})
    check_valid_and_balanced(members, out)


def test_kafka_testValidityAndBalanceForLargeSampleSet() -> None:
    topics = {f"topic-{i}": 3 for i in range(1, 101)}
    members = {f"member{i}": spec(tuple(topics)) for i in range(1, 50)}
    check_valid_and_balanced(members, assign(members, topics))


def test_kafka_testReassignmentForTwoMembersTwoTopicsGivenUnbalancedPrevAssignment() -> None:
    members = {A: spec((T1, T2), {T1: (0, 1), T2: (0, 1)}), B: spec((T1, T2), {T1: (2,), T2: (2,)})}
    out = assign(members, {T1: 3, T2: 3})
    assert norm(out) == expect({A: {T1: (0, 1), T2: (0,)}, B: {T1: (2,), T2: (1, 2)}})
    check_valid_and_balanced(members, out)


def test_kafka_testReassignmentWhenPartitionsAreAddedForTwoMembersTwoTopics() -> None:
    members = {A: spec((T1, T2), {T1: (0, 2), T2: (0,)}), B: spec((T1, T2), {T1: (1,), T2: (1, 2)})}
    out = assign(members, {T1: 6, T2: 5})
    assert norm(out) == expect({A: {T1: (0, 2), T2: (0, 3, 4)}, B: {T1: (1, 3, 4, 5), T2: (1, 2)}})
    check_valid_and_balanced(members, out)


def test_kafka_testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics() -> None:
    members = {A: spec((T1, T2), {T1: (0, 2), T2: (0,)}), B: spec((T1, T2), {T1: (1,), T2: (1, 2)}),
               C: spec((T1, T2))}
    out = assign(members, {T1: 3, T2: 3})
    assert norm(out) == expect({A: {T1: (0, 2)}, B: {T1: (1,), T2: (1,)}, C: {T2: (0, 2)}})
    check_valid_and_balanced(members, out)


def test_kafka_testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersTwoTopics() -> None:
    members = {A: spec((T1, T2), hashed({T1: (0,), T2: (0,)})), B: spec((T1, T2), hashed({T1: (1,), T2: (1,)}))}
    out = assign(members, {T1: 3, T2: 3})
    assert norm(out) == expect({A: {T1: (0,), T2: (0, 2)}, B: {T1: (1, 2), T2: (1,)}})
    check_valid_and_balanced(members, out)


def test_kafka_testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics() -> None:
    members = {A: spec((T2,), hashed({T1: (0,), T2: (0,)})), B: spec((T2,), hashed({T1: (1,), T2: (1,)}))}
    out = assign(members, {T1: 2, T2: 2})
    assert norm(out) == expect({A: {T2: (0,)}, B: {T2: (1,)}})
    check_valid_and_balanced(members, out)
