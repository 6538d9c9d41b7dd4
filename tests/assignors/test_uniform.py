"""`uniform`: balanced within one partition per eligible member, then as sticky as possible."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupcoord.assignors._java_order import hash_set_order
from groupcoord.assignors.api import AssignorError, GroupSpec, LagSnapshot, MemberSpec, StaticTopicDescriber
from groupcoord.assignors.uniform import UniformAssignor
from tests.assignors.strategies import (
    check_balanced,
    check_valid,
    counts,
    moved,
    owners,
    scenarios,
    with_assignment,
)

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
UNIFORM = UniformAssignor()
Scenario = tuple[GroupSpec, StaticTopicDescriber, LagSnapshot]
TA, TB = "3f0b7c1e-8d2a-4e6f-9a5b-1c4d7e0f2a3b", "a7e2c9d4-1b3f-4a8e-8c6d-5f0e9b2a7c41"


@SETTINGS
@given(scenario=scenarios(missing_topics=False))
def test_no_partition_can_move_to_a_subscriber_with_two_fewer(scenario: Scenario) -> None:
    group, topics, _ = scenario
    out = UNIFORM.assign(group, topics)
    check_valid(group, topics, out)
    check_balanced(group, out)


@SETTINGS
@given(scenario=scenarios(homogeneous=True, missing_topics=False))
def test_equal_subscriptions_get_counts_within_one(scenario: Scenario) -> None:
    group, topics, _ = scenario
    n = counts(UNIFORM.assign(group, topics)).values()
    assert max(n) - min(n) <= 1


@SETTINGS
@given(scenario=scenarios(missing_topics=False))
def test_an_unchanged_group_keeps_its_assignment(scenario: Scenario) -> None:
    group, topics, _ = scenario
    first = UNIFORM.assign(group, topics)
    assert UNIFORM.assign(with_assignment(group, first), topics) == first


@SETTINGS
@given(scenario=scenarios(homogeneous=True, missing_topics=False), seed=st.integers(0, 2**32))
def test_a_balanced_assignment_is_never_reshuffled(scenario: Scenario, seed: int) -> None:
    group, topics, _ = scenario
    members = sorted(group.members)
    subs = group.members[members[0]].subscribed_topic_ids
    parts = [(t, p) for t in sorted(subs) for p in range(max(0, topics.partition_count(t)))]
    random.Random(seed).shuffle(parts)
    dealt: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    for i, (t, p) in enumerate(parts):  # any dealing with counts within one is balanced
        dealt[members[i % len(members)]].setdefault(t, set()).add(p)
    balanced = {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in dealt.items()}
    assert UNIFORM.assign(with_assignment(group, balanced), topics) == balanced


@SETTINGS
@given(scenario=scenarios(homogeneous=True, missing_topics=False))
def test_one_member_joining_moves_at_most_its_share(scenario: Scenario) -> None:
    group, topics, _ = scenario
    before = UNIFORM.assign(group, topics)
    joined = dict(with_assignment(group, before).members)
    some = next(iter(group.members.values()))
    joined["zz-new"] = MemberSpec(some.subscribed_topic_ids)
    after = UNIFORM.assign(GroupSpec.of(joined), topics)
    total = len(owners(before))
    assert moved(before, after) <= math.ceil(total / len(joined))


@SETTINGS
@given(scenario=scenarios(homogeneous=True, missing_topics=False))
def test_a_member_leaving_moves_only_its_partitions(scenario: Scenario) -> None:
    group, topics, _ = scenario
    before = UNIFORM.assign(group, topics)
    leaver = sorted(group.members)[0]
    rest = {m: s for m, s in with_assignment(group, before).members.items() if m != leaver}
    after = UNIFORM.assign(GroupSpec.of(rest), topics)
    for tp, m in owners(before).items():
        if m != leaver and rest:
            assert owners(after)[tp] == m


def test_fresh_homogeneous_assignment_fills_members_in_kafkas_order() -> None:
    """Kafka's builder: members in its HashMap order (here m1, m2, m3), topics in its HashSet order,
    consecutive runs, the last P % n members one larger."""
    topics = [TA, TB]
    assert hash_set_order([TB, TA]) == [TA, TB]
    group = GroupSpec.of({m: MemberSpec(frozenset(topics)) for m in ("m2", "m1", "m3")})
    out = UNIFORM.assign(group, StaticTopicDescriber({TA: 4, TB: 3}))
    assert out == {
        "m1": {TA: frozenset({0, 1})},
        "m2": {TA: frozenset({2, 3})},
        "m3": {TB: frozenset({0, 1, 2})},
    }


def test_a_subscription_to_a_topic_that_does_not_exist_is_an_error() -> None:
    group = GroupSpec.of({"m1": MemberSpec(frozenset({TA, "gone"}))})
    with pytest.raises(AssignorError):
        UNIFORM.assign(group, StaticTopicDescriber({TA: 4}))
    hetero = GroupSpec.of({"m1": MemberSpec(frozenset({TA, "gone"})), "m2": MemberSpec(frozenset({TA}))})
    with pytest.raises(AssignorError):
        UNIFORM.assign(hetero, StaticTopicDescriber({TA: 4}))


def test_heterogeneous_group_balances_among_eligible_members() -> None:
    # KIP-848's example shape: m1 reads t1 only, m2 and m3 read t1 and t2.
    group = GroupSpec.of(
        {
            "m1": MemberSpec(frozenset({"t1"})),
            "m2": MemberSpec(frozenset({"t1", "t2"})),
            "m3": MemberSpec(frozenset({"t1", "t2"})),
        }
    )
    topics = StaticTopicDescriber({"t1": 3, "t2": 6})
    out = UNIFORM.assign(group, topics)
    check_valid(group, topics, out)
    assert sorted(counts(out).values()) == [3, 3, 3]
    assert set(out["m1"]) == {"t1"}


def test_racks_do_not_change_a_homogeneous_assignment_as_in_kafka() -> None:
    racks = {"t": (frozenset({"b"}), frozenset({"b"}), frozenset({"a"}), frozenset({"a"}))}
    group = GroupSpec.of(
        {"m1": MemberSpec(frozenset({"t"}), rack_id="a"), "m2": MemberSpec(frozenset({"t"}), rack_id="b")}
    )
    with_racks = UNIFORM.assign(group, StaticTopicDescriber({"t": 4}, racks))
    assert with_racks == {"m1": {"t": frozenset({0, 1})}, "m2": {"t": frozenset({2, 3})}}
    plain = GroupSpec.of({m: MemberSpec(s.subscribed_topic_ids) for m, s in group.members.items()})
    assert UNIFORM.assign(plain, StaticTopicDescriber({"t": 4})) == with_racks


def test_rack_preference_never_breaks_balance() -> None:
    racks = {"t": tuple(frozenset({"a"}) for _ in range(6))}
    topics = StaticTopicDescriber({"t": 6}, racks)
    group = GroupSpec.of(
        {"m1": MemberSpec(frozenset({"t"}), rack_id="a"), "m2": MemberSpec(frozenset({"t"}), rack_id="b")}
    )
    assert sorted(counts(UNIFORM.assign(group, topics)).values()) == [3, 3]


def test_stale_and_duplicate_ownership_is_cleaned_up() -> None:
    group = GroupSpec.of(
        {
            "m1": MemberSpec(frozenset({"t"}), {"t": frozenset({0, 1, 9}), "gone": frozenset({0})}),
            "m2": MemberSpec(frozenset({"t"}), {"t": frozenset({1, 2})}),
        }
    )
    topics = StaticTopicDescriber({"t": 4})
    out = UNIFORM.assign(group, topics)
    check_valid(group, topics, out)
    assert out["m1"]["t"] >= {0, 1}  # the first claimant in member order keeps a doubly claimed partition
    assert 2 in out["m2"]["t"]
