"""Issue 15's table: groupcoord's assignors on the issue's exact inputs, Kafka's Java figures beside them.

Inputs as the issue defines them: topics `topic-0..T-1` with equal partition counts, members
`member0..N-1`, no racks; heterogeneous = 5 buckets, bucket b holds members [b*ceil(N/5), ...) subscribed
to topics [b*ceil(T/5), ...); "one member joins" = assign N-1 members, feed the result back as the current
assignment, add `newMember` subscribed to all topics (or the last bucket's). Cooperative-sticky: one topic
of 2,100 partitions, 2,100 members; "after a leave" drops member0 from the fresh result, at generation 1.
Each row is the median of warm calls (two untimed calls first, the heap collected once before the timed
calls), as wall time and as this thread's CPU time: on a shared machine the CPU time is the fair comparison.
The "cold" column repeats the CPU median with a full collection before every call (cold CPU caches). The Java
figures are the issue's (Kafka's assignors, medians of 100 warm calls on this 2-core machine).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from groupcoord.assignors.api import GroupSpec, MemberSpec, StaticTopicDescriber
from groupcoord.assignors.classic import ClassicSubscription
from groupcoord.assignors.cooperative_sticky import CooperativeStickyAssignor
from groupcoord.assignors.lag import LagAssignor
from groupcoord.assignors.range import RangeAssignor
from groupcoord.assignors.uniform import UniformAssignor

BUCKETS = 5


@dataclass
class IssueRow:
    case: str
    java_ms: float
    wall_ms: float
    cpu_ms: float
    cold_cpu_ms: float

    @property
    def ratio(self) -> float:
        """groupcoord CPU time / Java: below 1 is faster than Java."""
        return self.cpu_ms / self.java_ms


def warm_median(fn: Callable[[], Any], repeat: int) -> tuple[float, float, float]:
    """(wall, CPU, cold CPU) medians of `repeat` warm calls (two untimed calls first). The heap is
    collected once before the timed calls; the cold run collects before every call instead, which leaves
    the CPU caches cold (a full collection walks every object): a harsher protocol than warm calls."""
    fn()
    fn()
    wall: list[float] = []
    cpu: list[float] = []
    cold: list[float] = []
    gc.collect()
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.thread_time()
        fn()
        cpu.append(time.thread_time() - c0)
        wall.append(time.perf_counter() - w0)
    for _ in range(repeat):
        gc.collect()
        c0 = time.thread_time()
        fn()
        cold.append(time.thread_time() - c0)
    return statistics.median(wall) * 1e3, statistics.median(cpu) * 1e3, statistics.median(cold) * 1e3


def issue_group(
    n: int, t: int, per_topic: int, buckets: bool
) -> tuple[StaticTopicDescriber, dict[str, frozenset[str]]]:
    topics = [f"topic-{i}" for i in range(t)]
    describer = StaticTopicDescriber(dict.fromkeys(topics, per_topic))
    if not buckets:
        every = frozenset(topics)
        return describer, {f"member{i}": every for i in range(n)}
    per_m, per_t = -(-n // BUCKETS), -(-t // BUCKETS)
    subs = [frozenset(topics[b * per_t:(b + 1) * per_t]) for b in range(BUCKETS)]
    return describer, {f"member{i}": subs[i // per_m] for i in range(n)}


def fresh_and_join(assignor: Any, n: int, t: int, per_topic: int, buckets: bool,
                   repeat: int) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    describer, subs = issue_group(n, t, per_topic, buckets)
    full = GroupSpec.of({m: MemberSpec(s) for m, s in subs.items()})
    fresh = warm_median(lambda: assignor.assign(full, describer), repeat)
    first = dict(list(subs.items())[:-1])
    prev = assignor.assign(GroupSpec.of({m: MemberSpec(s) for m, s in first.items()}), describer)
    joined = {m: MemberSpec(s, prev[m]) for m, s in first.items()}
    joined["newMember"] = MemberSpec(subs[f"member{n - 1}"])  # all topics, or the last bucket's
    inc = GroupSpec.of(joined)
    return fresh, warm_median(lambda: assignor.assign(inc, describer), repeat)


def issue_rows(repeat: int, lag_case: Callable[[], tuple[Any, Any, Any]]) -> list[IssueRow]:
    """`lag_case()` gives the seed's lag input (group, describer, lag snapshot)."""
    uniform, rng = UniformAssignor(), RangeAssignor()
    rows: list[IssueRow] = []
    f, j = fresh_and_join(uniform, 1000, 1000, 50, False, repeat)
    rows.append(IssueRow("uniform homogeneous, fresh: 1,000 x 1,000 x 50", 1.29, *f))
    rows.append(IssueRow("uniform homogeneous, one member joins, same size", 0.32, *j))
    _, j = fresh_and_join(uniform, 10_000, 100, 1000, False, max(5, repeat // 4))
    rows.append(IssueRow("uniform homogeneous, one joins: 10,000 x 100 x 1,000", 8.5, *j))
    f, j = fresh_and_join(uniform, 1000, 1000, 50, True, repeat)
    rows.append(IssueRow("uniform heterogeneous (5 buckets), fresh", 21.3, *f))
    rows.append(IssueRow("uniform heterogeneous (5 buckets), one joins", 22.3, *j))
    describer, subs = issue_group(1000, 1000, 50, False)
    full = GroupSpec.of({m: MemberSpec(s) for m, s in subs.items()})
    rows.append(IssueRow("range homogeneous, fresh", 4.2, *warm_median(lambda: rng.assign(full, describer), repeat)))
    coop = CooperativeStickyAssignor()
    topics = {"topic-0": 2100}
    members = {f"member{i}": ClassicSubscription(("topic-0",)) for i in range(2100)}
    rows.append(IssueRow("cooperative-sticky 2,100 x 2,100, fresh", 0.52,
                         *warm_median(lambda: coop.assign(topics, members), repeat)))
    out = coop.assign(topics, members)
    left = {m: ClassicSubscription(("topic-0",), tuple(out[m]), 1) for m in members if m != "member0"}
    rows.append(IssueRow("cooperative-sticky 2,100 x 2,100, after a leave", 1.00,
                         *warm_median(lambda: coop.assign(topics, left), repeat)))
    group, lag_describer, snap = lag_case()
    lag = LagAssignor()
    rows.append(IssueRow("lag (the seed's), 1,000 x 50,000", 576.0,
                         *warm_median(lambda: lag.assign(group, lag_describer, snap), max(5, repeat // 4))))
    return rows


def print_issue_table(rows: list[IssueRow]) -> None:
    width = max(len(r.case) for r in rows)
    head = f"{'case':<{width}}  {'Kafka Java':>10}  {'wall ms':>8}  {'cpu ms':>8}  {'cpu / Java':>10}  " \
           f"{'verdict':<11}  {'cold cpu ms':>11}"
    print(head)
    print("-" * len(head))
    for r in rows:
        verdict = "at or below" if r.ratio <= 1 else "ABOVE"
        print(f"{r.case:<{width}}  {r.java_ms:>10.2f}  {r.wall_ms:>8.2f}  {r.cpu_ms:>8.2f}  "
              f"{r.ratio:>9.2f}x  {verdict:<11}  {r.cold_cpu_ms:>11.2f}")


def seed_lag_case() -> tuple[Any, Any, Any]:
    """The lag assignor's seed input: 1,000 members, 50 topics x 1,000 partitions, skewed lag."""
    from bench.assignors_bench import lag_snapshot, topic_names

    rng = np.random.default_rng(5337)
    topics = topic_names(50)
    describer = StaticTopicDescriber(dict.fromkeys(topics, 1000))
    scale = rng.lognormal(0.0, 0.6, 50)[:, None]
    lags = np.round(rng.lognormal(6.0, 0.8, (50, 1000)) * scale).astype(np.int64)
    group = GroupSpec.of({f"member-{i:05d}": MemberSpec(frozenset(topics)) for i in range(1000)})
    return group, describer, lag_snapshot(topics, lags)
