"""A worker process sends back only the members whose target it changed, and the coordinator writes records for
those members only, over the snapshot the run was given; whatever happened to the group while the run was in
flight, the target ends exactly as if the whole result had come back."""

from __future__ import annotations

import pickle
import random
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.assignors.api import GroupSpec
from groupcoord.assignors.overlay import OverlayAssignment
from groupcoord.assignors.registry import get_server_assignor
from groupcoord.coordinator.core.consumer.group import ConsumerGroup
from groupcoord.coordinator.core.consumer.spec_members import SpecMembers
from groupcoord.coordinator.core.consumer.target_assignment import build_spec
from groupcoord.coordinator.core.consumer.target_delta import TargetDelta, assignment_changes
from groupcoord.coordinator.core.modern.assignor_runs import AssignorCompletion
from groupcoord.coordinator.core.records import ConsumerGroupTargetAssignmentMember
from groupcoord.coordinator.runtime.executor import compact_run, run_compact
from tests.core.context import CoreContext, as_in_a_worker_process, check_group_invariants, shard_state


def offloaded(assignor: str = "uniform", partitions: int = 60) -> CoreContext:
    return CoreContext({"foo": partitions, "bar": 7}, auto_complete_runs=False,
                       group_consumer_assignor_offload_enable=True, group_consumer_assignors=assignor)


def stable_group(members: int, assignor: str = "uniform") -> CoreContext:
    ctx = offloaded(assignor)
    for i in range(members):
        ctx.join(f"m{i}", subscribed_topic_names=("foo",))
    settle(ctx)
    return ctx


def settle(ctx: CoreContext) -> None:
    """Complete runs and let members ack until the group is STABLE with no run in flight."""
    for _ in range(20):
        ctx.complete_runs()
        group = ctx.group()
        if group.state().value == "STABLE" and not ctx.pending_runs:
            return
        for mid in sorted(group.members):
            ctx.ack(mid)
    raise AssertionError(f"the group did not settle: {ctx.group().state()}")


def test_a_worker_sends_back_only_the_members_whose_target_changed() -> None:
    ctx = stable_group(30)
    ctx.join("new", subscribed_topic_names=("foo",))
    [run] = ctx.pending_runs
    outcome = run_compact(pickle.loads(pickle.dumps(compact_run(run))))
    assert outcome.chunks == () and outcome.changes is not None
    assert "new" in outcome.changes and len(outcome.changes) < 10
    whole = get_server_assignor("uniform").assign(run.spec, run.topics, None)
    for m, partitions in outcome.changes.items():
        assert partitions == {t: frozenset(ps) for t, ps in whole[m].items() if ps}
    assert len(pickle.dumps(outcome)) < len(pickle.dumps(dict(whole.items()))) / 3


def overlay_of(run: Any) -> tuple[GroupSpec, OverlayAssignment]:
    """The run's snapshot pickled as a worker gets it, and `uniform`'s result on it: an overlay over its
    members."""
    spec = pickle.loads(pickle.dumps(run.spec))
    out = get_server_assignor("uniform").assign(spec, run.topics, None)
    assert isinstance(out, OverlayAssignment) and out.members is spec.members
    return spec, out


def test_an_overlay_tells_the_same_changes_as_the_same_result_as_a_dict() -> None:
    ctx = stable_group(30)
    ctx.heartbeat(member_id="m3", member_epoch=-1)
    ctx.join("new", subscribed_topic_names=("foo",))
    assert ctx.pending_runs
    for run in ctx.pending_runs:
        spec, out = overlay_of(run)
        fast = assignment_changes(spec, out)
        slow = assignment_changes(spec, dict(out.items()))
        assert fast is not None and fast == slow
        assert list(fast) == sorted(fast)  # deterministic: the overridden members sorted
        assert set(fast) <= set(out.overrides)
    assert fast is not None and "new" in fast


def test_a_newcomer_the_overlay_leaves_empty_is_still_listed() -> None:
    ctx = offloaded("uniform", 4)
    for i in range(4):
        ctx.join(f"m{i}", subscribed_topic_names=("foo",))
    settle(ctx)
    ctx.join("new", subscribed_topic_names=("foo",))  # 4 partitions over 5: nothing for it to take
    [run] = ctx.pending_runs
    spec, out = overlay_of(run)
    assert "new" not in out.overrides
    assert assignment_changes(spec, out) == {"new": {}} == assignment_changes(spec, dict(out.items()))


def test_records_are_written_only_for_the_members_the_run_changed() -> None:
    ctx = stable_group(30)
    ctx.join("new", subscribed_topic_names=("foo",))
    start = len(ctx.records)
    ctx.complete_runs()
    written = {r.member_id for r in ctx.records[start:] if isinstance(r, ConsumerGroupTargetAssignmentMember)}
    assert "new" in written and 1 < len(written) < 10
    check_group_invariants(ctx.group())


def test_the_spec_crosses_to_a_worker_as_columns_and_reads_as_member_specs() -> None:
    ctx = stable_group(12)
    group = ctx.group()
    spec = build_spec(group, ctx.shard.metadata, group.resolved_topics)
    assert isinstance(spec.members, SpecMembers)
    copy = pickle.loads(pickle.dumps(spec))
    assert list(copy.members) == list(spec.members)
    for m in spec.members:
        assert copy.members[m].subscribed_topic_ids == spec.members[m].subscribed_topic_ids
        assert dict(copy.members[m].assigned_partitions) == dict(group.target_assignment[m])


def test_a_target_set_while_the_run_was_in_flight_is_not_taken_for_the_snapshots() -> None:
    ctx = stable_group(6)
    ctx.join("x", instance_id="i-x", subscribed_topic_names=("foo",))
    settle(ctx)
    ctx.join("y", subscribed_topic_names=("foo",))  # a run in flight over a snapshot with x's target
    ctx.heartbeat(member_id="x", member_epoch=-2, instance_id="i-x")
    ctx.join("x2", instance_id="i-x", subscribed_topic_names=("foo",))  # x's target is set for x2 meanwhile
    store = ctx.group().target_assignment
    assert not store.holds_since(ctx.pending_runs[0].spec.current)
    settle(ctx)
    check_group_invariants(ctx.group())
    assert "x" not in store and store["x2"]
    assert shard_state(ctx.fresh_replay()) == shard_state(ctx.shard)


def assert_the_kept_spec_rows_match_a_fresh_build(ctx: CoreContext, group: ConsumerGroup) -> None:
    """The rows, subscribed names and assignor votes the group keeps up to date equal those computed afresh
    from its members, in the members' order."""
    kept = build_spec(group, ctx.shard.metadata, group.resolved_topics)
    group.spec_dirty = None
    fresh = build_spec(group, ctx.shard.metadata, group.resolved_topics)
    assert isinstance(kept.members, SpecMembers) and isinstance(fresh.members, SpecMembers)
    assert list(kept.members.rows.items()) == list(fresh.members.rows.items())
    assert list(kept.members) == list(group.members)
    assert kept.subscription_type == fresh.subscription_type
    assert group.subscribed_topic_names() == set().union(*(m.subscribed_topic_names for m in group.members.values()))
    assert group.assignor_counts == dict(Counter(m.server_assignor for m in group.members.values()
                                                 if m.server_assignor))


def _whole(run: Any) -> Any:
    """The run's result as a plain mapping, every member's partitions: the way it came back before deltas."""
    out = get_server_assignor(run.assignor_name).assign(run.spec, run.topics, run.lag)
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()}


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), assignor=st.sampled_from(["uniform", "range", "lag-sticky"]))
def test_a_delta_over_churn_during_the_run_ends_as_the_whole_result_would(seed: int, assignor: str) -> None:
    rng = random.Random(seed)
    by_delta, by_whole = offloaded(assignor, 40), offloaded(assignor, 40)
    static: dict[str, str] = {}
    live: list[str] = []
    for step in range(40):
        op = rng.random()
        instance = f"i{step}" if rng.random() < 0.3 else None
        for ctx in (by_delta, by_whole):
            if op < 0.35 or not live:
                mid = f"m{step}"
                ctx.join(mid, instance_id=instance, subscribed_topic_names=("foo",) if op < 0.3 else ("foo", "bar"))
            elif op < 0.5:
                ctx.heartbeat(member_id=live[0], member_epoch=-1)
            elif op < 0.6 and static:
                old, instance = next(iter(static.items()))
                ctx.heartbeat(member_id=old, member_epoch=-2, instance_id=instance)
                ctx.join(f"s{step}", instance_id=instance, subscribed_topic_names=("foo",))
            elif op < 0.8:
                for run in list(ctx.pending_runs):
                    ctx.pending_runs.remove(run)
                    assignment = _whole(run) if ctx is by_whole else None
                    if assignment is None:
                        assignment = as_in_a_worker_process(run)
                        assert isinstance(assignment, TargetDelta) or run.spec.current is None
                    ctx.apply(ctx.shard.on_assignment_complete(
                        AssignorCompletion(run.group_id, run.run_id, assignment), ctx.now))
            else:
                for mid in sorted(ctx.group().members):
                    ctx.ack(mid)
        group = by_delta.shard.groups.get("grp")
        live = sorted(group.members) if group is not None else []  # type: ignore[union-attr]
        static = {m: group.members[m].instance_id for m in live  # type: ignore[union-attr,misc]
                  if group.members[m].instance_id}  # type: ignore[union-attr]
        assert shard_state(by_delta.shard) == shard_state(by_whole.shard)
        if group is not None:
            assert_the_kept_spec_rows_match_a_fresh_build(by_delta, group)  # type: ignore[arg-type]
    check_group_invariants(by_delta.group())
    assert shard_state(by_delta.fresh_replay()) == shard_state(by_delta.shard)
