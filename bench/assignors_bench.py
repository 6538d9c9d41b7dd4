"""Assignor benchmark: time (median of repeated runs) and quality of every assignor at scale.

    python -m bench.assignors_bench [--quick] [--repeat N] [--issue-only] [--issue-repeat N]

First issue 15's table (`bench/assignors_issue.py`: the issue's exact inputs, Kafka's Java figures beside
each row), then the wider table below.

Shapes follow Kafka's ServerSideAssignorBenchmark: heterogeneous groups are 5 buckets of members, each
subscribed to its own fifth of the topics; "incremental" is a balanced group of N-1 members plus one new
member (N in total). Each run starts from a collected heap (gc.collect) with the collector enabled, and
inputs are built once outside the timed call, as a coordinator reuses member subscriptions. Not part of
the test suite: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from bench.assignors_issue import issue_rows, print_issue_table, seed_lag_case
from groupcoord.assignors.api import (
    GroupAssignment,
    GroupSpec,
    LagSnapshot,
    MemberSpec,
    PartitionOffsets,
    StaticTopicDescriber,
)
from groupcoord.assignors.classic import ClassicSubscription
from groupcoord.assignors.cooperative_sticky import CooperativeStickyAssignor
from groupcoord.assignors.lag import LagAssignor
from groupcoord.assignors.lag_sticky import LagStickyAssignor
from groupcoord.assignors.range import RangeAssignor
from groupcoord.assignors.uniform import UniformAssignor

BUCKETS = 5


@dataclass
class Row:
    case: str
    assignor: str
    mode: str
    ms: float
    max_parts: int
    min_parts: int
    lag_ratio: float | None = None
    moved: int | None = None
    total: int = 0


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times = []
    result = None
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3, result


def topic_names(n: int) -> list[str]:
    return [f"topic-{i:05d}" for i in range(n)]


def member_names(n: int) -> list[str]:
    return [f"member-{i:05d}" for i in range(n)]


def subscriptions(members: int, topics: list[str], kind: str) -> list[frozenset[str]]:
    """One frozenset object per member (as a coordinator builds them), equal within a bucket."""
    if kind == "homogeneous":
        return [frozenset(topics) for _ in range(members)]
    if kind == "buckets":
        per_topic = -(-len(topics) // BUCKETS)
        per_member = -(-members // BUCKETS)
        return [frozenset(topics[(i // per_member) * per_topic : (i // per_member + 1) * per_topic])
                for i in range(members)]
    # overlapping: 10 windows of topics, each member reads two neighbouring windows
    windows = 10
    per_topic = -(-len(topics) // windows)
    per_member = -(-members // windows)
    out = []
    for i in range(members):
        w = i // per_member
        out.append(frozenset(topics[w * per_topic : (w + 1) * per_topic]
                             + topics[((w + 1) % windows) * per_topic : ((w + 1) % windows + 1) * per_topic]))
    return out


def owners(out: Mapping[str, Mapping[str, frozenset[int]]]) -> dict[tuple[str, int], str]:
    return {(t, p): m for m, a in out.items() for t, ps in a.items() for p in ps}


def moved_count(before: GroupAssignment, after: GroupAssignment) -> int:
    old = owners(before)
    return sum(1 for tp, m in owners(after).items() if tp in old and old[tp] != m)


def part_counts(out: Mapping[str, Any]) -> list[int]:
    return [sum(len(ps) for ps in a.values()) if isinstance(a, Mapping) else len(a) for a in out.values()]


def lag_ratio(out: GroupAssignment, lags: Mapping[str, np.ndarray]) -> float:
    totals = [sum(int(lags[t][list(ps)].sum()) for t, ps in a.items()) for a in out.values()]
    mean = sum(totals) / len(totals)
    return max(totals) / mean if mean else 1.0


def server_rows(case: str, members: int, n_topics: int, per_topic: int, kind: str, repeat: int,
                assignors: list[Any]) -> list[Row]:
    topics = topic_names(n_topics)
    describer = StaticTopicDescriber(dict.fromkeys(topics, per_topic))
    names = member_names(members)
    subs = subscriptions(members, topics, kind)
    total = n_topics * per_topic
    rows = []
    for assignor in assignors:
        full = GroupSpec.of({m: MemberSpec(s) for m, s in zip(names, subs, strict=True)})
        ms, out = timed(partial(assignor.assign, full, describer), repeat)
        c = part_counts(out)
        rows.append(Row(case, assignor.name, "full", ms, max(c), min(c), total=total))
        # incremental: N-1 members with their balanced assignment, plus one new member
        base = GroupSpec.of({m: MemberSpec(s) for m, s in zip(names[:-1], subs[:-1], strict=True)})
        prev = assignor.assign(base, describer)
        joined = {m: MemberSpec(s, prev[m]) for m, s in zip(names[:-1], subs[:-1], strict=True)}
        joined["member-new"] = MemberSpec(subs[-2])
        inc = GroupSpec.of(joined)
        ms, out = timed(partial(assignor.assign, inc, describer), repeat)
        c = part_counts(out)
        rows.append(Row(case, assignor.name, "+1 member", ms, max(c), min(c), None,
                        moved_count(prev, out), total))
    return rows


def cooperative_rows(repeat: int) -> list[Row]:
    topics = {f"topic-{i:02d}": 210 for i in range(10)}  # 2,100 partitions
    names = member_names(2100)
    tnames = tuple(sorted(topics))
    coop = CooperativeStickyAssignor()
    fresh = {m: ClassicSubscription(tnames) for m in names}
    ms, out = timed(lambda: coop.assign(topics, fresh), repeat)
    c = part_counts(out)
    rows = [Row("2,100 x 2,100", coop.name, "fresh", ms, max(c), min(c), total=2100)]
    left = {m: ClassicSubscription(tnames, tuple(out[m]), 1) for m in names[1:]}
    ms, after = timed(lambda: coop.assign(topics, left), repeat)
    c = part_counts(after)
    moved = sum(1 for m in left for tp in after[m] if tp not in set(out[m]))
    rows.append(Row("2,100 x 2,100", coop.name, "1 member left", ms, max(c), min(c), None, moved, 2100))
    return rows


def lag_snapshot(topics: list[str], lags: np.ndarray) -> LagSnapshot:
    return LagSnapshot(
        {(t, p): PartitionOffsets(int(v) + 1_000, 1_000) for t, row in zip(topics, lags, strict=True)
         for p, v in enumerate(row.tolist())},
        "latest",
    )


def lag_rows(repeat: int, threshold: float) -> tuple[list[Row], dict[str, float]]:
    """1,000 members x 50 topics x 1,000 partitions. Lag is skewed (log-normal per partition times a
    log-normal per-topic scale); the shift multiplies every lag by a log-normal factor and makes 5% of
    partitions three times hotter. Each assignor's "lags shifted" run starts from its own fresh result."""
    rng = np.random.default_rng(5337)
    n_topics, per_topic, members = 50, 1_000, 1_000
    topics = topic_names(n_topics)
    describer = StaticTopicDescriber(dict.fromkeys(topics, per_topic))
    scale = rng.lognormal(0.0, 0.6, n_topics)[:, None]
    lag0 = np.round(rng.lognormal(6.0, 0.8, (n_topics, per_topic)) * scale).astype(np.int64)
    shift = rng.lognormal(0.0, 0.5, lag0.shape) * np.where(rng.random(lag0.shape) < 0.05, 3.0, 1.0)
    lag1 = np.round(lag0 * shift).astype(np.int64)
    snap0, snap1 = lag_snapshot(topics, lag0), lag_snapshot(topics, lag1)
    by0 = dict(zip(topics, lag0, strict=True))
    by1 = dict(zip(topics, lag1, strict=True))
    names = member_names(members)
    group = GroupSpec.of({m: MemberSpec(frozenset(topics)) for m in names})
    rows = []
    ratios: dict[str, float] = {}
    case = "1,000 x 50,000 skewed"
    for assignor in (LagAssignor(), LagStickyAssignor(move_threshold=threshold)):
        ms, out = timed(partial(assignor.assign, group, describer, snap0), repeat)
        c = part_counts(out)
        rows.append(Row(case, assignor.name, "fresh", ms, max(c), min(c), lag_ratio(out, by0), total=50_000))
        prior = GroupSpec.of({m: MemberSpec(frozenset(topics), out[m]) for m in names})
        ms, after = timed(partial(assignor.assign, prior, describer, snap1), repeat)
        c = part_counts(after)
        ratios[assignor.name] = lag_ratio(after, by1)
        rows.append(Row(case, assignor.name, "lags shifted", ms, max(c), min(c), ratios[assignor.name],
                        moved_count(out, after), 50_000))
    # what lag-sticky reaches with no prior assignment on the shifted lags: the best it knows
    rebuilt = LagStickyAssignor(move_threshold=threshold)
    ms, fresh = timed(partial(rebuilt.assign, group, describer, snap1), repeat)
    c = part_counts(fresh)
    ratios["rebuilt"] = lag_ratio(fresh, by1)
    rows.append(Row(case, rebuilt.name, "rebuilt", ms, max(c), min(c), ratios["rebuilt"], total=50_000))
    return rows, ratios


def print_table(rows: list[Row]) -> None:
    head = f"{'case':<28} {'assignor':<19} {'mode':<13} {'median ms':>10} {'max/min parts':>14} " \
           f"{'max/mean lag':>13} {'moved':>14}"
    print(head)
    print("-" * len(head))
    for r in rows:
        lag = f"{r.lag_ratio:.3f}" if r.lag_ratio is not None else "-"
        moved = f"{r.moved} ({100 * r.moved / r.total:.1f}%)" if r.moved is not None else "-"
        print(f"{r.case:<28} {r.assignor:<19} {r.mode:<13} {r.ms:>10.1f} "
              f"{f'{r.max_parts}/{r.min_parts}':>14} {lag:>13} {moved:>14}")


def find(rows: list[Row], case: str, assignor: str, mode: str) -> Row:
    return next(r for r in rows if r.case == case and r.assignor == assignor and r.mode == mode)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 repeats and skip the 10,000-member cases")
    parser.add_argument("--repeat", type=int, default=None, help="timed runs per row (default 7, quick 3)")
    parser.add_argument("--threshold", type=float, default=0.02, help="lag-sticky move_threshold")
    parser.add_argument("--issue-only", action="store_true", help="only issue 15's table (Java beside each row)")
    parser.add_argument("--issue-repeat", type=int, default=100, help="warm calls per row of issue 15's table")
    parser.add_argument("--plot", metavar="FILE.png", help="also draw the main table's medians as bars")
    args = parser.parse_args(argv)
    print("Issue 15's rows, the issue's exact inputs (see bench/assignors_issue.py):")
    print_issue_table(issue_rows(args.issue_repeat, seed_lag_case))
    print()
    if args.issue_only:
        return
    repeat = args.repeat or (3 if args.quick else 7)
    uniform, rng = UniformAssignor(), RangeAssignor()
    rows: list[Row] = []
    rows += server_rows("1,000 x 1,000 x 50 homog", 1000, 1000, 50, "homogeneous", repeat, [uniform, rng])
    rows += server_rows("1,000 x 1,000 x 50 hetero", 1000, 1000, 50, "buckets", repeat, [uniform, rng])
    rows += server_rows("1,000 x 1,000 x 50 overlap", 1000, 1000, 50, "overlapping", repeat, [uniform])
    if not args.quick:
        rows += server_rows("10,000 x 100 x 1,000 homog", 10_000, 100, 1000, "homogeneous", repeat,
                            [uniform, rng])
        rows += server_rows("10,000 x 100 x 1,000 hetero", 10_000, 100, 1000, "buckets", repeat,
                            [uniform, rng])
    rows += cooperative_rows(repeat)
    lrows, ratios = lag_rows(repeat, args.threshold)
    rows += lrows
    print_table(rows)
    if args.plot:
        from groupcoord import plots

        plots.bench_medians([(f"{r.case} | {r.assignor} | {r.mode}", r.ms) for r in rows],
                            "Server-side assignors: median time per assign() call", args.plot)
        print(f"plot written to {args.plot}")

    case = "1,000 x 1,000 x 50"
    shifted = find(rows, "1,000 x 50,000 skewed", "lag-sticky", "lags shifted")
    checks = [
        ("uniform heterogeneous 1,000 x 1,000 x 50 full < 20 ms",
         find(rows, f"{case} hetero", "uniform", "full").ms < 20),
        ("uniform homogeneous 1,000 x 1,000 x 50 incremental < 10 ms",
         find(rows, f"{case} homog", "uniform", "+1 member").ms < 10),
        ("cooperative-sticky 2,100 x 2,100 < 20 ms (fresh and after a leave)",
         max(r.ms for r in rows if r.assignor == "cooperative-sticky") < 20),
        ("lag 1,000 x 50,000 < 100 ms",
         max(r.ms for r in rows if r.assignor == "lag") < 100),
        (f"lag-sticky max/mean lag within 5% of lag's ({ratios['lag-sticky']:.3f} vs {ratios['lag']:.3f})",
         ratios["lag-sticky"] <= 1.05 * ratios["lag"]),
        (f"  ... and within 5% of a full lag-sticky rebuild ({ratios['lag-sticky']:.3f} vs "
         f"{ratios['rebuilt']:.3f})", ratios["lag-sticky"] <= 1.05 * ratios["rebuilt"]),
        ("lag-sticky moves < 10% of partitions when lags shift",
         shifted.moved is not None and shifted.moved < 0.1 * shifted.total),
    ]
    print()
    for text, ok in checks:
        print(f"{'PASS' if ok else 'MISS'}  {text}")


if __name__ == "__main__":
    main()
