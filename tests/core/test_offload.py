"""KIP-1263 assignor offload: at most one run in flight per group, its result applied when it completes,
corrected for what changed meanwhile; a group-level override of group.consumer.assignor.offload.enable."""

from __future__ import annotations

from typing import Any

from groupcoord.coordinator.core.errors import Errors
from groupcoord.coordinator.core.modern.assignor_runs import AssignorCompletion
from groupcoord.coordinator.core.records import ConsumerGroupTargetAssignmentMetadata
from tests.core.context import CoreContext, check_group_invariants, tid

FOO = tid("foo")


def offloaded(**config: Any) -> CoreContext:
    return CoreContext({"foo": 6}, auto_complete_runs=False, group_consumer_assignor_offload_enable=True,
                       group_consumer_assignors="range", **config)


def test_offloaded_run_gives_no_new_target_until_it_completes() -> None:
    ctx = offloaded()
    r = ctx.join("a", subscribed_topic_names=("foo",))
    assert [run.assignment_epoch for run in ctx.pending_runs] == [2]
    assert r.member_epoch == 1 and r.assignment == {}
    assert ctx.heartbeat(member_id="a", member_epoch=1).assignment is None
    assert ctx.group().target_assignment_epoch == 0
    ctx.complete_runs()
    assert ctx.group().target_assignment_epoch == 2
    r = ctx.heartbeat(member_id="a", member_epoch=1, topic_partitions={})
    assert r.member_epoch == 2 and r.assignment == ctx.tps(foo=range(6))


def test_at_most_one_run_in_flight_per_group() -> None:
    ctx = offloaded()
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.join("b", subscribed_topic_names=("foo",))
    ctx.join("c", subscribed_topic_names=("foo",))
    assert len(ctx.pending_runs) == 1
    assert ctx.shard.stats.assignor_skipped_inflight == 2
    ctx.join("x", group_id="other", subscribed_topic_names=("foo",))
    assert len(ctx.pending_runs) == 2  # another group has its own run


def test_result_is_applied_at_the_run_epoch_and_the_next_heartbeat_starts_the_next_run() -> None:
    ctx = offloaded()
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.join("b", subscribed_topic_names=("foo",))
    ctx.advance(250)
    ctx.complete_runs()
    group = ctx.group()
    assert group.target_assignment_epoch == 2 < group.group_epoch == 3
    assert group.target_assignment == {"a": {FOO: frozenset(range(6))}, "b": {}}
    assert ConsumerGroupTargetAssignmentMetadata("grp", 2, ctx.now) in ctx.records
    ctx.heartbeat(member_id="b", member_epoch=1, topic_partitions={})
    assert [run.assignment_epoch for run in ctx.pending_runs] == [3]
    assert set(ctx.pending_runs[0].spec.members) == {"a", "b"}


def test_a_deleted_group_discards_the_result_of_its_run() -> None:
    ctx = offloaded()
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.heartbeat(member_id="a", member_epoch=-1)
    [deleted] = ctx.apply(ctx.shard.delete_groups(["grp"], ctx.now))
    assert deleted.error_code is Errors.NONE
    before = len(ctx.records)
    ctx.complete_runs()
    assert ctx.records[before:] == []
    assert "grp" not in ctx.shard.groups
    assert ctx.shard.stats.assignor_results_discarded == 1


def test_a_recreated_group_discards_the_result_of_the_deleted_groups_run() -> None:
    ctx = offloaded()
    ctx.join("a", subscribed_topic_names=("foo",))
    old_run = ctx.pending_runs.pop()
    ctx.heartbeat(member_id="a", member_epoch=-1)
    ctx.apply(ctx.shard.delete_groups(["grp"], ctx.now))
    ctx.join("b", subscribed_topic_names=("foo",))
    stale = ctx.shard.on_assignment_complete(
        AssignorCompletion("grp", old_run.run_id, {"a": {FOO: frozenset(range(6))}}), ctx.now)
    assert stale.records == []
    ctx.complete_runs()
    assert ctx.group().target_assignment == {"b": {FOO: frozenset(range(6))}}


def test_members_removed_while_the_run_was_in_flight_lose_their_assignment() -> None:
    ctx = offloaded()
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.complete_runs()
    ctx.ack("a")
    ctx.join("b", subscribed_topic_names=("foo",))  # run for {a, b} at epoch 3
    ctx.heartbeat(member_id="b", member_epoch=-1)
    ctx.complete_runs()
    group = ctx.group()
    assert "b" not in group.target_assignment
    assert group.target_assignment["a"] == {FOO: frozenset({0, 1, 2})}  # range split for a and b
    check_group_invariants(group)
    ctx.ack("a")  # starts the next run (epoch 4), which gives a everything back
    assert [r.assignment_epoch for r in ctx.pending_runs] == [4]
    ctx.complete_runs()
    ctx.stabilise()
    assert ctx.member("a").assigned_sets() == ctx.tps(foo=range(6))


def test_a_group_tracks_the_members_removed_since_its_run_started() -> None:
    # Applying the run's result then looks at these ids, not at every member of a large group.
    ctx = offloaded()
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.complete_runs()
    ctx.ack("a")
    ctx.join("b", subscribed_topic_names=("foo",))  # run for {a, b}
    ctx.join("c", subscribed_topic_names=("foo",))  # joins during the run
    ctx.heartbeat(member_id="b", member_epoch=-1)
    ctx.heartbeat(member_id="c", member_epoch=-1)
    assert list(ctx.group().removed_since_run or ()) == ["b", "c"]
    ctx.complete_runs()
    assert set(ctx.group().target_assignment) == {"a"}
    assert ctx.fresh_replay().groups["grp"].removed_since_run is None  # unknown after a load: every id is checked


def test_a_replaced_static_members_assignment_moves_to_its_new_member_id() -> None:
    ctx = offloaded()
    ctx.join("a", instance_id="i-a", subscribed_topic_names=("foo",))
    ctx.complete_runs()
    ctx.join("b", instance_id="i-b", subscribed_topic_names=("foo",))  # a run in flight for {a, b}
    ctx.heartbeat(member_id="b", member_epoch=-2, instance_id="i-b")
    ctx.join("b2", instance_id="i-b", subscribed_topic_names=("foo",))
    ctx.complete_runs()
    group = ctx.group()
    assert set(group.target_assignment) == {"a", "b2"}
    assert group.target_assignment["b2"] == {FOO: frozenset({3, 4, 5})}
    ctx.stabilise()
    assert ctx.member("b2").assigned_sets() == ctx.tps(foo={3, 4, 5})


def test_members_joining_while_the_run_was_in_flight_get_an_empty_target_until_the_next_run() -> None:
    ctx = offloaded()
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.join("b", subscribed_topic_names=("foo",))
    ctx.complete_runs()
    assert ctx.group().target_assignment["b"] == {}


def test_group_override_enables_offload_when_the_broker_does_not() -> None:
    ctx = CoreContext({"foo": 6}, auto_complete_runs=False)
    ctx.apply(ctx.shard.alter_group_configs("grp", {"consumer.assignor.offload.enable": "true"}, False, ctx.now))
    assert ctx.join("a", subscribed_topic_names=("foo",)).member_epoch == 1
    assert len(ctx.pending_runs) == 1
    assert ctx.join("z", group_id="plain", subscribed_topic_names=("foo",)).member_epoch == 2


def test_group_override_disables_offload_when_the_broker_enables_it() -> None:
    ctx = offloaded()
    ctx.apply(ctx.shard.alter_group_configs("grp", {"consumer.assignor.offload.enable": "false"}, False, ctx.now))
    r = ctx.join("a", subscribed_topic_names=("foo",))
    assert r.member_epoch == 2 and r.assignment == ctx.tps(foo=range(6)) and ctx.pending_runs == []


def test_a_failed_run_keeps_the_old_target_and_the_next_heartbeat_runs_again() -> None:
    ctx = offloaded()
    ctx.join("a", subscribed_topic_names=("foo",))
    [run] = ctx.pending_runs
    ctx.complete_run(run.run_id, fail=True)
    group = ctx.group()
    assert group.target_assignment_epoch == 0 and group.inflight is None
    assert ctx.shard.stats.assignor_failures == 1
    ctx.heartbeat(member_id="a", member_epoch=1)
    assert [r.assignment_epoch for r in ctx.pending_runs] == [2]


def test_a_completion_for_another_run_id_is_discarded() -> None:
    ctx = offloaded()
    ctx.join("a", subscribed_topic_names=("foo",))
    [run] = ctx.pending_runs
    result = ctx.shard.on_assignment_complete(AssignorCompletion("grp", run.run_id + 100, {}), ctx.now)
    assert result.records == [] and ctx.group().inflight is not None


def test_describe_names_the_assignor_of_an_offloaded_run() -> None:
    ctx = offloaded()
    ctx.join("a", subscribed_topic_names=("foo",))
    ctx.complete_runs()
    [described] = ctx.shard.describe_groups(["grp"], ctx.now).response
    assert described.assignor_name == "range"


def test_single_member_group_gets_its_assignment_one_heartbeat_later_with_offload() -> None:
    ctx = CoreContext({"foo": 6}, group_consumer_assignor_offload_enable=True)  # runs finish at once
    r = ctx.join("a", subscribed_topic_names=("foo",))
    assert r.member_epoch == 1 and r.assignment == {}
    ctx.advance(5000)
    r = ctx.heartbeat(member_id="a", member_epoch=1, topic_partitions={})
    assert r.member_epoch == 2 and r.assignment == ctx.tps(foo=range(6))
