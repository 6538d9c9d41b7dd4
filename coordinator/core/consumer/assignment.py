"""Consumer groups' target assignment: when to compute it (KIP-1263 batching and offload), the offloaded
runs' completions, the lag input of the lag-aware assignors, and metadata changes that bump group epochs. All
pure: a computation reads the group as the operation's records leave it (`consumer/staged.py`) and returns what
else it changes (the run in flight, the spec rows, the assignor used) as volatile effects."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groupcoord.assignors.api import AssignorError, LagSnapshot, PartitionOffsets
from groupcoord.assignors.registry import get_server_assignor
from groupcoord.coordinator.core.consumer import regex_subscriptions as regex_subscriptions
from groupcoord.coordinator.core.consumer.effects import AssignorUsed, ImageSeen, RunBaseline, TargetSnapshotTaken
from groupcoord.coordinator.core.consumer.group import ConsumerGroup
from groupcoord.coordinator.core.consumer.spec_members import SpecMembers
from groupcoord.coordinator.core.consumer.staged import Staged
from groupcoord.coordinator.core.consumer.target_assignment import (
    TargetBase,
    choose_assignor,
    reconcile_result_with_group,
    snapshot_spec,
    target_records,
)
from groupcoord.coordinator.core.consumer.target_delta import as_delta
from groupcoord.coordinator.core.modern.assignor_runs import AssignorCompletion, AssignorRun
from groupcoord.coordinator.core.modern.group import (
    FIRST_GROUP_EPOCH,
    RunStarted,
    may_compute_target,
    offload,
    take_completion,
)
from groupcoord.coordinator.core.records import ConsumerGroupMetadata
from groupcoord.coordinator.core.results import Result

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard

LAG_AWARE_ASSIGNORS = frozenset({"lag", "lag-sticky"})


def subscription_hash(shard: GroupCoordinatorShard, group: ConsumerGroup | Staged) -> int:
    """The metadata hash of every topic the group subscribes to (as an operation's records leave it, for a
    `Staged` group): a change bumps the group epoch."""
    return shard.metadata.topics_hash(group.subscribed_topics())


def on_metadata_update(shard: GroupCoordinatorShard, now: int, result: Result[None]) -> None:
    """New topic metadata (already `shard.metadata`): bump the epoch of every consumer group whose subscribed
    topics changed, so the next heartbeat recomputes its target assignment. Pure: `result` applies it."""
    for group in list(shard.groups.values()):
        if not isinstance(group, ConsumerGroup) or not group.members:
            continue
        regex_subscriptions.maybe_resolve(shard, group, now, result)
        new_hash = subscription_hash(shard, group)
        if new_hash != group.metadata_hash:
            shard._write(result, ConsumerGroupMetadata(group.group_id, group.group_epoch + 1, new_hash))
            shard.stats.metadata_bumps += 1


def after_member_update(shard: GroupCoordinatorShard, staged: Staged, bump: bool, subscription_changed: bool,
                        now: int) -> None:
    """After a member's records were written (a consumer heartbeat or a classic member's JoinGroup): bump the
    group epoch when the assignment inputs changed (`bump`: a new member, a changed subscription, rack or
    assignor) or the subscribed topics' metadata did, then compute the target if it is behind (KIP-1263)."""
    group, result = staged.group, staged.result
    if subscription_changed:
        regex_subscriptions.drop_unused(staged)
    regex_subscriptions.maybe_resolve(shard, group, now, result, staged)
    if bump or group.metadata_image_seen is not shard.metadata:
        new_hash = subscription_hash(shard, staged)
        result.memory.append(ImageSeen(group.group_id, shard.metadata))
        if bump or new_hash != staged.metadata_hash:
            new_epoch = max(staged.group_epoch + 1, FIRST_GROUP_EPOCH)
            staged.write(ConsumerGroupMetadata(group.group_id, new_epoch, new_hash))
    if staged.group_epoch > staged.target_assignment_epoch:
        maybe_compute_target(shard, staged, now)


def maybe_compute_target(shard: GroupCoordinatorShard, staged: Staged, now: int) -> None:
    """KIP-1263 (`modern/group.py`): run the assignor unless a run is in flight or the interval since the last
    computation has not passed; on the executor when offload is enabled."""
    group, result = staged.group, staged.result
    if not may_compute_target(group.inflight, staged.assignment_timestamp_ms or None, now,
                              shard.assignment_interval_ms(group.group_id), shard.stats):
        return
    assignor_name = choose_assignor(staged.counts()[1], shard.config["group.consumer.assignors"])
    spec, taken, store = snapshot_spec(group, shard.metadata, staged.resolved_topics, staged)
    if taken is not None:
        result.memory.append(taken)
    if store is not group.target_assignment:  # a copy with the operation's targets: the group keeps its snapshot
        result.memory.append(TargetSnapshotTaken(group.group_id, store))
    result.memory.append(RunBaseline(group.group_id))
    lag = _lag_snapshot(shard, group, assignor_name, spec)
    epoch = staged.group_epoch
    if shard.offload_enabled(group.group_id):
        run = offload(shard._run_ids, epoch, shard.stats,
                      {mid: iid for iid, mid in staged.static_members().items()}, assignor_name)
        result.memory.append(RunStarted(group.group_id, run))
        result.tasks.append(AssignorRun(group.group_id, run.run_id, assignor_name, epoch, spec, shard.metadata, lag))
        return
    shard.stats.assignor_runs_sync += 1
    try:
        assignment = get_server_assignor(assignor_name).assign(spec, shard.metadata, lag)
    except AssignorError:
        shard.stats.assignor_failures += 1
        return
    result.memory.append(AssignorUsed(group.group_id, assignor_name))
    base = TargetBase(group.group_id, staged.post_members(), store, {})  # no member added since the reset above
    for record in target_records(base, as_delta(spec, assignment), epoch, now):  # changed members' records only
        staged.write(record)


def on_assignment_complete(shard: GroupCoordinatorShard, completion: AssignorCompletion, now: int) -> Result[None]:
    """An offloaded run finished. Apply it unless the group is gone or the run is stale, after
    applying what changed meanwhile (removed members dropped, replaced static members moved). Pure: the run
    ends by `RunEnded`, applied with the records."""
    result: Result[None] = Result(None)
    found = shard.groups.get(completion.group_id)
    group = found if isinstance(found, ConsumerGroup) else None
    inflight = take_completion(group, completion, shard.stats, result)
    if group is None or inflight is None or completion.assignment is None:
        return result
    result.memory.append(AssignorUsed(group.group_id, inflight.assignor_name))
    new_target = reconcile_result_with_group(group, completion.assignment, inflight.instance_ids)
    for record in target_records(group, new_target, inflight.assignment_epoch, now):
        shard._write(result, record)
    return result


def _lag_snapshot(shard: GroupCoordinatorShard, group: ConsumerGroup, assignor_name: str,
                  spec: Any) -> LagSnapshot | None:
    """The lag-aware assignors' input: the runtime's last known log offsets and the group's commits."""
    if assignor_name not in LAG_AWARE_ASSIGNORS:
        return None
    reset = str(shard.group_config(group.group_id, "consumer.auto.offset.reset"))
    members = spec.members
    subs = members.distinct_subscriptions() if isinstance(members, SpecMembers) \
        else [m.subscribed_topic_ids for m in members.values()]
    topic_ids = set().union(*subs)
    tps: list[tuple[str, int]] = []
    for tid in sorted(topic_ids):
        t = shard.metadata.by_id.get(tid)
        if t is not None:
            tps.extend((t.name, p) for p in range(t.partition_count))
    kafka = shard.lag_provider.offsets(tps) if shard.lag_provider is not None else {}
    committed = shard.offsets.committed(group.group_id)
    offsets: dict[tuple[str, int], PartitionOffsets] = {}
    for name, p in tps:
        start_end = kafka.get((name, p))
        c = committed.get((name, p))
        if start_end is None and c is None:
            continue
        start, end = start_end if start_end is not None else (0, c.committed_offset if c else 0)
        offsets[(shard.metadata.by_name[name].topic_id, p)] = PartitionOffsets(
            end_offset=end, committed_offset=None if c is None else c.committed_offset, log_start_offset=start)
    return LagSnapshot(offsets=offsets, auto_offset_reset=reset)
