"""A group's whole state, of any type, as one unit: forgotten, written out as records, or put back.

Three paths treat a group this way and must agree on what "the group" is: a state partition moving to another
instance (`partitioning.drop_groups`), an operation that failed or was refused (the runtime puts the groups
it touched back to their committed state: `runtime/committed_image.py`), and a snapshot. So there is one
answer, here, for every group type: the group object (consumer, classic, share) or the streams group, its
committed offsets, its config overrides, when it became empty, and its timers.

Nothing here writes a record: tombstones are replayed in memory only (the log keeps what it holds).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from groupcoord.coordinator.core.records import (
    ConsumerGroupMetadataTombstone,
    GroupConfig,
    GroupEmptySince,
    GroupEmptySinceTombstone,
    OffsetCommitTombstone,
)
from groupcoord.coordinator.core.results import CancelTimer, Result, TimerOp
from groupcoord.coordinator.core.snapshot import timers_after_load

if TYPE_CHECKING:
    from groupcoord.coordinator.core.shard import GroupCoordinatorShard


def known_group_ids(shard: GroupCoordinatorShard) -> set[str]:
    """Every group id the shard holds anything for, of every type: groups, streams groups, committed offsets,
    config overrides, empty-since marks."""
    return (set(shard.groups) | set(shard.offsets.group_ids())
            | set(shard.group_configs) | set(shard.empty_since))


def group_records(shard: GroupCoordinatorShard, group_id: str) -> list[Any]:
    """The records that rebuild everything the shard holds for `group_id` when replayed into a shard that
    holds nothing for it (the per-group slice of `snapshot.snapshot_records`)."""
    out: list[Any] = []
    configs = shard.group_configs.get(group_id)
    if configs:
        out.append(GroupConfig(group_id, dict(configs)))
    group = shard.groups.get(group_id)
    if group is not None:
        out.extend(group.snapshot_records())
    out.extend(shard.offsets.committed(group_id).values())
    since = shard.empty_since.get(group_id)
    if since is not None:
        out.append(GroupEmptySince(group_id, since))
    return out


def forget_groups(shard: GroupCoordinatorShard, group_ids: Iterable[str]) -> list[TimerOp]:
    """Drop every trace of `group_ids` from memory; returns the cancellations of every timer they armed. The
    shard notes the deadline of every timer any group type arms (`note_timers`, `arm_timer`), and a timer that
    fires without one does nothing, so its deadlines are the groups' timers: no type lists its own."""
    gids = set(group_ids)
    for gid in gids:
        if gid in shard.groups:
            shard.replay(ConsumerGroupMetadataTombstone(gid))  # drops a group of any type (consumer/replay.py)
        for topic, partition in list(shard.offsets.committed(gid)):
            shard.replay(OffsetCommitTombstone(gid, topic, partition))
        if gid in shard.empty_since:
            shard.replay(GroupEmptySinceTombstone(gid))
        if gid in shard.group_configs:
            shard.replay(GroupConfig(gid, {}))
    armed = [k for k in shard.timer_deadlines if len(k) > 1 and k[1] in gids]
    for key in armed:
        del shard.timer_deadlines[key]
    for key in [k for k in shard.rebalance_timer_epochs if k[0] in gids]:
        del shard.rebalance_timer_epochs[key]
    return [CancelTimer(k) for k in armed]


def restore_groups(shard: GroupCoordinatorShard, group_ids: frozenset[str], records: Iterable[Any],
                   now: int) -> Result[None]:
    """Replace the state of `group_ids` with `records` (theirs, in log order): forget them, replay, and arm their
    timers as after a load. The result cancels their old timers and arms the new ones."""
    result: Result[None] = Result(None)
    result.timers.extend(forget_groups(shard, group_ids))
    for record in records:
        shard.replay(record)
    result.timers.extend(timers_after_load(shard, now, group_ids).timers)
    return result
