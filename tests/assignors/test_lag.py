"""`lag`: the KAFKA-5337 lag-based assignor, checked against a literal transcription of its rule."""

from __future__ import annotations

from hypothesis import given, settings

from groupcoord.assignors.api import (
    GroupAssignment,
    GroupSpec,
    LagSnapshot,
    MemberSpec,
    PartitionOffsets,
    StaticTopicDescriber,
)
from groupcoord.assignors.lag import LagAssignor
from tests.assignors.strategies import check_valid, scenarios

LAG = LagAssignor()
Scenario = tuple[GroupSpec, StaticTopicDescriber, LagSnapshot]


def seed_rule(group: GroupSpec, topics: StaticTopicDescriber, lag: LagSnapshot) -> GroupAssignment:
    """One partition at a time, as the seed's Java code does."""
    out: dict[str, dict[str, set[int]]] = {m: {} for m in group.members}
    for t in sorted({t for s in group.members.values() for t in s.subscribed_topic_ids}):
        consumers = sorted(m for m, s in group.members.items() if t in s.subscribed_topic_ids)
        count = topics.partition_count(t)
        n = dict.fromkeys(consumers, 0)
        total = dict.fromkeys(consumers, 0)
        for p in sorted(range(max(0, count)), key=lambda p: (-lag.lag(t, p), p)):
            m = min(consumers, key=lambda c: (n[c], total[c], c))
            out[m].setdefault(t, set()).add(p)
            n[m] += 1
            total[m] += lag.lag(t, p)
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()}


def test_readme_example() -> None:
    group = GroupSpec.of({"C0": MemberSpec(frozenset({"t0"})), "C1": MemberSpec(frozenset({"t0"}))})
    lag = LagSnapshot(
        {
            ("t0", 0): PartitionOffsets(100_000, 0),
            ("t0", 1): PartitionOffsets(50_000, 0),
            ("t0", 2): PartitionOffsets(60_000, 0),
        }
    )
    out = LAG.assign(group, StaticTopicDescriber({"t0": 3}), lag)
    assert out == {"C0": {"t0": frozenset({0})}, "C1": {"t0": frozenset({1, 2})}}


@settings(max_examples=150, deadline=None)
@given(scenario=scenarios())
def test_matches_the_seed_rule_partition_by_partition(scenario: Scenario) -> None:
    group, topics, lag = scenario
    out = LAG.assign(group, topics, lag)
    check_valid(group, topics, out)
    assert out == seed_rule(group, topics, lag)


def test_lag_without_a_committed_offset_depends_on_auto_offset_reset() -> None:
    offsets = {("t", 0): PartitionOffsets(end_offset=500, committed_offset=None, log_start_offset=100)}
    assert LagSnapshot(offsets, "latest").lag("t", 0) == 0
    assert LagSnapshot(offsets, "earliest").lag("t", 0) == 400


def test_lag_is_never_negative() -> None:
    offsets = {("t", 0): PartitionOffsets(end_offset=10, committed_offset=20)}
    assert LagSnapshot(offsets).lag("t", 0) == 0


def test_uncommitted_partitions_under_earliest_weigh_their_whole_log() -> None:
    group = GroupSpec.of({"a": MemberSpec(frozenset({"t"})), "b": MemberSpec(frozenset({"t"}))})
    offsets = {
        ("t", 0): PartitionOffsets(100, 90),
        ("t", 1): PartitionOffsets(100, None, 0),
        ("t", 2): PartitionOffsets(100, 95),
    }
    topics = StaticTopicDescriber({"t": 3})
    latest = LAG.assign(group, topics, LagSnapshot(offsets, "latest"))
    earliest = LAG.assign(group, topics, LagSnapshot(offsets, "earliest"))
    assert latest == {"a": {"t": frozenset({0})}, "b": {"t": frozenset({1, 2})}}
    assert earliest == {"a": {"t": frozenset({1})}, "b": {"t": frozenset({0, 2})}}
