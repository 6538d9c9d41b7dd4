"""Putting groups back to what the log holds, after the log refused an operation on them.

The shard applies an operation's records as it computes them, so when the log then refuses the operation (too
large to read back: `RecordTooLargeError`), memory is ahead of the log for the groups it touched. Kafka's
runtime reverts its timeline snapshots to the last written offset; we have no timeline, so the group is
cleared with the same tombstone records a deletion writes and rebuilt by replaying the group's records read
back from the log, exactly as a restart would. Only the groups the refused operation touched are affected.
"""

from __future__ import annotations

from typing import Any

from groupcoord.coordinator.core import records as r
from groupcoord.coordinator.core.results import Result
from groupcoord.coordinator.core.shard import GroupCoordinatorShard
from groupcoord.coordinator.core.snapshot import timers_after_load
from groupcoord.coordinator.core.streams_records import StreamsGroupMetadataTombstone


def reset_groups(shard: GroupCoordinatorShard, group_ids: frozenset[str], durable: list[Any],
                 now: int) -> Result[None]:
    """Replace the state of `group_ids` with `durable` (their records as the log holds them, in order); returns
    the timers to arm for the rebuilt groups (as after a load)."""
    for gid in group_ids:
        group = shard.groups.get(gid)
        if group is not None:
            for record in group.deletion_records():
                shard.replay(record)
        if gid in shard.streams.groups:
            shard.replay(StreamsGroupMetadataTombstone(gid))  # drops the whole streams group
        for topic, partition in list(shard.offsets.committed(gid)):
            shard.replay(r.OffsetCommitTombstone(gid, topic, partition))
        shard.replay(r.GroupConfig(gid, {}))
    for record in durable:
        shard.replay(record)
    # Only the rebuilt groups' timers: other groups' timers are armed already.
    return timers_after_load(shard, now, group_ids)
