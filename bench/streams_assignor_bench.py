"""Streams task assignor benchmark (issue 14): time of `assign_tasks` at 1,000 members x 10,000 tasks.

    python -m bench.streams_assignor_bench [--quick] [--members N] [--tasks N] [--repeat N]

Cases: a fresh group (no previous assignment), a steady group re-assigned with nothing changed, one member
joining a balanced group, and one member leaving it; each stateless, and stateful with one standby replica
(warm-ups on), and the stateful case again with `rack_aware_assignment_tags` over three zones. Members run two
per process. Median of `--repeat` runs from a collected heap; inputs are
built outside the timed call. Not part of the test suite: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections import Counter

from groupcoord.assignors.sticky_task import (
    StreamsAssignmentConfig,
    StreamsGroupAssignment,
    StreamsMemberSpec,
    SubtopologySpec,
    assign_tasks,
)


def members_from(result: StreamsGroupAssignment, process_of: dict[str, str],
                 tags: dict[str, dict[str, str]]) -> dict[str, StreamsMemberSpec]:
    return {
        m: StreamsMemberSpec(process_of[m], a.active, a.standby, a.warmup, client_tags=tags.get(m, {}))
        for m, a in result.items()
    }


def timed(members, subs, cfg, repeat: int) -> tuple[float, StreamsGroupAssignment]:
    times = []
    result: StreamsGroupAssignment = {}
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        result = assign_tasks(members, subs, cfg)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--members", type=int, default=1000)
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="100 members x 1,000 tasks")
    args = ap.parse_args()
    if args.quick:
        args.members, args.tasks = 100, 1000
    n, n_tasks = args.members, args.tasks
    n_subs = 10
    process_of = {f"m{i:05d}": f"p{i // 2:05d}" for i in range(n + 1)}
    rows = []
    zone = {m: {"zone": f"z{int(p[1:]) % 3}"} for m, p in process_of.items()}
    for stateful, standby, tags in ((False, 0, ()), (True, 1, ()), (True, 1, ("zone",))):
        subs = {f"{s}": SubtopologySpec(n_tasks // n_subs, stateful) for s in range(n_subs)}
        cfg = StreamsAssignmentConfig(num_standby_replicas=standby, rack_aware_assignment_tags=tags)
        label = ("stateful, 1 standby" + (", 3 zones" if tags else "")) if stateful else "stateless"
        fresh = {m: StreamsMemberSpec(process_of[m], client_tags=zone[m] if tags else {})
                 for m in list(process_of)[:n]}
        ms, first = timed(fresh, subs, cfg, args.repeat)
        rows.append(("fresh", label, ms, first))
        steady = members_from(first, process_of, zone if tags else {})
        ms, again = timed(steady, subs, cfg, args.repeat)
        rows.append(("steady (no change)", label, ms, again))
        joined = steady | {f"m{n:05d}": StreamsMemberSpec(process_of[f"m{n:05d}"],
                                                          client_tags=zone[f"m{n:05d}"] if tags else {})}
        ms, grown = timed(joined, subs, cfg, args.repeat)
        rows.append(("one member joins", label, ms, grown))
        left = {m: s for m, s in steady.items() if m != "m00000"}
        ms, shrunk = timed(left, subs, cfg, args.repeat)
        rows.append(("one member leaves", label, ms, shrunk))
    base = {r[1]: r[3] for r in rows if r[0] == "fresh"}
    print(f"sticky task assignor, {n} members (2 per process), {n_tasks} tasks, median of {args.repeat}")
    print(f"{'case':<20} {'topology':<31} {'ms':>9} {'active/member':>14} {'standby':>8} {'warmup':>7} {'moved':>6}")
    for case, label, ms, result in rows:
        act = [len(a.active) for a in result.values()]
        standbys = sum(len(a.standby) for a in result.values())
        warmups = sum(len(a.warmup) for a in result.values())
        prev = base[label]
        owner = {t: m for m, a in prev.items() for t in a.active}
        moved = sum(1 for m, a in result.items() for t in a.active if owner.get(t) != m)
        counts = Counter(act)
        spread = f"{min(act)}-{max(act)}" if len(counts) > 1 else f"{act[0]}"
        print(f"{case:<20} {label:<31} {ms:>9.1f} {spread:>14} {standbys:>8} {warmups:>7} {moved:>6}")


if __name__ == "__main__":
    main()
