"""`lag-sticky`: total lag balanced across topics, counts balanced, and few moves."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from groupcoord.assignors.api import GroupSpec, LagSnapshot, MemberSpec, PartitionOffsets, StaticTopicDescriber
from groupcoord.assignors.lag import LagAssignor
from groupcoord.assignors.lag_sticky import LagStickyAssignor
from tests.assignors.strategies import (
    check_balanced,
    check_valid,
    counts,
    moved,
    scenarios,
    with_assignment,
)

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LAG_STICKY = LagStickyAssignor()
Scenario = tuple[GroupSpec, StaticTopicDescriber, LagSnapshot]


def member_lags(out: dict, lag: LagSnapshot) -> dict[str, int]:
    return {m: sum(lag.lag(t, p) for t, ps in a.items() for p in ps) for m, a in out.items()}


def snapshot(lags: dict[tuple[str, int], int]) -> LagSnapshot:
    return LagSnapshot({tp: PartitionOffsets(v, 0) for tp, v in lags.items()})


@SETTINGS
@given(scenario=scenarios())
def test_counts_are_balanced_as_under_uniform(scenario: Scenario) -> None:
    group, topics, lag = scenario
    out = LAG_STICKY.assign(group, topics, lag)
    check_valid(group, topics, out)
    check_balanced(group, out)


@SETTINGS
@given(scenario=scenarios())
def test_same_group_and_lags_keep_the_assignment(scenario: Scenario) -> None:
    group, topics, lag = scenario
    first = LAG_STICKY.assign(group, topics, lag)
    assert LAG_STICKY.assign(with_assignment(group, first), topics, lag) == first


@SETTINGS
@given(scenario=scenarios(with_racks=False))
def test_lags_scaled_uniformly_move_nothing(scenario: Scenario) -> None:
    group, topics, lag = scenario
    first = LAG_STICKY.assign(group, topics, lag)
    doubled = LagSnapshot(
        {
            tp: PartitionOffsets(2 * o.end_offset, None if o.committed_offset is None else 2 * o.committed_offset,
                                 2 * o.log_start_offset)
            for tp, o in lag.offsets.items()
        },
        lag.auto_offset_reset,
    )
    assert LAG_STICKY.assign(with_assignment(group, first), topics, doubled) == first


def test_single_partition_topics_are_spread_instead_of_piled_on_one_member() -> None:
    topics = StaticTopicDescriber({f"t{i}": 1 for i in range(8)})
    group = GroupSpec.of({m: MemberSpec(frozenset(f"t{i}" for i in range(8))) for m in ("a", "b", "c", "d")})
    lag = snapshot({(f"t{i}", 0): 100 * (i + 1) for i in range(8)})
    piled = LagAssignor().assign(group, topics, lag)
    assert counts(piled) == {"a": 8, "b": 0, "c": 0, "d": 0}  # the seed's per-topic state
    spread = LAG_STICKY.assign(group, topics, lag)
    assert set(counts(spread).values()) == {2}
    assert sorted(member_lags(spread, lag).values()) == [900, 900, 900, 900]


def test_a_lag_shift_is_fixed_with_few_moves() -> None:
    names = [f"t{i}" for i in range(4)]
    topics = StaticTopicDescriber(dict.fromkeys(names, 10))
    group = GroupSpec.of({f"m{i}": MemberSpec(frozenset(names)) for i in range(4)})
    before = {(t, p): 100 for t in names for p in range(10)}
    first = LAG_STICKY.assign(group, topics, snapshot(before))
    hot = dict(before)
    for p in range(10):  # one member's partitions of t0 heat up
        hot[("t0", p)] = 1000 if p in first["m0"].get("t0", ()) else 100
    second = LAG_STICKY.assign(with_assignment(group, first), topics, snapshot(hot))
    assert sorted(member_lags(first, snapshot(hot)).values()) == [1000, 1000, 1000, 3700]
    # best possible: one hot partition (1000) per member plus nine cold ones, by two swaps
    assert sorted(member_lags(second, snapshot(hot)).values()) == [1000, 1900, 1900, 1900]
    assert moved(first, second) == 4


def test_a_higher_threshold_moves_fewer_partitions() -> None:
    names = [f"t{i}" for i in range(5)]
    topics = StaticTopicDescriber(dict.fromkeys(names, 20))
    group = GroupSpec.of({f"m{i}": MemberSpec(frozenset(names)) for i in range(10)})
    base = {(t, p): 100 + 7 * p for t in names for p in range(20)}
    first = LAG_STICKY.assign(group, topics, snapshot(base))
    shifted = {tp: v * (3 if tp[1] % 4 == 0 else 1) for tp, v in base.items()}
    prior = with_assignment(group, first)
    tight = LagStickyAssignor(move_threshold=0.01).assign(prior, topics, snapshot(shifted))
    loose = LagStickyAssignor(move_threshold=0.2).assign(prior, topics, snapshot(shifted))
    assert moved(first, loose) <= moved(first, tight)


def test_threshold_must_be_positive() -> None:
    for bad in (0.0, -0.1):
        with pytest.raises(ValueError):
            LagStickyAssignor(move_threshold=bad)
