"""KIP-1263 assignment batching: recompute only once assignment.interval.ms has passed since the previous
computation *finished*; the next heartbeat of any member triggers it; the group may override the interval."""

from __future__ import annotations

from typing import Any

from groupcoord.coordinator.core.consumer.group import ConsumerGroupState
from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.records import ConsumerGroupTargetAssignmentMetadata
from tests.core.context import CoreContext


def batched(interval_ms: int = 1000, **config: Any) -> CoreContext:
    return CoreContext({"foo": 6}, group_consumer_assignment_interval_ms=interval_ms, **config)


def test_new_group_starts_at_epoch_2_and_members_get_the_empty_assignment_at_epoch_1_until_computed() -> None:
    ctx = batched(auto_complete_runs=False, group_consumer_assignor_offload_enable=True)
    r = ctx.join("a", subscribed_topic_names=("foo",))
    assert r.error_code is Errors.NONE
    assert r.member_epoch == 1 and r.assignment == {}
    assert ctx.group().group_epoch == 2 and ctx.group().target_assignment_epoch == 0
    r = ctx.join("b", subscribed_topic_names=("foo",))
    assert r.member_epoch == 1 and r.assignment == {}
    ctx.complete_runs()
    assert ctx.group().target_assignment_epoch == 2  # the first computed assignment is at epoch 2


def test_first_computation_runs_at_once_when_there_is_no_previous_timestamp() -> None:
    ctx = batched(10_000)
    r = ctx.join("a", subscribed_topic_names=("foo",))
    assert r.member_epoch == 2 and r.assignment == ctx.tps(foo=range(6))
    assert ctx.group().assignment_timestamp_ms == ctx.now


def test_no_recompute_until_the_interval_has_passed_since_the_previous_computation() -> None:
    ctx = batched(1000)
    ctx.join("a", subscribed_topic_names=("foo",))
    computed_at = ctx.now
    ctx.advance(500)
    r = ctx.join("b", subscribed_topic_names=("foo",))
    group = ctx.group()
    assert group.group_epoch == 3 and group.target_assignment_epoch == 2
    assert group.state() is ConsumerGroupState.ASSIGNING
    assert r.member_epoch == 2 and r.assignment == {}  # b is not in the target yet
    ctx.advance(499)
    ctx.heartbeat(member_id="a", member_epoch=2)
    assert group.target_assignment_epoch == 2 and group.assignment_timestamp_ms == computed_at
    assert ctx.shard.stats.assignor_skipped_interval == 2


def test_next_heartbeat_of_any_member_recomputes_once_the_interval_elapsed() -> None:
    ctx = batched(1000)
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.advance(500)
    ctx.join("b", subscribed_topic_names=("foo",))
    ctx.advance(500)  # exactly the interval
    r = ctx.heartbeat(member_id="a", member_epoch=2, topic_partitions=ctx.tps(foo=range(6)))
    group = ctx.group()
    assert group.target_assignment_epoch == 3 and group.assignment_timestamp_ms == ctx.now
    assert set(group.target_assignment["b"].get(ctx.tid("foo"), ())) != set()
    assert r.member_epoch == 2 and r.assignment is not None  # a now learns it must revoke
    assert ctx.shard.stats.assignor_runs_sync == 2


def test_a_heartbeat_of_a_member_unaffected_by_the_change_also_triggers_the_computation() -> None:
    ctx = CoreContext({"foo": 6, "bar": 3}, group_consumer_assignment_interval_ms=1000)
    ctx.join("a", subscribed_topic_names=("bar",))
    ctx.join("c", subscribed_topic_names=("foo",))  # no computation: within the interval
    assert ctx.group().target_assignment_epoch == 2
    ctx.advance(1000)
    ctx.heartbeat(member_id="a", member_epoch=2)
    assert ctx.group().target_assignment_epoch == 3
    assert ctx.ack("c").assignment == ctx.tps(foo=range(6))


def test_interval_counts_from_when_the_previous_offloaded_computation_finished() -> None:
    ctx = batched(1000, auto_complete_runs=False, group_consumer_assignor_offload_enable=True)
    ctx.join("a", subscribed_topic_names=("foo",))
    started = ctx.now
    ctx.advance(700)
    ctx.complete_runs()  # finishes 700 ms after it started
    assert ctx.group().assignment_timestamp_ms == started + 700
    ctx.join("b", subscribed_topic_names=("foo",))
    ctx.advance(999)  # 1,699 ms after the start, 999 after the finish
    ctx.ack("a")
    assert ctx.pending_runs == []
    ctx.advance(1)
    ctx.ack("a")
    assert len(ctx.pending_runs) == 1 and ctx.pending_runs[0].assignment_epoch == 3


def test_target_metadata_record_carries_the_finish_time() -> None:
    ctx = batched(1000)
    ctx.join("a", subscribed_topic_names=("foo",))
    assert ConsumerGroupTargetAssignmentMetadata("grp", 2, ctx.now) in ctx.records


def test_interval_zero_recomputes_on_every_epoch_bump() -> None:
    ctx = batched(0)
    for i, member in enumerate("abcd"):
        ctx.join(member, subscribed_topic_names=("foo",))
        assert ctx.group().target_assignment_epoch == 2 + i
    assert ctx.shard.stats.assignor_skipped_interval == 0


def test_group_interval_override_replaces_the_brokers() -> None:
    ctx = batched(0)
    ctx.apply(ctx.shard.alter_group_configs("grp", {"consumer.assignment.interval.ms": "5000"}, False, ctx.now))
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.advance(4000)
    ctx.join("b", subscribed_topic_names=("foo",))
    assert ctx.group().target_assignment_epoch == 2
    ctx.advance(1000)
    ctx.ack("a")
    assert ctx.group().target_assignment_epoch == 3


def test_group_interval_override_zero_disables_batching_for_that_group_only() -> None:
    ctx = batched(10_000)
    ctx.apply(ctx.shard.alter_group_configs("fast", {"consumer.assignment.interval.ms": "0"}, False, ctx.now))
    for gid in ("fast", "grp"):
        ctx.join("a", group_id=gid, subscribed_topic_names=("foo",))
        ctx.join("b", group_id=gid, subscribed_topic_names=("foo",))
    assert ctx.group("fast").target_assignment_epoch == 3
    assert ctx.group("grp").target_assignment_epoch == 2


def test_group_interval_minus_1_means_the_brokers_interval() -> None:
    ctx = batched(1000)
    ctx.apply(ctx.shard.alter_group_configs("grp", {"consumer.assignment.interval.ms": "-1"}, False, ctx.now))
    assert ctx.shard.assignment_interval_ms("grp") == 1000
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.join("b", subscribed_topic_names=("foo",))
    assert ctx.group().target_assignment_epoch == 2


def test_a_batched_group_converges_once_the_interval_passes() -> None:
    ctx = batched(1000)
    for member in "abc":
        ctx.join(member, subscribed_topic_names=("foo",))
        ctx.advance(100)
    assert ctx.group().state() is ConsumerGroupState.ASSIGNING
    ctx.advance(1000)
    ctx.stabilise()
    assert sum(len(ps) for m in ctx.group().members.values() for ps in m.assigned_partitions.values()) == 6
