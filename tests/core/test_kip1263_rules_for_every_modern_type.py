"""KIP-1263's rules hold, and are counted, alike for consumer, share and streams groups (one copy of them:
`modern/group.py`): an offloaded run is counted and guards the group, a change while it is in flight is
skipped and counted, a stale completion is discarded and counted, and every type's completion comes back
through the shard's one entry point."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from groupcoord.coordinator.core.modern.assignor_runs import AssignorRun
from groupcoord.coordinator.core.results import Result
from groupcoord.coordinator.core.share.handlers import heartbeat as share_heartbeat
from groupcoord.coordinator.core.share.records import ShareGroupHeartbeatRequest
from groupcoord.coordinator.core.streams import handlers as streams_shard
from groupcoord.coordinator.core.streams.group import StreamsHeartbeatRequest
from groupcoord.coordinator.core.streams.messages import StreamsAssignorRun
from groupcoord.coordinator.core.streams.records import NO_TASKS
from tests.core.context import CoreContext, as_in_a_worker_process
from tests.core.streams_context import word_count

TOPICS = {"lines": 4, "app-words-repartition": 4, "app-counts-changelog": 4, "foo": 2}
OFFLOAD = {f"group.{kind}.assignor.offload.enable": True for kind in ("consumer", "share", "streams")} | {
    f"group.{kind}.assignment.interval.ms": 0 for kind in ("consumer", "share", "streams")} | {
    "group.streams.initial.rebalance.delay.ms": 0}


def consumer_join(c: CoreContext, member: str) -> Result[Any]:
    return c.shard.consumer_group_heartbeat(c.request("g", rebalance_timeout_ms=5000, subscribed_topic_names=("foo",),
                                                      topic_partitions={}), c.now)


def share_join(c: CoreContext, member: str) -> Result[Any]:
    return share_heartbeat(c.shard, ShareGroupHeartbeatRequest("g", "", 0, subscribed_topic_names=("foo",)), c.now)


def streams_join(c: CoreContext, member: str) -> Result[Any]:
    req = StreamsHeartbeatRequest("g", member, 0, topology=word_count(), process_id=f"p-{member}",
                                  rebalance_timeout_ms=1000, active_tasks=NO_TASKS, standby_tasks=NO_TASKS,
                                  warmup_tasks=NO_TASKS)
    return streams_shard.heartbeat(c.shard, req, c.now)


JOINS: dict[str, Callable[[CoreContext, str], Result[Any]]] = {
    "consumer": consumer_join, "share": share_join, "streams": streams_join}


def runs_of(result: Result[Any]) -> list[Any]:
    return [t for t in result.tasks if isinstance(t, AssignorRun | StreamsAssignorRun)]


def completion(run: Any) -> Any:
    if isinstance(run, StreamsAssignorRun):
        return run.run()
    from groupcoord.coordinator.core.modern.assignor_runs import AssignorCompletion
    return AssignorCompletion(run.group_id, run.run_id, as_in_a_worker_process(run))


@pytest.mark.parametrize("kind", JOINS)
def test_an_offloaded_run_is_counted_guards_the_group_and_comes_back_through_the_shard(kind: str) -> None:
    c = CoreContext(TOPICS, auto_complete_runs=False, overrides=OFFLOAD)
    stats = c.shard.stats
    first = JOINS[kind](c, "m1")
    c.record(first)
    runs = runs_of(first)
    assert len(runs) == 1 and stats.assignor_runs_offloaded == 1 and stats.assignor_runs_sync == 0

    second = JOINS[kind](c, "m2")  # a new member bumps the epoch while the run is in flight
    c.record(second)
    assert runs_of(second) == [] and stats.assignor_skipped_inflight >= 1

    done = c.shard.on_assignment_complete(completion(runs[0]), c.now)
    c.record(done)
    assert done.records, "the run's target is written"
    assert stats.assignor_results_discarded == 0

    again = c.shard.on_assignment_complete(completion(runs[0]), c.now)  # the same run again: stale
    assert again.records == [] and stats.assignor_results_discarded == 1
