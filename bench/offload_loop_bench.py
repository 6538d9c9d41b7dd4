"""What one offloaded assignor run costs the event loop, piece by piece, for a large churning group.

    python -m bench.offload_loop_bench [--members 10000] [--topics 1] [--partitions 20000] [--repeat 5]

With offload to processes, the assignor itself runs in another interpreter, but the coordinator still
snapshots the group for it, pickles the input on its event loop (whole, in slices, for a group no worker
keeps; else only what changed since the keeping worker's copy, `run_cache`), loads the result and writes
the records of the members whose target changed. Any of those that grows
with the group's size rather than with what moved stalls every other group's heartbeats: this is the
work behind `bench.heartbeat_bench`'s "p99/quiet" column when a 10,000-member group rebalances at
assignment interval 0.

One round = one member leaves and one joins a stable group (uniform, offload on), as the heartbeat
bench's churn does; the run is executed in this process through the executor's own process-side entry
point (`run_compact`), so each side's work is timed apart. Times are this thread's CPU ms, medians.
Not part of the test suite: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import gc
import pickle
import statistics
import time
from collections.abc import Callable
from typing import Any, TypeVar

from bench.target_bench import GID, stable_group
from groupcoord.coordinator.core.config import BrokerConfig
from groupcoord.coordinator.core.messages import ConsumerGroupHeartbeatRequest
from groupcoord.coordinator.core.modern.assignor_runs import AssignorCompletion, AssignorRun
from groupcoord.coordinator.core.results import Result
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from groupcoord.coordinator.runtime.executor import compact_run, load_outcome, run_compact, run_sliced
from groupcoord.coordinator.runtime.run_cache import Holdings, Keep, RunCache, keep_for
from groupcoord.coordinator.runtime.sliced_run import slice_run

HOLDINGS = Holdings(1)  # the coordinator's side: worker 0 keeps the group after the first round
KEPT = RunCache()  # worker 0's side


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.thread_time()
    out = fn()
    return out, (time.thread_time() - start) * 1e3


R = TypeVar("R", bound=Result[Any])


def _applied(shard: GroupCoordinatorShard, result: R) -> R:
    """`result` once applied, as the runtime applies an operation's result after its handler."""
    shard.apply(result)
    return result


def one_round(shard: GroupCoordinatorShard, k: int, now: int) -> dict[str, float]:
    group = shard.groups[GID]
    names = tuple(sorted(t.name for t in shard.metadata.by_id.values()))
    victim = next(iter(group.members.values()))
    _, leave_ms = _timed(lambda: _applied(shard, shard.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
        GID, victim.member_id, -1), now)))
    group.inflight = None  # the leave's own run is superseded: measure the join's
    res, join_ms = _timed(lambda: _applied(shard, shard.consumer_group_heartbeat(ConsumerGroupHeartbeatRequest(
        GID, "", 0, rebalance_timeout_ms=60000, subscribed_topic_names=names, topic_partitions={}), now)))
    runs = [t for t in res.tasks if isinstance(t, AssignorRun)]
    assert runs, "the join started no offloaded run"
    run = runs[-1]
    payload, send_ms = _timed(lambda: pickle.dumps(slice_run(compact_run(run)), protocol=pickle.HIGHEST_PROTOCOL))
    outcome, child_ms = _timed(lambda: run_sliced(pickle.loads(payload)))
    compact = compact_run(run)
    cached, changes_ms = _timed(lambda: HOLDINGS.cached_run(GID, compact))
    keep = keep_for(compact)
    assert keep is not None, "the group is kept by no worker: too small, or no lineage"
    HOLDINGS.keep(GID, 0, *keep)
    if cached is None:  # the first round: the worker keeps the whole run
        KEPT.resolve(pickle.loads(pickle.dumps(Keep(GID, keep[0], keep[1], slice_run(compact)))))
        changes_bytes, child_kept_ms = len(payload), child_ms
    else:
        body = pickle.dumps(cached[1], protocol=pickle.HIGHEST_PROTOCOL)
        changes_bytes = len(body)
        _, child_kept_ms = _timed(lambda: run_compact(KEPT.resolve(pickle.loads(body))))  # type: ignore[arg-type]
    back = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
    loaded, load_ms = _timed(lambda: load_outcome(pickle.loads(back), run))
    res2, apply_ms = _timed(lambda: _applied(shard, shard.on_assignment_complete(
        AssignorCompletion(GID, run.run_id, loaded.assignment, loaded.error), now)))
    records = sum(1 for r in res2.records if type(r).__name__ == "ConsumerGroupTargetAssignmentMember")
    return {"leave heartbeat": leave_ms, "join heartbeat (spec)": join_ms, "send whole (in slices)": send_ms,
            "send changes (kept group)": changes_ms, "load result": load_ms, "apply (records)": apply_ms,
            "loop total, sent whole": leave_ms + join_ms + send_ms + load_ms + apply_ms,
            "loop total, sent changes": leave_ms + join_ms + changes_ms + load_ms + apply_ms,
            "child (assignor), whole": child_ms, "child (assignor), changes": child_kept_ms,
            "input MB, whole": len(payload) / 1e6, "input MB, changes": changes_bytes / 1e6,
            "result MB": len(back) / 1e6, "target records": records}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--members", type=int, default=10_000)
    p.add_argument("--topics", type=int, default=1)
    p.add_argument("--partitions", type=int, default=20_000, help="partitions per topic")
    p.add_argument("--repeat", type=int, default=5, help="rounds (median reported; the first is dropped)")
    p.add_argument("--quick", action="store_true", help="2,000 members x 4,000 partitions, 3 rounds")
    args = p.parse_args(argv)
    if args.quick:
        args.members, args.partitions, args.repeat = 2000, 4000, 3
    shard = stable_group(args.members, args.topics, args.partitions)
    shard.config = BrokerConfig.from_mapping({"group.consumer.assignor.offload.enable": True,
                                              "group.consumer.assignment.interval.ms": 0})
    rounds = []
    gc.collect()
    for k in range(args.repeat + 1):
        rounds.append(one_round(shard, k, 10 + k))
    rounds = rounds[1:]
    print(f"one leave + one join, {args.members:,} members x {args.topics} topic(s) x {args.partitions:,} "
          f"partitions, uniform, offloaded (CPU ms of this thread, median of {len(rounds)} rounds)")
    for key in rounds[0]:
        v = statistics.median(r[key] for r in rounds)
        print(f"  {key:<28}{v:10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
