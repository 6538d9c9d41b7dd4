"""Lag-aware assignors get a snapshot of end offsets (from the injected, non-blocking lag provider) and the
group's committed offsets; the others get none."""

from __future__ import annotations

from collections.abc import Mapping

from groupcoord.assignors.api import PartitionOffsets
from groupcoord.coordinator.core.messages import CommitPartition, OffsetCommitRequest
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from tests.core.context import CoreContext, tid


class FixedLag:
    def __init__(self, offsets: Mapping[tuple[str, int], tuple[int, int]]) -> None:
        self._offsets = offsets
        self.asked: list[list[tuple[str, int]]] = []

    def offsets(self, topic_partitions: list[tuple[str, int]]) -> Mapping[tuple[str, int], tuple[int, int]]:
        self.asked.append(topic_partitions)
        return {tp: o for tp, o in self._offsets.items() if tp in topic_partitions}


def lag_context(provider: FixedLag | None) -> CoreContext:
    ctx = CoreContext({"foo": 2}, auto_complete_runs=False, group_consumer_assignor_offload_enable=True,
                      group_consumer_assignors="uniform,lag")
    ctx.shard = GroupCoordinatorShard(ctx.config, lambda: "unused", ctx.image, lag_provider=provider)
    return ctx


def test_lag_aware_assignor_gets_end_offsets_and_committed_offsets() -> None:
    provider = FixedLag({("foo", 0): (10, 500), ("foo", 1): (0, 80)})
    ctx = lag_context(provider)
    ctx.apply(ctx.shard.offset_commit(OffsetCommitRequest("grp", "", -1, [CommitPartition("foo", 0, 450)]), ctx.now))
    ctx.apply(ctx.shard.alter_group_configs("grp", {"consumer.auto.offset.reset": "earliest"}, False, ctx.now))
    ctx.join("a", subscribed_topic_names=("foo",), server_assignor="lag")
    [run] = ctx.pending_runs
    assert run.assignor_name == "lag" and run.lag is not None
    assert provider.asked == [[("foo", 0), ("foo", 1)]]
    assert run.lag.auto_offset_reset == "earliest"
    assert run.lag.offsets[(tid("foo"), 0)] == PartitionOffsets(end_offset=500, committed_offset=450,
                                                                 log_start_offset=10)
    assert run.lag.offsets[(tid("foo"), 1)] == PartitionOffsets(end_offset=80, committed_offset=None)
    assert run.lag.lag(tid("foo"), 0) == 50 and run.lag.lag(tid("foo"), 1) == 80


def test_without_a_lag_provider_committed_offsets_still_reach_the_lag_aware_assignor() -> None:
    ctx = lag_context(None)
    ctx.apply(ctx.shard.offset_commit(OffsetCommitRequest("grp", "", -1, [CommitPartition("foo", 1, 7)]), ctx.now))
    ctx.join("a", subscribed_topic_names=("foo",), server_assignor="lag")
    [run] = ctx.pending_runs
    assert run.lag is not None and set(run.lag.offsets) == {(tid("foo"), 1)}


def test_other_assignors_get_no_lag_snapshot() -> None:
    provider = FixedLag({("foo", 0): (0, 5)})
    ctx = lag_context(provider)
    ctx.join("a", subscribed_topic_names=("foo",))
    [run] = ctx.pending_runs
    assert run.assignor_name == "uniform" and run.lag is None and provider.asked == []
