"""The shared machinery behind the assignors: greedy rounds and class-level balancing."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.assignors._greedy import _greedy_heap, greedy_rounds
from groupcoord.assignors.api import GroupSpec, MemberSpec, StaticTopicDescriber
from groupcoord.assignors.uniform import UniformAssignor
from tests.assignors.strategies import check_balanced, check_valid, with_assignment


@settings(max_examples=100, deadline=None)
@given(
    lags=st.lists(st.integers(0, 50), max_size=40),
    start=st.lists(st.integers(0, 100), min_size=1, max_size=6),
    capped=st.booleans(),
)
def test_rounds_and_heap_place_partitions_identically(lags: list[int], start: list[int], capped: bool) -> None:
    n = len(start)
    part_lags = np.asarray(sorted(lags, reverse=True), dtype=np.int64)
    caps = None
    if capped:
        caps = np.full(n, len(lags) // n, dtype=np.int64)
        caps[: len(lags) % n] += 1
    lag_a = np.asarray(start, dtype=np.float64)
    lag_b = lag_a.copy()
    rounds = greedy_rounds(part_lags, lag_a, caps, parts=np.arange(len(lags)), reorder=lambda s, p: list(p))
    heap = _greedy_heap(part_lags, lag_b, caps)
    assert rounds.tolist() == heap.tolist()
    assert lag_a.tolist() == lag_b.tolist()


def test_many_distinct_subscriptions_stay_balanced_and_stable() -> None:
    topics = [f"t{i}" for i in range(8)]
    subsets = [frozenset(c) for r in (2, 3, 4) for c in itertools.combinations(topics, r)][:90]
    group = GroupSpec.of({f"m{i:03d}": MemberSpec(s) for i, s in enumerate(subsets)})  # > 62 classes
    describer = StaticTopicDescriber({t: 7 + i for i, t in enumerate(topics)})
    uniform = UniformAssignor()
    out = uniform.assign(group, describer)
    check_valid(group, describer, out)
    check_balanced(group, out)
    assert uniform.assign(with_assignment(group, out), describer) == out
