"""`range`: contiguous ranges per topic, co-partitioned when subscriptions and counts are equal."""

from __future__ import annotations

from hypothesis import given, settings

from groupcoord.assignors.api import GroupSpec, LagSnapshot, MemberSpec, StaticTopicDescriber
from groupcoord.assignors.range import RangeAssignor
from tests.assignors.strategies import check_valid, scenarios

RANGE = RangeAssignor()
Scenario = tuple[GroupSpec, StaticTopicDescriber, LagSnapshot]


def test_readme_comparison_example() -> None:
    # lag-based-assignor README: the range assignor gives C0 [t0p0, t0p1], C1 [t0p2]
    group = GroupSpec.of({"C0": MemberSpec(frozenset({"t0"})), "C1": MemberSpec(frozenset({"t0"}))})
    out = RANGE.assign(group, StaticTopicDescriber({"t0": 3}))
    assert out == {"C0": {"t0": frozenset({0, 1})}, "C1": {"t0": frozenset({2})}}


@settings(max_examples=80, deadline=None)
@given(scenario=scenarios(missing_topics=False))
def test_each_member_gets_one_contiguous_range_per_topic_within_one_of_the_others(
    scenario: Scenario,
) -> None:
    group, topics, _ = scenario
    out = RANGE.assign(group, topics)
    check_valid(group, topics, out)
    for t in {t for s in group.members.values() for t in s.subscribed_topic_ids}:
        subscribers = sorted(m for m, s in group.members.items() if t in s.subscribed_topic_ids)
        ranges = [sorted(out[m].get(t, ())) for m in subscribers]
        sizes = [len(r) for r in ranges]
        assert max(sizes) - min(sizes) <= 1
        flat = [p for r in ranges for p in r]
        assert flat == list(range(len(flat)))  # in member order, each a contiguous block


@settings(max_examples=80, deadline=None)
@given(scenario=scenarios(homogeneous=True, missing_topics=False))
def test_equal_subscriptions_and_counts_are_co_partitioned(scenario: Scenario) -> None:
    group, _, _ = scenario
    subs = next(iter(group.members.values())).subscribed_topic_ids
    topics = StaticTopicDescriber(dict.fromkeys(subs, 5))
    out = RANGE.assign(group, topics)
    for a in out.values():
        assert len({ps for ps in a.values()}) <= 1
        assert set(a) in (set(), set(subs))


def test_join_use_case_gets_matching_partitions() -> None:
    group = GroupSpec.of({m: MemberSpec(frozenset({"orders", "payments"})) for m in ("a", "b", "c")})
    out = RANGE.assign(group, StaticTopicDescriber({"orders": 8, "payments": 8}))
    assert out["a"] == {"orders": frozenset({0, 1, 2}), "payments": frozenset({0, 1, 2})}
    assert out["c"] == {"orders": frozenset({6, 7}), "payments": frozenset({6, 7})}
